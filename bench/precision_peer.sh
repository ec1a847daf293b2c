#!/usr/bin/env bash
# Training speed against the gretel-synthetics peer (docs/precision.md), one
# command: on one pinned core, alternating gretel, datasynth fp32, datasynth
# bf16 for ROUNDS rounds, the same records, network (char, embedding 256,
# 2 x LSTM 256, dropout 0.2, batch 64, seq 100, RMSprop 0.01), epochs and no
# validation split. Prints per run the tokens/s each tool prints (training
# seconds only) and tokens per CPU-second of the whole command (user + sys,
# tokens = characters of the records + 1 per record, x epochs, for both), then
# the best of the rounds and the ratios to gretel.
#
#   bench/precision_peer.sh [RECORDS.csv]
#   default records: the first LINES (1500) of telco_churn's 80% split (bench/split_csv.py --seed 0)
#   CORE=1  EPOCHS=3  LINES=1500  ROUNDS=2  GRETEL_PY=/work/venvs/gretel/bin/python
#   FULL=1: issue 15's own job instead: all records of the split (LINES=0, all)
#           (5,634) and EPOCHS=15 unless set (one round: about 30 minutes idle)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR=${BUILD_DIR:-build}
DS="$ROOT/$BUILD_DIR/datasynth"
CORE=${CORE:-1}
FULL=${FULL:-0}
if [ "$FULL" = 1 ]; then
  EPOCHS=${EPOCHS:-15}
  LINES=${LINES:-0}
fi
EPOCHS=${EPOCHS:-3}
LINES=${LINES:-1500}
ROUNDS=${ROUNDS:-2}
GRETEL_PY=${GRETEL_PY:-/work/venvs/gretel/bin/python}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
SRC=${1:-$OUT/tr.csv}
if [ $# -lt 1 ]; then
  python3 "$ROOT/bench/split_csv.py" "$ROOT/../shared/datasets/telco_churn.csv" "$OUT/tr.csv" \
    "$OUT/ho.csv" --seed 0 >/dev/null
fi
if [ "$LINES" -gt 0 ]; then  # LINES=0: all records
  head -n "$((LINES + 1))" "$SRC" >"$OUT/r.csv"
else
  cp "$SRC" "$OUT/r.csv"
fi
TOKENS=$(python3 -c "import sys; l = open(sys.argv[1]).read().splitlines()[1:]; print(sum(len(x) + 1 for x in l))" "$OUT/r.csv")
echo "records: $(($(wc -l <"$OUT/r.csv") - 1)), $TOKENS tokens x $EPOCHS epochs, taskset -c $CORE, load: $(cut -d' ' -f1-3 /proc/loadavg)"
# run LABEL CMD...: prints "LABEL printed_tokens_per_s cpu_tokens_per_s" to $OUT/res
run() {
  local label=$1
  shift
  /usr/bin/time -f "%e %U %S" -o "$OUT/t" taskset -c "$CORE" "$@" >"$OUT/log" 2>&1 || {
    cat "$OUT/log" >&2
    return 1
  }
  read -r wall user sys <"$OUT/t"
  local printed
  printed=$(grep -oE '[0-9]+ tokens/s' "$OUT/log" | tail -1 | cut -d' ' -f1)
  python3 -c "import sys; lab, p, w, c = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]) + float(sys.argv[5]); t = float(sys.argv[6])
print(f'{lab:<16} {p:9.0f} tokens/s (as printed)  whole command {w:7.1f} s wall, {c:7.1f} s CPU: {t / c:9.0f} tokens per CPU-second')" \
    "$label" "$printed" "$wall" "$user" "$sys" "$((TOKENS * EPOCHS))"
  echo "$label $printed $(python3 -c "print($((TOKENS * EPOCHS)) / ($user + $sys))")" >>"$OUT/res"
}
for r in $(seq "$ROUNDS"); do
  run gretel "$GRETEL_PY" "$ROOT/bench/gretel_peer.py" "$OUT/r.csv" --epochs "$EPOCHS"
  for p in fp32 bf16; do
    run "datasynth-$p" "$DS" train -i "$OUT/r.csv" -m "$OUT/m_$p" --tokenizer char --threads 1 \
      --epochs "$EPOCHS" --validation-split false --precision "$p" --seed 1 --overwrite
  done
done
echo "best of $ROUNDS rounds (ratios to gretel's best):"
python3 - "$OUT/res" <<'EOF'
import sys
best = {}
for line in open(sys.argv[1]):
    lab, p, c = line.split()
    b = best.setdefault(lab, [0.0, 0.0])
    b[0], b[1] = max(b[0], float(p)), max(b[1], float(c))
g = best["gretel"]
for lab, (p, c) in best.items():
    print(f"{lab:<16} {p:9.0f} tokens/s ({p / g[0]:.2f}x)   {c:9.0f} tokens per CPU-second ({c / g[1]:.2f}x)")
EOF
