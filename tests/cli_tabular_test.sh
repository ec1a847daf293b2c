#!/usr/bin/env bash
# End-to-end through the CLI: `train --tabular`, `generate` on a tabular model
# (seed fields, per-row seed files), `synthesize` (gzip input), and the error
# cases (one clear line, exit code 2).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
DATA=$ROOT/tests/data/datasets

SMALL=(--tokenizer char --epochs 25 --embedding-dim 32 --rnn-units 64 --batch-size 16 --seq-length 64
       --seed 3 --tabular-batch-size 4)
GEN=(--max-invalid 100000 --parallelism 1)

expect_error() {  # expect_error NAME SUBSTRING ARGS...
  local name=$1 want=$2
  shift 2
  local out rc
  out=$("$DS" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 2 ]; then fail "$name: exit $rc (want 2): $out"; return; fi
  if ! grep -qF -- "$want" <<<"$out"; then fail "$name: message '$out' lacks '$want'"; return; fi
  if [ "$(grep -c . <<<"$out")" -gt 1 ]; then fail "$name: more than one line: $out"; return; fi
  pass "$name"
}

col() {  # col FILE N: the N-th (1-based) column of a CSV without quoted fields, header dropped
  tail -n +2 "$1" | cut -d, -f"$2"
}

cp "$DATA/penguins.csv" "$TMP/p.csv"
HEADER=$(head -1 "$TMP/p.csv" | tr -d '"\r')  # written back unquoted

# --- train --tabular, generate ---
if "$DS" train --tabular --input "$TMP/p.csv" --field-delimiter , --model-dir "$TMP/m" "${SMALL[@]}" \
    2>"$TMP/log"; then
  pass "train --tabular runs"
else
  fail "train --tabular: $(tail -3 "$TMP/log")"
fi
[ -s "$TMP/m/tabular.json" ] && [ -s "$TMP/m/batch_0/model_params.json" ] &&
  [ -s "$TMP/m/batch_1/model_params.json" ] && pass "tabular.json and batch models" ||
  fail "model files missing: $(ls "$TMP/m")"
grep -q "batch 1" "$TMP/log" && pass "batch progress printed" || fail "no batch lines"

"$DS" generate --model-dir "$TMP/m" --num-lines 30 --output "$TMP/s.csv" "${GEN[@]}" 2>"$TMP/glog" &&
  pass "generate runs" || fail "generate: $(tail -3 "$TMP/glog")"
[ "$(head -1 "$TMP/s.csv")" = "$HEADER" ] && pass "header order restored" || fail "header: $(head -1 "$TMP/s.csv")"
[ "$(tail -n +2 "$TMP/s.csv" | wc -l)" = 30 ] && pass "30 rows" || fail "rows: $(wc -l <"$TMP/s.csv")"
awk -F, -v n="$(head -1 "$TMP/p.csv" | awk -F, '{print NF}')" 'NF != n {bad=1} END {exit bad}' "$TMP/s.csv" &&
  pass "every row has all fields" || fail "ragged rows"

# Reproducible with the same seed.
"$DS" generate --model-dir "$TMP/m" --num-lines 30 --output "$TMP/s2.csv" --seed 5 "${GEN[@]}" 2>/dev/null
"$DS" generate --model-dir "$TMP/m" --num-lines 30 --output "$TMP/s3.csv" --seed 5 "${GEN[@]}" 2>/dev/null
cmp -s "$TMP/s2.csv" "$TMP/s3.csv" && pass "same seed, same table" || fail "same seed gave different tables"

# --- seed fields ---
"$DS" generate --model-dir "$TMP/m" --num-lines 20 --output "$TMP/seeded.csv" --seed-field species=Gentoo \
  "${GEN[@]}" 2>"$TMP/glog" || fail "seeded generate: $(tail -2 "$TMP/glog")"
[ "$(col "$TMP/seeded.csv" 1 | sort -u)" = "Gentoo" ] && [ "$(tail -n +2 "$TMP/seeded.csv" | wc -l)" = 20 ] &&
  pass "--seed-field seeds every row" || fail "seeded: $(col "$TMP/seeded.csv" 1 | sort | uniq -c)"
printf 'species\nChinstrap\nAdelie\nGentoo\nAdelie\n' >"$TMP/seeds.csv"
"$DS" generate --model-dir "$TMP/m" --output "$TMP/perrow.csv" --seed-fields "$TMP/seeds.csv" "${GEN[@]}" \
  2>"$TMP/glog" || fail "per-row seeds: $(tail -2 "$TMP/glog")"
[ "$(col "$TMP/perrow.csv" 1 | tr '\n' ' ')" = "Chinstrap Adelie Gentoo Adelie " ] &&
  pass "--seed-fields: one row per seed, in order" || fail "per-row: $(col "$TMP/perrow.csv" 1 | tr '\n' ' ')"
expect_error "seeding a column that was not placed first" "--seed-columns island" \
  generate --model-dir "$TMP/m" --num-lines 5 --output "$TMP/x.csv" --seed-field island=Dream
expect_error "seeding an unseen category" "species" \
  generate --model-dir "$TMP/m" --num-lines 5 --output "$TMP/x.csv" --seed-field species=Emperor
[ ! -e "$TMP/x.csv" ] && pass "no output after a seed error" || fail "output written after an error"

# --seed-columns makes another column seedable.
"$DS" train --tabular --input "$TMP/p.csv" --field-delimiter , --model-dir "$TMP/m2" "${SMALL[@]}" \
  --seed-columns island 2>/dev/null || fail "train --seed-columns"
"$DS" generate --model-dir "$TMP/m2" --num-lines 10 --output "$TMP/isl.csv" --seed-field island=Dream \
  "${GEN[@]}" 2>"$TMP/glog" || fail "seed island: $(tail -2 "$TMP/glog")"
[ "$(col "$TMP/isl.csv" 2 | sort -u)" = "Dream" ] && pass "--seed-columns island, then --seed-field island=Dream" ||
  fail "island seeds: $(col "$TMP/isl.csv" 2 | sort | uniq -c)"

# --- errors ---
expect_error "refuses to overwrite" "already holds" \
  train --tabular --input "$TMP/p.csv" --field-delimiter , --model-dir "$TMP/m" "${SMALL[@]}"
expect_error "unknown header group column" "no column 'nope'" \
  train --tabular --input "$TMP/p.csv" --field-delimiter , --model-dir "$TMP/m3" "${SMALL[@]}" \
  --header-groups "species,nope;island"
[ ! -e "$TMP/m3" ] && pass "no model dir after a planning error" || fail "m3 left behind"
printf 'a,b\n1,2\n3\n' >"$TMP/ragged.csv"
expect_error "ragged table" "ragged.csv:3" \
  train --tabular --input "$TMP/ragged.csv" --field-delimiter , --model-dir "$TMP/m4" "${SMALL[@]}"

# --- synthesize, gzip input, independent batches ---
gzip -c "$TMP/p.csv" >"$TMP/p.csv.gz"
"$DS" synthesize --input "$TMP/p.csv.gz" --output "$TMP/syn.csv" --num-lines 25 "${SMALL[@]}" \
  --condition-columns 0 "${GEN[@]}" 2>"$TMP/slog" && pass "synthesize runs (gzip input)" ||
  fail "synthesize: $(tail -3 "$TMP/slog")"
[ "$(head -1 "$TMP/syn.csv")" = "$HEADER" ] && [ "$(tail -n +2 "$TMP/syn.csv" | wc -l)" = 25 ] &&
  pass "synthesize output" || fail "synthesize output: $(head -2 "$TMP/syn.csv")"

finish
