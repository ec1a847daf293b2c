#!/usr/bin/env bash
# DP-SGD against non-private training on the field tokenizer (docs/privacy.md,
# "DP training speed", sessions 10, 15 and 16): telco_churn's train split (80/20,
# seed 0), its public schema, 1 x LSTM 128, embedding 64, batch 512, Adam 0.02,
# 10 epochs, one thread pinned to CORE, no calibration; non-private without a
# validation split, DP at epsilon 1, delta 1/n, deterministic noise. ROUNDS
# alternating pairs; prints user CPU seconds of each run and their ratio, and
# leaves each run's log (with DATASYNTH_CPU_PROFILE=cpu's per-phase table) in WORK.
#   bench/dp_speed_field.sh [WORK]   (default /tmp/dp_speed_field)
#   env: DS (build/datasynth), DATA (/work/shared/datasets), CORE (1), ROUNDS (3),
#        EXTRA (more train flags for both sides, e.g. "--precision fp32")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/dp_speed_field}
DS=${DS:-$ROOT/build/datasynth}
DATA=${DATA:-/work/shared/datasets}
CORE=${CORE:-1}
ROUNDS=${ROUNDS:-3}
mkdir -p "$WORK"
python3 "$ROOT/bench/split_csv.py" "$DATA/telco_churn.csv" "$WORK/train.csv" "$WORK/hold.csv" --seed 0
n=$(($(wc -l <"$WORK/train.csv") - 1))
delta=$(python3 -c "print(1/$n)")
COMMON=(--input "$WORK/train.csv" --tokenizer field --schema "$ROOT/bench/schemas/telco_churn.json"
        --num-layers 1 --rnn-units 128 --embedding-dim 64 --batch-size 512 --learning-rate 0.02
        --epochs 10 --threads 1 --calibrate false --calibrate-pairs 0 --seed 1 --overwrite ${EXTRA:-})
for r in $(seq "$ROUNDS"); do
  DATASYNTH_CPU_PROFILE=cpu /usr/bin/time -f "%U" -o "$WORK/np$r.t" taskset -c "$CORE" "$DS" train \
    "${COMMON[@]}" --model-dir "$WORK/m_np" --validation-split false >"$WORK/np$r.log" 2>&1
  DATASYNTH_CPU_PROFILE=cpu /usr/bin/time -f "%U" -o "$WORK/dp$r.t" taskset -c "$CORE" "$DS" train \
    "${COMMON[@]}" --model-dir "$WORK/m_dp" --dp --dp-target-epsilon 1 --dp-delta "$delta" \
    --dp-deterministic-noise >"$WORK/dp$r.log" 2>&1
  a=$(cat "$WORK/np$r.t"); b=$(cat "$WORK/dp$r.t")
  echo "round $r: user CPU non-private $a s, dp $b s, ratio $(python3 -c "print(f'{$a/$b:.2f}')")x"
done
