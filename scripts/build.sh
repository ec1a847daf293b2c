#!/usr/bin/env bash
# Configures and builds datasynth in build/ (Release). Extra args go to cmake.
# BUILD_TARGET=datasynth builds only the CLI (what the demo runs).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
if [ -n "${BUILD_TARGET:-}" ]; then
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target "$BUILD_TARGET"
else
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
