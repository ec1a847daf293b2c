#!/usr/bin/env bash
# The main job on the bundled example: set up, build the CLI, train a model on
# examples/telco_churn_2k.csv (2,000 rows x 20 columns), show what it learned,
# generate 1,000 records and score them against the real ones. About 15 seconds
# on 2 cores after setup: the default typed-field tokenizer with a small network
# (its defaults: 1 x LSTM 128, embedding 64, early stopping); the model written is a normal one
# (`datasynth info`). EPOCHS caps the epochs (default 100, early stopping ends sooner),
# TRAIN_SECONDS the whole training run (default 90 s).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/setup.sh
BUILD_TARGET=datasynth ./scripts/build.sh
DS=./build/datasynth
OUT=${OUT:-out/demo}
mkdir -p "$OUT"
$DS train --input examples/telco_churn_2k.csv --field-delimiter , --model-dir "$OUT/model" \
  --epochs "${EPOCHS:-100}" \
  --max-training-time-seconds "${TRAIN_SECONDS:-90}" --seed 7 --overwrite
$DS info --model-dir "$OUT/model"
$DS generate --model-dir "$OUT/model" --num-lines 1000 --output "$OUT/synthetic.csv" --seed 7 --overwrite
echo "--- first records of $OUT/synthetic.csv ---"
head -n 6 "$OUT/synthetic.csv"
$DS evaluate --real examples/telco_churn_2k.csv --synthetic "$OUT/synthetic.csv" --report "$OUT/report.html" \
  --overwrite
echo "demo: done in $(( $(date +%s) - start )) s; report: $OUT/report.html"
