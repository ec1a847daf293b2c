#!/usr/bin/env bash
# --dp with a public schema (docs/privacy.md): the field tokenizer is built from
# the schema alone (identical whatever the private data), a category of the
# data that the schema does not list never appears in the output, every
# generated record fits the schema, schema errors name the file / column /
# key, `datasynth schema` writes a template, and --calibrate composes the
# marginal release into the reported epsilon.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
cp "$ROOT/tests/data/datasets/penguins.csv" "$TMP/t.csv"
SMALL=(--epochs 3 --embedding-dim 16 --rnn-units 32 --batch-size 32 --seed 9 --dp-deterministic-noise)

"$DS" schema -i "$TMP/t.csv" -o "$TMP/full.json" 2>"$TMP/log" &&
  grep -q "NOT private" "$TMP/full.json" && pass "schema template written, labelled NOT private" ||
  fail "schema template: $(cat "$TMP/log")"
cp "$TMP/full.json" "$TMP/keep.json"
out=$("$DS" schema -i "$TMP/t.csv" -o "$TMP/full.json" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "full.json: already exists; pass --overwrite to replace it" <<<"$out" &&
  cmp -s "$TMP/full.json" "$TMP/keep.json" && pass "schema: an existing output is refused, untouched" ||
  fail "schema over an existing file: rc $rc: $out"
"$DS" schema -i "$TMP/t.csv" -o "$TMP/full.json" --overwrite 2>/dev/null && cmp -s "$TMP/full.json" "$TMP/keep.json" &&
  pass "schema --overwrite replaces it (same template)" || fail "schema --overwrite"
# The public schema: Chinstrap is not listed (a category only the data has).
python3 - "$TMP/full.json" "$TMP/s.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
del j["note"]
j["columns"][0]["values"] = ["Adelie", "Gentoo"]
json.dump(j, open(sys.argv[2], "w"))
PY
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/m" --dp --dp-target-epsilon 8 --schema "$TMP/s.json" "${SMALL[@]}" 2>"$TMP/log" &&
  pass "dp with a schema trains" || fail "dp with a schema: $(tail -3 "$TMP/log")"
grep -q '"type": "field"' "$TMP/m/tokenizer.json" && pass "field tokenizer under dp" ||
  fail "tokenizer: $(head -c 200 "$TMP/m/tokenizer.json")"
grep -q "'species': 68 records dropped (value outside the schema)" "$TMP/log" &&
  ! grep -q "Chinstrap" "$TMP/log" && pass "misfits counted, not read out" ||
  fail "conform report: $(grep schema "$TMP/log")"
grep -q Chinstrap "$TMP/m/tokenizer.json" "$TMP/m/column_rules.json" &&
  fail "an unlisted category reached the model files" || pass "no unlisted category in the model"
"$DS" generate --model-dir "$TMP/m" --num-lines 300 --seed 1 --output "$TMP/g.csv" 2>"$TMP/glog" &&
  pass "generate" || fail "generate: $(tail -3 "$TMP/glog")"
python3 - "$TMP/s.json" "$TMP/g.csv" <<'PY' && pass "every record fits the schema" || fail "records outside the schema"
import csv, json, sys
cols = json.load(open(sys.argv[1]))["columns"]
rows = list(csv.reader(open(sys.argv[2])))[1:]
bad = 0
for r in rows:
  for c, v in zip(cols, r):
    if c["type"] == "categorical" and v not in c["values"]: bad += 1
    if c["type"] in ("integer", "decimal") and v not in c.get("missing", []) and not (c["min"] <= float(v) <= c["max"]): bad += 1
print(len(rows), "rows,", bad, "bad")
sys.exit(1 if bad or len(rows) != 300 or any(len(r) != len(cols) for r in rows) else 0)
PY
# Other private data, same schema: the same tokenizer, byte for byte.
awk 'NR == 1 || NR % 3 == 0' "$TMP/t.csv" | sed 's/,"male",/,"female",/' > "$TMP/other.csv"
"$DS" train --input "$TMP/other.csv" --field-delimiter , --model-dir "$TMP/m2" --dp --dp-target-epsilon 8 --schema "$TMP/s.json" "${SMALL[@]}" 2>"$TMP/log2" &&
  cmp -s "$TMP/m/tokenizer.json" "$TMP/m2/tokenizer.json" && pass "tokenizer independent of the data" ||
  fail "tokenizer differs with other data: $(tail -2 "$TMP/log2")"
# Refusals and errors.
out=$("$DS" train --input "$TMP/t.csv" --model-dir "$TMP/r" --dp --tokenizer field "${SMALL[@]}" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == *"give a public schema (--schema"* ]] && pass "field without a schema refused under dp" ||
  fail "refusal (rc $rc): $out"
python3 -c "import json; j=json.load(open('$TMP/s.json')); j['columns'][2]['min']=500; json.dump(j, open('$TMP/bad.json','w'))"
out=$("$DS" train --input "$TMP/t.csv" --model-dir "$TMP/b" --dp --schema "$TMP/bad.json" "${SMALL[@]}" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == *"bad.json: columns[2] ('bill_length_mm'): needs min <= max"* ]] &&
  pass "schema error names file, column and key" || fail "schema error (rc $rc): $out"
python3 -c "import json; j=json.load(open('$TMP/s.json')); j['columns'].pop(); json.dump(j, open('$TMP/short.json','w'))"
out=$("$DS" train --input "$TMP/t.csv" --model-dir "$TMP/b" --dp --schema "$TMP/short.json" "${SMALL[@]}" 2>&1); rc=$?
[ $rc -eq 2 ] && [[ $out == *"column 8 is '(none)' but the data's header has 'year'"* ]] &&
  pass "schema against the header" || fail "header check (rc $rc): $out"
# Calibration (on by default under dp, with pairs; the default share for
# fewer than 1,000 records is 0.8): the marginal release is part of the
# accounted epsilon.
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/c" --dp --dp-target-epsilon 4 --schema "$TMP/s.json" "${SMALL[@]}" 2>"$TMP/log3" &&
  grep -q "calibrate_pairs 3, dp_marginal_share 0.8" "$TMP/log3" &&
  grep -q "dp_bins_share 0.1, calibrate_iterations 14" "$TMP/log3" &&
  grep -Eq "calibrate: .*measured( [0-9.]+,){14} [0-9.]+ with" "$TMP/log3" &&
  grep -q "marginals Gaussian sigma=.*(alone eps=3.2); delta=.* -> composed eps=4 " "$TMP/log3" &&
  grep -Eq "calibrate: mean total variation distance of the [0-9]+ marginals \([1-9][0-9]* of them 2-way\)" "$TMP/log3" &&
  [ -s "$TMP/c/pair_tables.bin" ] &&
  pass "calibrate under dp: epsilon split reported" || fail "calibrate: $(grep -E 'DP|calib|error' "$TMP/log3")"
python3 - "$TMP/c" <<'PY' && pass "composed epsilon within the target, split in model_params" || fail "epsilon of the calibrated model"
import csv, json, sys
h = list(csv.DictReader(open(sys.argv[1] + "/model_history.csv")))
p = json.load(open(sys.argv[1] + "/model_params.json"))["datasynth"]
print(h[-1]["epsilon"], p["epsilon"], p["dp_unit"])
sys.exit(0 if float(h[-1]["epsilon"]) <= 4.0001 and "marginals" in p["dp_unit"] else 1)
PY
"$DS" generate --model-dir "$TMP/c" --num-lines 50 --seed 1 --output "$TMP/gc.csv" 2>"$TMP/glog" &&
  pass "calibrated model generates" || fail "generate calibrated: $(tail -3 "$TMP/glog")"
finish
