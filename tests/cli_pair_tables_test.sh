#!/usr/bin/env bash
# Pair calibration (`--calibrate --calibrate-pairs`, train/calibrate.h): the model
# directory holds pair_tables.bin bound to model_params.json; generation with
# the tables is byte-identical for any worker count; a damaged, foreign or
# missing tables file is refused by name.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cp "$ROOT/tests/data/datasets/penguins.csv" "$TMP/t.csv"
SMALL=(--epochs 2 --embedding-dim 16 --rnn-units 32 --batch-size 32 --seed 9 --tokenizer field)
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/m" "${SMALL[@]}" --calibrate --calibrate-pairs 2 \
  2>"$TMP/log" && pass "train with calibrate_pairs" || fail "train: $(tail -3 "$TMP/log")"
grep -Eq "calibrate: .* marginals \([1-9][0-9]* of them 2-way\)" "$TMP/log" &&
  [ -s "$TMP/m/pair_tables.bin" ] && grep -q '"pair_tables_crc32"' "$TMP/m/model_params.json" &&
  pass "pair tables written and bound to model_params.json" ||
  fail "pair tables: $(grep calibrate "$TMP/log"); $(ls "$TMP/m")"
for w in 1 3; do
  "$DS" generate --model-dir "$TMP/m" --num-lines 200 --seed 4 --parallelism $w \
    --output "$TMP/g$w.csv" 2>"$TMP/glog$w" || fail "generate --parallelism $w: $(tail -2 "$TMP/glog$w")"
done
cmp -s "$TMP/g1.csv" "$TMP/g3.csv" && [ "$(wc -l < "$TMP/g1.csv")" -eq 201 ] &&
  pass "with the tables: byte-identical output for 1 and 3 workers" || fail "1 vs 3 workers differ"
# calibrate_pairs 0 keeps the 1-way calibration only (the field default is 3).
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/m1" "${SMALL[@]}" --calibrate --calibrate-pairs 0 \
  2>"$TMP/log1" &&
  [ ! -e "$TMP/m1/pair_tables.bin" ] && pass "no pair tables with calibrate_pairs 0" ||
  fail "calibrate alone: $(ls "$TMP/m1")"
cp -r "$TMP/m" "$TMP/bad"
printf '\x7f' | dd of="$TMP/bad/pair_tables.bin" bs=1 seek=40 conv=notrunc 2>/dev/null
out=$("$DS" generate --model-dir "$TMP/bad" --num-lines 5 --output "$TMP/b.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "pair_tables.bin" <<<"$out" && pass "a damaged pair_tables.bin is refused" ||
  fail "damaged tables: rc $rc: $out"
rm "$TMP/bad/pair_tables.bin"
out=$("$DS" generate --model-dir "$TMP/bad" --num-lines 5 --output "$TMP/b.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "pair_tables.bin: missing" <<<"$out" && pass "a missing pair_tables.bin is refused" ||
  fail "missing tables: rc $rc: $out"
cp "$TMP/m/pair_tables.bin" "$TMP/m1/"
out=$("$DS" generate --model-dir "$TMP/m1" --num-lines 5 --output "$TMP/b.csv" 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "not named by model_params.json" <<<"$out" && pass "a foreign pair_tables.bin is refused" ||
  fail "foreign tables: rc $rc: $out"
# Retrained with --overwrite without pairs: the old tables go with the old model.
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/m" --overwrite "${SMALL[@]}" --calibrate \
  --calibrate-pairs 0 2>"$TMP/log4" &&
  [ ! -e "$TMP/m/pair_tables.bin" ] &&
  "$DS" generate --model-dir "$TMP/m" --num-lines 5 --output "$TMP/o.csv" 2>/dev/null &&
  pass "--overwrite removes an earlier model's pair tables" || fail "overwrite: $(ls "$TMP/m")"
finish
