#!/usr/bin/env bash
# fp32 vs bf16 on one pinned core, alternating in one run (docs/precision.md):
# precision_bench (GEMM peaks, the step's GEMMs against them, training
# tokens/s, inference tokens/s), then `generate` records/s for each model
# directory given, by wall clock and by CPU time (user + sys of the whole
# command, workers included).
#
#   bench/precision_bench.sh [MODEL_DIR...]
#   CORE=1 (the pinned core)  N=20000 (records)  ROUNDS=2
#   BASELINE=/path/to/other/datasynth  (also runs that binary's default generate)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR=${BUILD_DIR:-build}
CORE=${CORE:-1}
N=${N:-20000}
ROUNDS=${ROUNDS:-2}
DS="$ROOT/$BUILD_DIR/datasynth"
cmake --build "$ROOT/$BUILD_DIR" --target precision_bench datasynth >&2
echo "== precision_bench (taskset -c $CORE)"
taskset -c "$CORE" "$ROOT/$BUILD_DIR/precision_bench" --rounds "$ROUNDS"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
gen() {  # gen LABEL BINARY MODEL ARGS...
  local label=$1 bin=$2 model=$3
  shift 3
  /usr/bin/time -f "%e %U %S" -o "$OUT/t" taskset -c "$CORE" "$bin" generate -m "$model" -n "$N" \
    -o "$OUT/s.csv" -p 1 --seed 1 --overwrite "$@" >/dev/null 2>&1
  read -r wall user sys <"$OUT/t"
  python3 -c "import sys; w, c = float(sys.argv[2]), float(sys.argv[3]) + float(sys.argv[4]); n = int(sys.argv[5])
print(f'{sys.argv[1]:<28} {n / w:9.0f} records/s wall ({w:.2f} s)  {n / c:9.0f} records per CPU-second ({c:.2f} s)')" \
    "$label" "$wall" "$user" "$sys" "$N"
}
for m in "$@"; do
  echo "== generate -n $N -p 1 --seed 1: $m"
  for r in $(seq "$ROUNDS"); do
    [ -n "${BASELINE:-}" ] && gen "baseline ($(basename "$BASELINE"))" "$BASELINE" "$m"
    gen "fp32" "$DS" "$m" --precision fp32
    gen "bf16" "$DS" "$m" --precision bf16
  done
done
