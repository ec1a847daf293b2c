#!/usr/bin/env bash
# Training budgets and the field tokenizer's defaults (issue 18, item 3):
# max_training_steps stops the run after N optimizer steps (mid-epoch: that
# epoch is validated and saved), the history records the steps, a resumed run
# continues the same budget (identical to an uninterrupted run) or a larger one
# given again; a 50-row table trains with the defaults; the field tokenizer's
# network defaults apply only to keys the user did not give.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
# 300 records, batches of 20: ~11 training steps per epoch (spe, read from the history).
ARGS=(--input "$TMP/t.csv" --field-delimiter , --batch-size 20 --epochs 50 --rnn-units 16
      --embedding-dim 8 --early-stopping=false --seed 5 --threads 1)
param() {  # param DIR KEY: a value of model_params.json (top level, else the datasynth block)
  python3 -c "import json,sys; p=json.load(open(sys.argv[1]+'/model_params.json'))
print(p[sys.argv[2]] if sys.argv[2] in p else p['datasynth'][sys.argv[2]])" "$1" "$2"
}
steps_col() { tail -n +2 "$1/model_history.csv" | awk -F, '{ printf "%s ", $NF }'; }
wfile() { param "$1" weights_file; }

# 1. The step budget: 30 steps = spe + spe + the rest.
"$DS" train "${ARGS[@]}" --max-training-steps 30 -m "$TMP/full" >"$TMP/full.log" 2>&1 ||
  fail "train --max-training-steps: $(tail -3 "$TMP/full.log")"
[ "$(head -1 "$TMP/full/model_history.csv")" = "epoch,loss,accuracy,val_loss,val_accuracy,best,steps" ] &&
  pass "history has a steps column" || fail "history header: $(head -1 "$TMP/full/model_history.csv")"
spe=$(sed -n 2p "$TMP/full/model_history.csv" | awk -F, '{ print $NF }')
[ "$spe" -gt 10 ] && [ "$spe" -lt 15 ] || fail "steps per epoch $spe, expected 11 to 14"
[ "$(steps_col "$TMP/full")" = "$spe $((2 * spe)) 30 " ] && pass "stops at 30 steps ($spe, $((2 * spe)), 30)" ||
  fail "steps: $(cat "$TMP/full/model_history.csv")"
[ "$(param "$TMP/full" stop_reason)" = step_limit ] && pass "stop_reason step_limit" ||
  fail "stop_reason $(param "$TMP/full" stop_reason)"
[ -n "$(tail -n 1 "$TMP/full/model_history.csv" | cut -d, -f4)" ] &&
  pass "the cut epoch was validated" || fail "no val_loss: $(tail -n 1 "$TMP/full/model_history.csv")"
[ "$(python3 -c "import json; print(json.load(open('$TMP/full/checkpoint.json'))['global_step'])")" = 30 ] &&
  pass "checkpoint global_step 30" || fail "checkpoint global_step"
[ "$(param "$TMP/full" max_training_steps)" = 30 ] && pass "max_training_steps recorded" ||
  fail "max_training_steps not in model_params.json"

# 2. Resume continues the stored budget: same history and weights as uninterrupted.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=1 "$DS" train "${ARGS[@]}" --max-training-steps 30 -m "$TMP/cut" \
  >/dev/null 2>&1
"$DS" train --resume -m "$TMP/cut" >"$TMP/resume.log" 2>&1 || fail "resume: $(tail -3 "$TMP/resume.log")"
[ "$(steps_col "$TMP/cut")" = "$spe $((2 * spe)) 30 " ] && pass "resumed run keeps the budget of 30 steps" ||
  fail "resumed steps: $(cat "$TMP/cut/model_history.csv")"
cmp -s "$TMP/full/model_history.csv" "$TMP/cut/model_history.csv" && pass "resumed history identical" ||
  fail "resumed history differs"
cmp -s "$TMP/full/$(wfile "$TMP/full")" "$TMP/cut/$(wfile "$TMP/cut")" &&
  pass "resumed weights identical" || fail "resumed weights differ"

# 3. A larger budget given again with --resume: continues to it.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=1 "$DS" train "${ARGS[@]}" --max-training-steps 30 -m "$TMP/more" \
  >/dev/null 2>&1
"$DS" train --resume --max-training-steps 40 -m "$TMP/more" >/dev/null 2>&1 || fail "resume 40"
[ "$(steps_col "$TMP/more")" = "$spe $((2 * spe)) $((3 * spe)) 40 " ] && pass "resume --max-training-steps 40 extends it" ||
  fail "extended steps: $(cat "$TMP/more/model_history.csv")"

# 4. Range.
out=$("$DS" train "${ARGS[@]}" --max-training-steps -1 -m "$TMP/neg" 2>&1)
[ $? -ne 0 ] && grep -q "max_training_steps.*out of range" <<<"$out" && pass "negative budget refused" ||
  fail "negative budget: $out"

# 5. 50-row tables train with every default (no "too few records") and generate.
for src in "$ROOT/examples/telco_churn_2k.csv" "$ROOT/tests/data/datasets/penguins.csv"; do
  name=$(basename "$src" .csv)
  head -n 51 "$src" > "$TMP/$name-50.csv"
  if "$DS" train -i "$TMP/$name-50.csv" -m "$TMP/$name-50" --seed 2 --threads 1 >"$TMP/$name-50.log" 2>&1 &&
     "$DS" generate -m "$TMP/$name-50" -n 20 -o "$TMP/$name-50-s.csv" >/dev/null 2>&1 &&
     [ "$(tail -n +2 "$TMP/$name-50-s.csv" | wc -l)" = 20 ]; then
    pass "$name: 50 rows train with the defaults and generate"
  else
    fail "$name: 50 rows: $(tail -3 "$TMP/$name-50.log")"
  fi
done

# 6. Field network defaults: applied when not given, recorded; given keys win;
#    char keeps the reference's network.
SMALL=(--input "$TMP/t.csv" --field-delimiter , --seed 5 --threads 1 --max-training-steps 2)
"$DS" train "${SMALL[@]}" -m "$TMP/fd" >"$TMP/fd.log" 2>&1 || fail "field defaults run"
[ "$(param "$TMP/fd" num_layers) $(param "$TMP/fd" rnn_units) $(param "$TMP/fd" embedding_dim)" = "1 128 64" ] &&
  pass "field: 1 x 128, embedding 64 recorded" ||
  fail "field: $(param "$TMP/fd" num_layers) $(param "$TMP/fd" rnn_units) $(param "$TMP/fd" embedding_dim)"
grep -q "network defaults for settings not given: num_layers 1, rnn_units 128, embedding_dim 64" \
  "$TMP/fd.log" && pass "field: one line names them" || fail "field: no defaults line"
# ... and the pair calibration (2-way marginals, 3 parents a column); off when given.
[ "$(param "$TMP/fd" calibrate) $(param "$TMP/fd" calibrate_pairs)" = "True 3" ] &&
  [ -s "$TMP/fd/pair_tables.bin" ] && grep -q "calibrate true, calibrate_pairs 3" "$TMP/fd.log" &&
  pass "field: pair calibration by default (pair_tables.bin, named in the defaults line)" ||
  fail "field calibrate: $(param "$TMP/fd" calibrate) $(param "$TMP/fd" calibrate_pairs); $(ls "$TMP/fd")"
"$DS" train "${SMALL[@]}" --calibrate false -m "$TMP/fn" >/dev/null 2>&1 || fail "field --calibrate false"
[ "$(param "$TMP/fn" calibrate)" = False ] && [ ! -e "$TMP/fn/pair_tables.bin" ] &&
  pass "field: --calibrate false trains without it" || fail "field no calibrate: $(ls "$TMP/fn")"
echo '{"num_layers": 2}' > "$TMP/cfg.json"
"$DS" train "${SMALL[@]}" --config "$TMP/cfg.json" --rnn-units 40 -m "$TMP/fx" >/dev/null 2>&1 ||
  fail "field explicit run"
[ "$(param "$TMP/fx" num_layers) $(param "$TMP/fx" rnn_units) $(param "$TMP/fx" embedding_dim)" = "2 40 64" ] &&
  pass "field: keys given in the config file and as flags win" ||
  fail "field explicit: $(param "$TMP/fx" num_layers) $(param "$TMP/fx" rnn_units) $(param "$TMP/fx" embedding_dim)"
"$DS" train "${SMALL[@]}" --tokenizer char -m "$TMP/fc" >/dev/null 2>&1 || fail "char run"
[ "$(param "$TMP/fc" num_layers) $(param "$TMP/fc" rnn_units) $(param "$TMP/fc" embedding_dim)" = "2 256 256" ] &&
  pass "char: the reference network" ||
  fail "char: $(param "$TMP/fc" num_layers) $(param "$TMP/fc" rnn_units) $(param "$TMP/fc" embedding_dim)"
[ "$(param "$TMP/fc" calibrate)" = False ] && [ ! -e "$TMP/fc/pair_tables.bin" ] &&
  pass "char: no calibration" || fail "char calibrate: $(param "$TMP/fc" calibrate)"
# 7. Tabular: a field-typed table is one model unless --tabular-batch-size is
#    given (char keeps batches of 15); seed fields work either way.
TAB=(--input "$TMP/t.csv" --seed 5 --threads 1 --max-training-steps 40 --seed-columns contract)
nbatches() { python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]+'/tabular.json'))['batches']))" "$1"; }
"$DS" train --tabular "${TAB[@]}" -m "$TMP/t1" >"$TMP/t1.log" 2>&1 || fail "tabular one: $(tail -3 "$TMP/t1.log")"
[ "$(nbatches "$TMP/t1")" = 1 ] && grep -q "typed fields: one model of all 20 columns" "$TMP/t1.log" &&
  pass "tabular field: one model of the 20 columns" || fail "tabular field: $(nbatches "$TMP/t1") batches"
"$DS" train --tabular "${TAB[@]}" --tabular-batch-size 10 -m "$TMP/t2" >/dev/null 2>&1 || fail "tabular 10"
[ "$(nbatches "$TMP/t2")" = 2 ] && pass "tabular field: --tabular-batch-size 10 gives 2 batches" ||
  fail "tabular 10: $(nbatches "$TMP/t2") batches"
"$DS" train --tabular "${TAB[@]}" --tokenizer char --epochs 1 -m "$TMP/t3" >/dev/null 2>&1 || fail "tabular char"
[ "$(nbatches "$TMP/t3")" = 2 ] && pass "tabular char: batches of 15 (2)" ||
  fail "tabular char: $(nbatches "$TMP/t3") batches"
for m in t1 t2; do
  "$DS" generate -m "$TMP/$m" -n 12 -o "$TMP/$m.csv" --seed-field "contract=Two year" >/dev/null 2>&1 &&
    [ "$(python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(len(r), all(x['contract']=='Two year' for x in r))" "$TMP/$m.csv")" = "12 True" ] &&
    pass "$m: --seed-field contract=Two year seeds every row" || fail "$m: seeded generation"
done
finish
