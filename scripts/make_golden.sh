#!/usr/bin/env bash
# Rewrites the committed golden files that the cross-check tests compare
# against, where PyTorch and SDMetrics are installed:
#   tests/data/golden/torch_lstm/  PyTorch's logits, loss and gradients of a tiny
#                                  Embedding+LSTM+Linear network (torch_crosscheck_test)
#   tests/data/golden/sdmetrics.json  SDMetrics' KSComplement / TVComplement per
#                                  column of the evaluate cases (evaluate_test)
# Then runs both tests against the new files.
#
#   PYTHON=/path/to/venv/bin/python scripts/make_golden.sh
# PYTHON: a python with torch, numpy, sdmetrics and pandas (default: python3), e.g.
#   python3 -m venv /tmp/golden && /tmp/golden/bin/pip install torch sdmetrics
# BUILD_DIR: the build to use (default build; built here if needed).
# Review the diff before committing: a changed golden means a changed reference
# or changed test inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build}
GOLDEN=tests/data/golden

"$PYTHON" -c 'import torch, numpy, sdmetrics, pandas' ||
  { echo "make_golden: $PYTHON needs torch, numpy, sdmetrics and pandas" >&2; exit 2; }
"$PYTHON" -c 'import torch, sdmetrics; print("make_golden: torch", torch.__version__, "sdmetrics", sdmetrics.__version__)'

# PyTorch: V=12 E=8 H=32 L=2, batch 2 x 6 steps, seed 7; fp32 outputs.
rm -rf "$GOLDEN/torch_lstm"
"$PYTHON" tests/torch_crosscheck.py "$GOLDEN/torch_lstm" --init 7 12 8 32 2 2 6 --out-dtype f32
echo "make_golden: wrote $GOLDEN/torch_lstm ($(du -sk "$GOLDEN/torch_lstm" | cut -f1) KiB)"

# SDMetrics: the cases are made by evaluate_test itself (it writes them and runs
# scripts/sdmetrics_crosscheck.py with the python3 first on PATH).
[ -x "$BUILD_DIR/evaluate_test" ] || BUILD_DIR=$BUILD_DIR ./scripts/build.sh
cmake --build "$BUILD_DIR" --target evaluate_test torch_crosscheck_test
PATH="$(dirname "$(command -v "$PYTHON")"):$PATH" DS_WRITE_GOLDEN="$PWD/$GOLDEN/sdmetrics.json" \
  "$BUILD_DIR/evaluate_test" --gtest_filter='SdMetrics.KsAndTvComplementsAgreeLive'
test -s "$GOLDEN/sdmetrics.json" || { echo "make_golden: sdmetrics.json not written" >&2; exit 1; }

"$BUILD_DIR/evaluate_test" --gtest_filter='SdMetrics.ComplementsMatchCommittedGolden'
DS_TORCH_PYTHON="$(command -v "$PYTHON")" "$BUILD_DIR/torch_crosscheck_test"  # golden and live
echo "make_golden: done; review 'git diff --stat $GOLDEN'"
