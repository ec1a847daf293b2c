#!/usr/bin/env bash
# Sets up dependencies, builds (Release) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build} ./scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j2 --timeout 600)
./scripts/test_python.sh  # the Python package: pip install ./python into a venv, pytest
