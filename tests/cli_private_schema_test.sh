#!/usr/bin/env bash
# `datasynth schema --private` (schema/private_schema.h, docs/privacy.md
# "Deriving the schema privately"): a schema derived under DP lists the
# common categories, never a value only one record holds, records what it
# spent, trains a --dp model whose log states the total, and wrong flags are
# refused.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
python3 - "$ROOT/tests/data/datasets/penguins.csv" "$TMP/t.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
rows[1][1] = "Atlantis"  # one record's island: must never be listed
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(rows)
PY

"$DS" schema --private --epsilon 3 -i "$TMP/t.csv" -o "$TMP/s.json" 2>"$TMP/log" &&
  grep -q "derived under differential privacy" "$TMP/log" && pass "schema --private written" ||
  fail "schema --private: $(cat "$TMP/log")"
python3 - "$TMP/s.json" <<'PY' && pass "types, common categories, bounds, what it spent" || fail "schema content"
import json, sys
j = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in j["columns"]}
assert j["privacy"]["epsilon"] == 3 and 0 < j["privacy"]["delta"] < 0.01, j["privacy"]
assert c["species"]["type"] == "categorical" and set(c["species"]["values"]) == {"Adelie", "Gentoo", "Chinstrap"}, c["species"]
assert "Atlantis" not in c["island"].get("values", []), c["island"]
assert c["bill_length_mm"]["type"] == "decimal" and c["bill_length_mm"]["min"] <= 32.1 and c["bill_length_mm"]["max"] >= 59.6, c["bill_length_mm"]
assert "differential privacy" in j["note"]
PY
grep -q Atlantis "$TMP/s.json" "$TMP/log" && fail "a one-record value reached the schema or the log" ||
  pass "a one-record value stays out"

"$DS" train -i "$TMP/t.csv" -m "$TMP/m" --dp --dp-target-epsilon 5 --schema "$TMP/s.json" \
  --epochs 2 --embedding-dim 16 --rnn-units 32 --batch-size 32 --seed 9 --dp-deterministic-noise 2>"$TMP/tlog" &&
  pass "dp training on the derived schema" || fail "train: $(tail -3 "$TMP/tlog")"
grep -q "schema: derived from the data under DP (epsilon 3, .*total privacy loss is that plus this run's: epsilon 8" "$TMP/tlog" &&
  pass "the training log states the total" || fail "log: $(grep -i schema "$TMP/tlog")"
"$DS" generate -m "$TMP/m" -n 100 --seed 1 -o "$TMP/g.csv" 2>"$TMP/glog" && ! grep -q Atlantis "$TMP/g.csv" &&
  pass "generates, never the one-record value" || fail "generate: $(tail -2 "$TMP/glog")"

out=$("$DS" schema --private -i "$TMP/t.csv" -o "$TMP/x.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--private needs --epsilon" <<<"$out" && [ ! -e "$TMP/x.json" ] &&
  pass "--private without --epsilon refused" || fail "rc $rc: $out"
out=$("$DS" schema --epsilon 1 -i "$TMP/t.csv" -o "$TMP/x.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "need --private" <<<"$out" && pass "--epsilon without --private refused" ||
  fail "rc $rc: $out"
cp "$TMP/s.json" "$TMP/keep.json"
out=$("$DS" schema --private --epsilon 1 -i "$TMP/t.csv" -o "$TMP/s.json" 2>&1); rc=$?
[ $rc -eq 2 ] && cmp -s "$TMP/s.json" "$TMP/keep.json" && pass "an existing schema is not overwritten" ||
  fail "rc $rc: $out"
python3 - "$TMP/s.json" "$TMP/bad.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["privacy"]["epsilon"] = -1
json.dump(j, open(sys.argv[2], "w"))
PY
out=$("$DS" train -i "$TMP/t.csv" -m "$TMP/m2" --dp --schema "$TMP/bad.json" --epochs 1 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "bad.json: privacy: needs epsilon > 0" <<<"$out" &&
  pass "a damaged privacy record is an error" || fail "rc $rc: $out"
finish
