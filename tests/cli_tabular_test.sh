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

# --- rare categories (pooled into one <other> token) as seeds and conditioning values ---
# inc: 3 common values and 4 seen once (rare, 4% of the rows: still a category
# column); grade follows inc, so batch 1 (grade) is conditioned on inc. A rare
# prefix value must come back verbatim.
{ echo inc,grade; for i in $(seq 1 32); do echo low,A; echo mid,B; echo high,C; done
  for i in 1 2 3 4; do echo "r0$i,D"; done; } >"$TMP/rare.csv"
FIELD=(--tokenizer field --epochs 5 --embedding-dim 16 --rnn-units 32 --batch-size 16 --seed 3)
"$DS" train --tabular --input "$TMP/rare.csv" --field-delimiter , --model-dir "$TMP/mr" "${FIELD[@]}" \
  --header-groups "inc;grade" 2>"$TMP/log" || fail "train --tabular (rare): $(tail -2 "$TMP/log")"
tr -d ' \n' <"$TMP/mr/tabular.json" | grep -qF '"condition":["inc"],"dir":"batch_1"' && pass "batch 1 is conditioned on inc" ||
  fail "batch 1 not conditioned on inc"
printf 'inc\nr03\nlow\nr01\nr04\n' >"$TMP/rseeds.csv"
"$DS" generate --model-dir "$TMP/mr" --output "$TMP/rs.csv" --seed-fields "$TMP/rseeds.csv" "${GEN[@]}" \
  2>"$TMP/glog" || fail "rare seeds: $(tail -2 "$TMP/glog")"
[ "$(col "$TMP/rs.csv" 1 | tr '\n' ' ')" = "r03 low r01 r04 " ] &&
  pass "rare seed values come back verbatim" || fail "rare seeds: $(col "$TMP/rs.csv" 1 | tr '\n' ' ')"
# (--no-copy-guard: the rows "r01,D" .. are rare training rows, which the copy
# guard would keep out of the output; this case is about the rare values.)
for p in 1 2; do
  "$DS" generate --model-dir "$TMP/mr" --num-lines 100 --output "$TMP/rc$p.csv" --seed 7 \
    --max-invalid 100000 --parallelism $p --no-copy-guard 2>"$TMP/glog" || fail "rare conditioning, $p workers: $(tail -2 "$TMP/glog")"
done
[ "$(tail -n +2 "$TMP/rc1.csv" | wc -l)" = 100 ] && grep -q '^r[0-9]' "$TMP/rc1.csv" &&
  pass "rare values as conditioning values" || fail "rare conditioning: $(col "$TMP/rc1.csv" 1 | sort | uniq -c)"
cmp -s "$TMP/rc1.csv" "$TMP/rc2.csv" && pass "rare conditioning: same table for 1 and 2 workers" ||
  fail "1 and 2 workers differ"
# One model (no batches): start strings with a rare value (header order: a start
# fixes the first columns generated, and by default 'grade' comes first).
"$DS" train --input "$TMP/rare.csv" --field-delimiter , --model-dir "$TMP/mr1" "${FIELD[@]}" \
  --field-order header 2>"$TMP/log" ||
  fail "train (rare): $(tail -2 "$TMP/log")"
printf 'r02,\nr04,\nmid,\n' >"$TMP/rstarts.txt"
"$DS" generate --model-dir "$TMP/mr1" --output "$TMP/r1.csv" --start-strings "$TMP/rstarts.txt" "${GEN[@]}" \
  2>"$TMP/glog" || fail "rare start strings: $(tail -2 "$TMP/glog")"
[ "$(col "$TMP/r1.csv" 1 | tr '\n' ' ')" = "r02 r04 mid " ] &&
  pass "rare start-string values come back verbatim" || fail "rare starts: $(col "$TMP/r1.csv" 1 | tr '\n' ' ')"

finish
