#!/usr/bin/env bash
# Builds (if needed) and runs the CPU training benchmark against the PyTorch peer
# (shared/tools/torch_lstm_anchor.py, the same network in PyTorch), and prints a
# ratio table. Targets: >= 2.5x the peer's best training tokens/s at vocab 100,
# >= 60% of the GEMM peak measured in the same run.
#
#   bench/run_train_bench.sh [--steps N] [--no-peer]
#
# The peer is looked up in ../shared/tools (CI: the repo's sibling shared/) or
# ../../shared/tools (a worktree under wt/); override with DS_PEER=path.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR=${BUILD_DIR:-build}
STEPS=6
PEER_ON=1
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --no-peer) PEER_ON=0; shift ;;
    *) echo "usage: $0 [--steps N] [--no-peer]" >&2; exit 2 ;;
  esac
done
BENCH="$ROOT/$BUILD_DIR/train_bench"
if [ ! -x "$BENCH" ]; then
  (cd "$ROOT" && BUILD_DIR="$BUILD_DIR" ./scripts/build.sh >&2)
else
  cmake --build "$ROOT/$BUILD_DIR" --target train_bench >&2
fi
PEER=${DS_PEER:-}
if [ -z "$PEER" ]; then
  for d in "$ROOT/../shared/tools" "$ROOT/../../shared/tools"; do
    if [ -f "$d/torch_lstm_anchor.py" ]; then PEER="$d/torch_lstm_anchor.py"; break; fi
  done
fi
PY=/usr/bin/python3
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== datasynth (train_bench --steps $STEPS)"
"$BENCH" --vocab 100,5000 --steps "$STEPS" --json | tee "$OUT/ds.jsonl"

if [ "$PEER_ON" = 1 ] && [ -n "$PEER" ] && "$PY" -c 'import torch' 2>/dev/null; then
  echo "== peer: $PEER"
  for v in 100 5000; do
    for t in 1 2; do
      "$PY" "$PEER" --vocab "$v" --threads "$t" --json | tee -a "$OUT/peer.jsonl"
    done
  done
else
  echo "== peer skipped (no PyTorch for $PY, no torch_lstm_anchor.py, or --no-peer)"
  : > "$OUT/peer.jsonl"
fi

"$PY" - "$OUT/ds.jsonl" "$OUT/peer.jsonl" <<'PYEOF'
import json, sys
ds = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peer = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
print()
print(f"{'vocab':>6} {'datasynth tok/s':>16} {'peer best tok/s':>16} {'(threads)':>9} {'ratio':>6}"
      f" {'GFLOP/s':>8} {'of peak':>8} {'infer64':>9} {'peer sample':>11} {'ratio':>6}")
for r in ds:
    p = [x for x in peer if x["vocab"] == r["vocab"]]
    best = max(p, key=lambda x: x["train_tokens_per_s"]) if p else None
    bs = max(p, key=lambda x: x["sample_tokens_per_s"]) if p else None
    ratio = r["train_tokens_per_s"] / best["train_tokens_per_s"] if best else float("nan")
    sratio = r["infer64_tokens_per_s"] / bs["sample_tokens_per_s"] if bs else float("nan")
    print(f"{r['vocab']:>6} {r['train_tokens_per_s']:>16.0f} "
          f"{(best['train_tokens_per_s'] if best else float('nan')):>16.0f} "
          f"{(best['threads'] if best else '-'):>9} {ratio:>6.2f} {r['train_gflops']:>8.1f} "
          f"{100 * r['peak_fraction']:>7.1f}% {r['infer64_tokens_per_s']:>9.0f} "
          f"{(bs['sample_tokens_per_s'] if bs else float('nan')):>11.0f} {sratio:>6.2f}")
print(f"\nGEMM peak measured in the run: {ds[0]['gemm_peak_gflops']:.1f} GFLOP/s; "
      "targets: ratio >= 2.5 at vocab 100, >= 60% of peak")
PYEOF
