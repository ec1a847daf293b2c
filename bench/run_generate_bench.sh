#!/usr/bin/env bash
# Generation benchmark beside the PyTorch peer, in one run on one machine.
#   bench/run_generate_bench.sh [build dir] [extra generate_bench args...]
# Runs ../shared/tools/torch_lstm_anchor.py (sampling: 64 lines side by side,
# vocab 100, the same network) with 1 and 2 threads, keeps the faster figure,
# then build/generate_bench with 1 and 2 workers and the ratios to the peer.
# Targets (the generation issue): >= 3x the peer with 2
# workers, >= 1.8x from 1 to 2 workers, each worker's own memory <= 30 MB
# beside the shared weights.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
PEER=../shared/tools/torch_lstm_anchor.py
PY=/usr/bin/python3
best=0
if [ -f "$PEER" ] && "$PY" -c "import torch" 2>/dev/null; then
  for t in 1 2; do
    out=$("$PY" "$PEER" --vocab 100 --threads "$t" --steps 3 --json)
    echo "peer threads=$t: $out"
    v=$(echo "$out" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['sample_tokens_per_s'])")
    if [ "$v" -gt "$best" ]; then best=$v; fi
  done
  echo "peer sampling (faster of 1 and 2 threads): $best tokens/s"
else
  echo "PyTorch peer not available (needs $PEER and python3-torch): ratios skipped"
fi
"$BUILD"/generate_bench --vocab 100 --slots 64 --workers 1,2 --peer-tokens-per-s "$best" "$@"
