#!/usr/bin/env bash
# Tabular benchmark: train + generate on telco_churn, lending_club and ames
# (80% train / 20% holdout split), then quality and privacy figures
# (bench/tabular_quality.py), and ames with independent batches
# (--condition-columns 0, the reference's behaviour) next to conditioned ones.
#
#   bench/tabular_bench.sh [BUILD_DIR] [OUT_DIR]
#   env: EPOCHS (30), UNITS (128), EMBED (64), LAYERS (2), TIME_LIMIT (per batch
#        training seconds, 600), DATASETS ("telco_churn lending_club ames"),
#        INDEPENDENT ("ames": datasets also run with independent batches), SEED (1)
#
# Prints a Markdown table and writes OUT_DIR/summary.md plus per-run JSON.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
OUT=${2:-$ROOT/out/tabular_bench}
DATA=${DS_SHARED_DATA:-$ROOT/../shared/datasets}
EPOCHS=${EPOCHS:-30}
UNITS=${UNITS:-128}
EMBED=${EMBED:-64}
LAYERS=${LAYERS:-2}
TIME_LIMIT=${TIME_LIMIT:-600}
DATASETS=${DATASETS:-"telco_churn lending_club ames"}
INDEPENDENT=${INDEPENDENT:-"ames"}
SEED=${SEED:-1}
BIN=$BUILD/tabular_bench
DS=$BUILD/datasynth
[ -x "$BIN" ] || { echo "build first: $BIN missing" >&2; exit 2; }
mkdir -p "$OUT"

cat >"$OUT/config.json" <<EOF
{"tokenizer": "char", "field_delimiter": ",", "epochs": $EPOCHS, "rnn_units": $UNITS,
 "embedding_dim": $EMBED, "num_layers": $LAYERS, "batch_size": 64, "seq_length": 100,
 "max_training_time_seconds": $TIME_LIMIT, "seed": $SEED}
EOF

split() {  # split NAME -> OUT/NAME/train.csv holdout.csv (80/20, fixed seed)
  python3 - "$DATA/$1.csv" "$OUT/$1" <<'PY'
import csv, os, random, sys
csv.field_size_limit(1 << 30)
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
with open(src, newline="", encoding="utf-8") as f:
    r = csv.reader(f)
    header = next(r)
    rows = list(r)
random.Random(7).shuffle(rows)
cut = int(len(rows) * 0.8)
for name, part in (("train.csv", rows[:cut]), ("holdout.csv", rows[cut:])):
    with open(os.path.join(out, name), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(part)
PY
}

run() {  # run NAME MODE CONDITION_COLUMNS
  local name=$1 mode=$2 cond=$3 dir="$OUT/$1"
  echo "== $name ($mode)" >&2
  "$BIN" --input "$dir/train.csv" --model-dir "$dir/model_$mode" --output "$dir/synth_$mode.csv" \
    --config "$OUT/config.json" --condition-columns "$cond" --seed 17 \
    --result "$dir/run_$mode.json" 2>"$dir/log_$mode.txt" || { tail -3 "$dir/log_$mode.txt" >&2; return 1; }
  python3 "$ROOT/bench/tabular_quality.py" "$dir/train.csv" "$dir/holdout.csv" \
    "$dir/synth_$mode.csv" "$dir/model_$mode/tabular.json" >"$dir/quality_$mode.json"
  # The evaluate scorer (docs/reference.md §8), and its ceiling: the holdout rows.
  "$DS" evaluate --real "$dir/train.csv" --synthetic "$dir/synth_$mode.csv" --holdout "$dir/holdout.csv" \
    --overwrite --json "$dir/eval_$mode.json" --report "$dir/report_$mode.html" >/dev/null 2>&1 || echo '{}' >"$dir/eval_$mode.json"
  [ -s "$dir/eval_holdout.json" ] || "$DS" evaluate --real "$dir/train.csv" --synthetic "$dir/holdout.csv" \
    --overwrite --json "$dir/eval_holdout.json" >/dev/null 2>&1 || echo '{}' >"$dir/eval_holdout.json"
  python3 - "$dir/run_$mode.json" "$dir/quality_$mode.json" "$name" "$mode" "$dir/eval_$mode.json" \
    "$dir/eval_holdout.json" >>"$OUT/rows.md" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); q = json.load(open(sys.argv[2]))
e = json.load(open(sys.argv[5])); h = json.load(open(sys.argv[6]))
f = lambda v: "-" if v is None else "%.3f" % v
def score(j):
    s = j.get("quality", {}).get("overall")
    return "-" if s is None else "%.1f" % s
print("| %s | %s | %d x %d | %d | %.0f s | %.0f s | %.1f%% | %.3f | %s | %s | %s | %.2f%% | %.2f%% | %s | %s |" % (
    sys.argv[3], sys.argv[4], q["rows_train"], q["columns"], len(r["batches"]),
    r["train_seconds"], r["generate_seconds"], 100 * r["valid_share"], q["js_distance_mean"],
    f(q["correlation_diff_mean"]), f(q["correlation_diff_across_batches"]),
    f(q["correlation_diff_strong_across"]),
    100 * q["exact_copy_share"], 100 * q["holdout_copy_share"], score(e), score(h)))
PY
}

: >"$OUT/rows.md"
for d in $DATASETS; do
  split "$d"
  run "$d" conditioned 3
  for i in $INDEPENDENT; do [ "$i" = "$d" ] && run "$d" independent 0; done
done
{
  echo "tabular bench: char tokenizer, ${LAYERS} x LSTM ${UNITS}, embedding ${EMBED}, up to ${EPOCHS} epochs (early stopping), $(nproc) cores"
  echo
  echo "| data | batches | train rows x cols | n batches | train | generate | valid rows | JS dist (mean) | corr diff (all) | corr diff (across batches) | corr diff (strong pairs across) | synth copies | holdout copies | quality score | holdout score (ceiling) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$OUT/rows.md"
} | tee "$OUT/summary.md"
