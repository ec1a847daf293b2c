#!/usr/bin/env bash
# The main job on the bundled example: set up, build, train a model on
# examples/telco_churn_2k.csv, show what it learned, generate records.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
DS=./build/datasynth
OUT=${OUT:-out/demo}
mkdir -p "$(dirname "$OUT")"
$DS train --input examples/telco_churn_2k.csv --field-delimiter , --model-dir "$OUT/model" \
  --tokenizer char --epochs ${EPOCHS:-30} --overwrite
$DS info --model-dir "$OUT/model"
if $DS generate --help >/dev/null 2>&1; then
  $DS generate --model-dir "$OUT/model" --num-lines 1000 --output "$OUT/synthetic.csv" --seed 7 --overwrite
  echo "--- first records of $OUT/synthetic.csv ---"
  head -n 6 "$OUT/synthetic.csv"
fi
