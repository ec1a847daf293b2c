#!/usr/bin/env bash
# DP-SGD training speed against non-private training, same network, same data,
# same machine, measured in one run (alternating, REPEAT times each).
#
#   bench/dp_speed.sh [BUILD_DIR]
#   env: DATA (a CSV; default ../shared/datasets/telco_churn.csv), ROWS (2000),
#        REPEAT (2), THREADS (0 = all cores), BATCH (64), EXTRA (more train flags)
#
# Both runs use the default network (char tokenizer, embedding 256, 2 x LSTM
# 256, RMSprop 0.01, given explicitly: --dp alone would pick its smaller DP
# defaults) for one epoch. Non-private: chunks of seq_length tokens. DP: one record
# per example (Poisson-sampled, per-example clipping, noise), padded to the
# longest record of the batch; its tokens/s counts real tokens only, so the
# padding is part of the DP cost. Prints one line per run and the ratio of the
# medians.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
DS=$BUILD/datasynth
DATA=${DATA:-$ROOT/../shared/datasets/telco_churn.csv}
ROWS=${ROWS:-2000}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-0}
BATCH=${BATCH:-64}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON=(--input "$DATA" --field-delimiter , --tokenizer char --epochs 1 --max-lines "$ROWS"
        --batch-size "$BATCH" --rnn-units 256 --embedding-dim 256 --optimizer rmsprop --learning-rate 0.01
        --threads "$THREADS" --device cpu --seed 1 --overwrite ${EXTRA:-})

rate() { tr '\r' '\n' <"$1" | sed -n 's/^trained .* \([0-9.]*\) tokens\/s;.*/\1/p' | tail -1; }
np=(); dp=()
for i in $(seq "$REPEAT"); do
  "$DS" train "${COMMON[@]}" --model-dir "$TMP/np" --validation-split=false >"$TMP/np.log" 2>&1
  np+=("$(rate "$TMP/np.log")")
  "$DS" train "${COMMON[@]}" --model-dir "$TMP/dp" --dp --dp-noise-multiplier 1.0 \
    --dp-l2-norm-clip 1.0 >"$TMP/dp.log" 2>&1
  dp+=("$(rate "$TMP/dp.log")")
  echo "run $i: non-private ${np[-1]} tokens/s, dp ${dp[-1]} tokens/s"
done
python3 - "${np[*]}" "${dp[*]}" "$(nproc)" "$THREADS" <<'PY'
import statistics, sys
np = [float(x) for x in sys.argv[1].split()]
dp = [float(x) for x in sys.argv[2].split()]
m_np, m_dp = statistics.median(np), statistics.median(dp)
print(f"median: non-private {m_np:.0f} tokens/s, dp {m_dp:.0f} tokens/s, "
      f"ratio {m_dp / m_np:.2f} ({sys.argv[3]} cores, threads {sys.argv[4]})")
PY
