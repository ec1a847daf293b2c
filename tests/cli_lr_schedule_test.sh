#!/usr/bin/env bash
# The learning-rate schedule (src/train/lr_schedule.h, docs/training.md
# "Learning rate"): the field tokenizer's optimizer defaults (Adam 0.003
# reduced on plateau) apply only to keys not given and are recorded in
# model_params.json; char keeps the reference's constant RMSprop 0.01; the
# plateau rates follow the closed form; --resume continues the schedule (the
# same rates and weights as an uninterrupted run); lr_plateau_restore (the
# field default) starts the epoch after a reduction from the best weights.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
head -n 201 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
ARGS=(--input "$TMP/t.csv" --field-delimiter , --batch-size 16 --rnn-units 16 --embedding-dim 8
      --seed 3 --threads 1)
param() {  # param DIR KEY: a value of model_params.json (top level, else the datasynth block)
  python3 -c "import json,sys; p=json.load(open(sys.argv[1]+'/model_params.json'))
print(p[sys.argv[2]] if sys.argv[2] in p else p['datasynth'][sys.argv[2]])" "$1" "$2"
}
rates() {  # the learning rate of each epoch (checkpoint.json's history)
  python3 -c "import json,sys; h=json.load(open(sys.argv[1]+'/checkpoint.json'))['history']
print(' '.join('%.6g' % e['learning_rate'] for e in h))" "$1"
}

# 1. Defaults: field -> adam plateau at 0.003 x sqrt(144 / steps an epoch), within
#    [0.003, 0.006] (lr_schedule.h FieldLearningRate): this cut has 9 steps an
#    epoch, so 0.006; a given rate is kept; a given optimizer keeps its rate;
#    char -> reference.
"$DS" train "${ARGS[@]}" --epochs 2 -m "$TMP/f" >"$TMP/f.log" 2>&1 || fail "train: $(tail -3 "$TMP/f.log")"
grep -q "9 steps per epoch" "$TMP/f.log" && pass "the fixture has 9 steps an epoch" ||
  fail "steps: $(grep 'steps per epoch' "$TMP/f.log")"
[ "$(param "$TMP/f" optimizer) $(param "$TMP/f" learning_rate) $(param "$TMP/f" lr_schedule)" = \
  "adam 0.006 plateau" ] && pass "field defaults: adam 0.006 for 9 steps an epoch, plateau, in model_params.json" ||
  fail "field defaults: $(param "$TMP/f" optimizer) $(param "$TMP/f" learning_rate) $(param "$TMP/f" lr_schedule)"
grep -q "field tokenizer: learning_rate 0.006 for 9 steps an epoch" "$TMP/f.log" &&
  pass "train names the rate it chose from the steps an epoch" || fail "no rate line: $(grep learning_rate "$TMP/f.log")"
"$DS" train "${ARGS[@]}" --epochs 1 --learning-rate 0.003 -m "$TMP/f3" >"$TMP/f3.log" 2>&1 || fail "train lr 0.003"
[ "$(param "$TMP/f3" optimizer) $(param "$TMP/f3" learning_rate)" = "adam 0.003" ] &&
  ! grep -q "steps an epoch" "$TMP/f3.log" && pass "a given --learning-rate is kept" ||
  fail "--learning-rate 0.003: $(param "$TMP/f3" learning_rate)"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --batch-size 1 --rnn-units 16 --embedding-dim 8 \
  --seed 3 --threads 1 --epochs 1 -m "$TMP/f1" >"$TMP/f1.log" 2>&1 || fail "train batch 1"
grep -q "159 steps per epoch" "$TMP/f1.log" && [ "$(param "$TMP/f1" learning_rate)" = "0.003" ] &&
  pass "159 steps an epoch (batch 1), more than 144: the base rate 0.003" ||
  fail "batch 1: $(param "$TMP/f1" learning_rate), $(grep 'steps per epoch' "$TMP/f1.log")"
[ "$(param "$TMP/f" lr_plateau_restore)" = True ] && pass "field default: lr_plateau_restore in model_params.json" ||
  fail "field lr_plateau_restore: $(param "$TMP/f" lr_plateau_restore)"
grep -q "optimizer adam, learning_rate 0.003, lr_schedule plateau, lr_plateau_restore true" "$TMP/f.log" &&
  pass "train names the optimizer defaults it chose" || fail "no defaults line: $(grep defaults "$TMP/f.log")"
"$DS" train "${ARGS[@]}" --epochs 2 --optimizer rmsprop -m "$TMP/r" >"$TMP/r.log" 2>&1 || fail "train rmsprop"
[ "$(param "$TMP/r" optimizer) $(param "$TMP/r" learning_rate)" = "rmsprop 0.01" ] &&
  pass "--optimizer rmsprop keeps its default rate 0.01" || fail "rmsprop: $(param "$TMP/r" learning_rate)"
"$DS" train "${ARGS[@]}" --epochs 1 --tokenizer char -m "$TMP/c" >"$TMP/c.log" 2>&1 || fail "train char"
[ "$(param "$TMP/c" optimizer) $(param "$TMP/c" learning_rate) $(param "$TMP/c" lr_schedule) \
$(param "$TMP/c" lr_plateau_restore)" = "rmsprop 0.01 constant False" ] && pass "char keeps constant RMSprop 0.01" ||
  fail "char: $(param "$TMP/c" optimizer) $(param "$TMP/c" lr_schedule)"

# 2. Closed form: no epoch after the first improves by 1000, patience 0: every
#    later epoch halves the rate, down to 0.1 x 0.006.
P=(--epochs 7 --early-stopping false --early-stopping-min-delta 1000 --lr-plateau-patience 0)
"$DS" train "${ARGS[@]}" "${P[@]}" -m "$TMP/p" >"$TMP/p.log" 2>&1 || fail "train plateau: $(tail -3 "$TMP/p.log")"
want="0.006 0.006 0.003 0.0015 0.00075 0.0006 0.0006"
[ "$(rates "$TMP/p")" = "$want" ] && pass "plateau rates $want" || fail "plateau rates: $(rates "$TMP/p")"
[ "$(grep -c 'did not improve for 1 epochs; learning rate' "$TMP/p.log")" = 4 ] &&
  pass "each reduction is reported" || fail "reduction lines: $(grep -c 'learning rate' "$TMP/p.log")"

# 3. --resume after epoch 3 continues the schedule: same rates, same weights.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=3 "$DS" train "${ARGS[@]}" "${P[@]}" -m "$TMP/cut" >/dev/null 2>&1
"$DS" train --resume -m "$TMP/cut" >"$TMP/cut.log" 2>&1 || fail "resume: $(tail -3 "$TMP/cut.log")"
[ "$(rates "$TMP/cut")" = "$want" ] && pass "resumed run has the same rates" || fail "resumed rates: $(rates "$TMP/cut")"
[ "$(param "$TMP/cut" weights_crc32)" = "$(param "$TMP/p" weights_crc32)" ] &&
  pass "resumed run ends with the same weights" ||
  fail "weights differ: $(param "$TMP/cut" weights_crc32) vs $(param "$TMP/p" weights_crc32)"
# 4. lr_plateau_restore: with val_accuracy as the metric, epoch 3 is worse than
#    epoch 2 by more than the min delta (0.01) and reduces the rate, so the checkpoint after it holds epoch 2's
#    weights (the params section's CRC-32 in the tensor file's header); off,
#    it holds epoch 3's own. A resumed run continues the same way.
crc() {  # crc FILE: the CRC-32 of section 0 (params) of a tensor file
  python3 -c "import struct,sys; print(struct.unpack_from('<I', open(sys.argv[1],'rb').read(4096), 88)[0])" "$1"
}
# fp32: the case needs this trajectory (bf16, the default where the CPU has it,
# follows another one). --calibrate false: the best epoch's own weights file is compared (the field
# default's calibration would replace it by weights-e0002-cal.bin).
Q=(--precision fp32 --early-stopping false --early-stopping-min-delta 0.01 --lr-plateau-patience 0 --learning-rate 0.3
   --best-model-metric val_accuracy --calibrate false)
for r in true false; do
  "$DS" train "${ARGS[@]}" "${Q[@]}" --epochs 3 --lr-plateau-restore $r -m "$TMP/q$r" >"$TMP/q$r.log" 2>&1 ||
    fail "train restore $r: $(tail -3 "$TMP/q$r.log")"
done
[ -f "$TMP/qtrue/weights-e0002.bin" ] && [ -f "$TMP/qfalse/weights-e0002.bin" ] &&
  pass "epoch 2 is the best epoch (the case under test)" || fail "best epoch: $(ls "$TMP/qtrue")"
a=$(crc "$TMP/qtrue/checkpoint-e0003.bin" 2>/dev/null); b=$(crc "$TMP/qtrue/weights-e0002.bin" 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] &&
  pass "restore: after the reduction at epoch 3 training continues from epoch 2's weights" ||
  fail "restore: checkpoint '$a' vs best '$b'"
a=$(crc "$TMP/qfalse/checkpoint-e0003.bin" 2>/dev/null); b=$(crc "$TMP/qfalse/weights-e0002.bin" 2>/dev/null)
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] &&
  pass "without restore the checkpoint holds epoch 3's weights" || fail "restore false: '$a' vs '$b'"
#    Only from an epoch worse than the best by more than the min delta: with
#    0.05 epoch 3 (0.02 below epoch 2) is a stall, and training goes on from it.
"$DS" train "${ARGS[@]}" "${Q[@]/0.01/0.05}" --epochs 3 -m "$TMP/qs" \
  >"$TMP/qs.log" 2>&1 || fail "train restore stall: $(tail -3 "$TMP/qs.log")"
a=$(crc "$TMP/qs/checkpoint-e0003.bin" 2>/dev/null); b=$(crc "$TMP/qs/weights-e0002.bin" 2>/dev/null)
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] && grep -q "learning rate 0.15 -> 0.075" "$TMP/qs.log" &&
  pass "a reduction after a stall within the min delta keeps the epoch's weights" ||
  fail "stall: '$a' vs '$b', $(grep 'learning rate' "$TMP/qs.log")"
grep -q "epoch 3: the next epoch starts from the weights of epoch 2" "$TMP/qtrue.log" &&
  pass "the restore is reported" || fail "no restore line: $(grep 'epoch 3' "$TMP/qtrue.log")"
"$DS" train "${ARGS[@]}" "${Q[@]}" --epochs 5 -m "$TMP/q5" >/dev/null 2>&1 || fail "train restore 5 epochs"
DATASYNTH_TEST_EXIT_AFTER_EPOCH=3 "$DS" train "${ARGS[@]}" "${Q[@]}" --epochs 5 -m "$TMP/qcut" >/dev/null 2>&1
"$DS" train --resume -m "$TMP/qcut" >"$TMP/qcut.log" 2>&1 || fail "resume restore: $(tail -3 "$TMP/qcut.log")"
[ "$(param "$TMP/qcut" weights_crc32)" = "$(param "$TMP/q5" weights_crc32)" ] &&
  [ "$(rates "$TMP/qcut")" = "$(rates "$TMP/q5")" ] &&
  pass "a run resumed after a restore ends with the same rates and weights" ||
  fail "resume after restore: $(param "$TMP/qcut" weights_crc32) vs $(param "$TMP/q5" weights_crc32)"
finish
