#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent:
# packages already present are skipped without touching the network.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git
      libsentencepiece-dev sentencepiece libdnnl-dev libopenblas-dev
      ocl-icd-opencl-dev opencl-headers  # libdnnl-dev's CMake config needs OpenCL (only a recommendation of it)
      libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev python3
      python3-venv python3-dev python3-pip  # scripts/test_python.sh: the Python package
      clang libclang-rt-dev libomp-dev  # scripts/sanitize.sh, scripts/fuzz.sh
      openmpi-bin libopenmpi-dev iproute2 procps  # mpirun data parallelism (docs/scale.md), tests/mpi_*.sh (procps: pgrep)
      chromium)  # chromium: tests/report_render_test.sh renders the evaluation report
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present" >&2
