#!/usr/bin/env bash
# Builds and installs the Python package (python/) into a venv and runs its
# pytest suite (python/tests). Idempotent: the venv (build/pyvenv) and the
# package's CMake build folder (python/build) are reused. The tests compare
# with the CLI in $BUILD_DIR (default build/), which scripts/build.sh makes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
PYVENV=${PYVENV:-$BUILD_DIR/pyvenv}
if [ ! -x "$PYVENV/bin/python" ]; then
  python3 -m venv "$PYVENV"
fi
"$PYVENV/bin/python" -m pip install -q --disable-pip-version-check \
  "pandas==2.2.3" "numpy==2.1.3" "pytest==8.3.4" "tqdm==4.67.1"
# One command installs the package (nanobind and scikit-build-core come from PyPI).
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
  "$PYVENV/bin/python" -m pip install -q --disable-pip-version-check ./python
DATASYNTH_CLI="$PWD/$BUILD_DIR/datasynth" DATASYNTH_PROGRESS=0 \
  "$PYVENV/bin/python" -m pytest python/tests -q -p no:cacheprovider
