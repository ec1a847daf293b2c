#!/usr/bin/env bash
# Structure-aware generation on real tables: valid share, per-category shares
# and the evaluate quality score, with and without constrained decoding and
# column markers (docs/constrained_decoding.md has the results).
#
#   bench/structure_eval.sh [phase...]        phases: split train generate report (default: all)
#
# Environment:
#   DS_BIN     datasynth binary           [build/datasynth]
#   WORK       working directory           [/tmp/structure_eval]
#   DATASETS   tables under DS_DATA        [telco_churn lending_club penguins]
#   DS_DATA    datasets directory          [/work/shared/datasets]
#   EPOCHS     training epochs             [15]
#   TOKENIZER  char | sentencepiece        [char]
#   MARKERS    column marker settings      [on off]
#   LEVELS     --constrain levels          [none structure values]
#   NUM_LINES  records per generation      [1000]
#   SEED       split / training / generation seed [1]
#
# Each table is split 80/20 (bench/split_csv.py, seeded); a model is trained
# on the 80% per marker setting (reference network: char tokenizer, embedding
# 256, 2 x LSTM 256, RMSprop 0.01, EPOCHS epochs, no early stopping) and
# sampled at temperature 1.0 once per level. The real 20% scores as the
# baseline ("holdout" row). Results: $WORK/results.tsv and the per-run logs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DS_BIN=${DS_BIN:-$ROOT/build/datasynth}
WORK=${WORK:-/tmp/structure_eval}
DATASETS=${DATASETS:-"telco_churn lending_club penguins"}
DS_DATA=${DS_DATA:-/work/shared/datasets}
EPOCHS=${EPOCHS:-15}
TOKENIZER=${TOKENIZER:-char}
MARKERS=${MARKERS:-"on off"}
LEVELS=${LEVELS:-"none structure values"}
NUM_LINES=${NUM_LINES:-1000}
SEED=${SEED:-1}
PHASES=${*:-split train generate report}
mkdir -p "$WORK"

has_phase() { [[ " $PHASES " == *" $1 "* ]]; }
# penguins (275 training rows) is too small for batches of 64 sequences.
train_args() { [[ $1 == penguins ]] && echo "--batch-size 16" || true; }

if has_phase split; then
  for d in $DATASETS; do
    [[ -f $WORK/${d}_train.csv ]] || python3 "$ROOT/bench/split_csv.py" "$DS_DATA/$d.csv" \
      "$WORK/${d}_train.csv" "$WORK/${d}_holdout.csv" --seed "$SEED"
  done
fi

if has_phase train; then
  for d in $DATASETS; do
    for m in $MARKERS; do
      dir=$WORK/model_${d}_${TOKENIZER}_$m
      [[ -f $dir/model_params.json ]] && continue
      echo "== train $d tokenizer=$TOKENIZER markers=$m"
      /usr/bin/time -f "%e s wall, %M KiB max RSS" "$DS_BIN" train --input "$WORK/${d}_train.csv" \
        --field-delimiter , --model-dir "$dir" --overwrite --tokenizer "$TOKENIZER" \
        --column-markers "$m" --epochs "$EPOCHS" --early-stopping-patience 1000 --seed "$SEED" $(train_args "$d") \
        >"$WORK/train_${d}_${TOKENIZER}_$m.log" 2>&1
      tail -2 "$WORK/train_${d}_${TOKENIZER}_$m.log"
    done
  done
fi

if has_phase generate; then
  for d in $DATASETS; do
    for m in $MARKERS; do
      dir=$WORK/model_${d}_${TOKENIZER}_$m
      for l in $LEVELS; do
        out=$WORK/synth_${d}_${TOKENIZER}_${m}_$l.csv
        echo "== generate $d markers=$m constrain=$l"
        "$DS_BIN" generate --model-dir "$dir" --num-lines "$NUM_LINES" --output "$out" --overwrite \
          --seed "$SEED" --gen-temp 1.0 --constrain "$l" --max-invalid 1000000 \
          >"$WORK/gen_${d}_${TOKENIZER}_${m}_$l.log" 2>&1 || true
        tail -1 "$WORK/gen_${d}_${TOKENIZER}_${m}_$l.log"
        "$DS_BIN" evaluate --real "$WORK/${d}_train.csv" --synthetic "$out" \
          --holdout "$WORK/${d}_holdout.csv" --overwrite --json "${out%.csv}.json" \
          --report "${out%.csv}.html" >/dev/null 2>&1 || echo "evaluate failed: $out"
      done
    done
    base=$WORK/baseline_${d}
    if [[ ! -f $base.json ]]; then
      "$DS_BIN" evaluate --real "$WORK/${d}_train.csv" --synthetic "$WORK/${d}_holdout.csv" \
        --overwrite --json "$base.json" --report "$base.html" >/dev/null 2>&1 || echo "evaluate failed: $base"
    fi
  done
fi

if has_phase report; then
  python3 "$ROOT/bench/structure_report.py" --work "$WORK" --datasets $DATASETS \
    --tokenizer "$TOKENIZER" --markers $MARKERS --levels $LEVELS | tee "$WORK/results.md"
fi
