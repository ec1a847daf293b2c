#!/usr/bin/env bash
# End-to-end: the field tokenizer (typed value tokens) through the CLI: a tiny
# train with the adapted defaults (a 50-row table trains), generation that is
# 100% type-valid and byte-identical for 1 and 2 workers, start strings,
# evaluate on the output, the schema in model_params.json, overrides, and a
# tampered tokenizer.json rejected.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

SMALL=(--tokenizer field --epochs 3 --embedding-dim 16 --rnn-units 32 --seed 3 --threads 1)

# A table with every type: category with missing, integer, decimal, ISO date,
# m/d/Y date, free text with quotes / commas, constant, always empty.
python3 - "$TMP/t.csv" <<'EOF'
import csv, random, sys
r = random.Random(5)
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["kind", "count", "price", "day", "when", "note", "const", "empty"])
    for i in range(50):
        m = r.randint(1, 12); d = r.randint(1, 28)
        w.writerow([r.choice(["a", "b", "c", ""]), r.randint(-20, 300), "%.2f" % r.uniform(1, 99),
                    "2021-%02d-%02d" % (m, d), "" if i % 7 == 0 else "%d/%d/19%d" % (m, d, r.randint(50, 99)),
                    r.choice(['say "hi", ok', "plain", "multi\nline"]) + str(i), "k", ""])
EOF

if "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" "${SMALL[@]}" \
    --field-types "note=text" 2>"$TMP/log"; then
  pass "50-row table trains with the field defaults"
else
  fail "train: $(tail -3 "$TMP/log")"
fi
python3 - "$TMP/m/model_params.json" <<'EOF' && pass "model_params.json: tokenizer field, schema, adapted shape" || fail "model_params.json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["tokenizer"] == "field", j["tokenizer"]
types = {c["name"]: c["type"] for c in j["datasynth"]["schema"]}
assert types == {"kind": "categorical", "count": "integer", "price": "decimal", "day": "datetime",
                 "when": "datetime", "note": "text", "const": "constant", "empty": "empty"}, types
assert 2 <= j["batch_size"] <= 3, j["batch_size"]   # about 50 sequences / 16
assert j["seq_length"] < 60, j["seq_length"]   # the longest record, not 100
EOF

gen() { "$DS" generate --model-dir "$TMP/m" --num-lines 200 --seed 11 --device cpu "$@" 2>"$TMP/glog"; }
gen --output "$TMP/g1.csv" --parallelism 1 && gen --output "$TMP/g2.csv" --parallelism 2 ||
  fail "generate: $(tail -2 "$TMP/glog")"
cmp -s "$TMP/g1.csv" "$TMP/g2.csv" && pass "1 and 2 workers: byte-identical" || fail "worker counts differ"
grep -q "(0 invalid, 100.0% valid)" "$TMP/glog" && pass "100% valid reported" || fail "summary: $(tail -1 "$TMP/glog")"
# --constrain none: no mask, but sampling stays inside each position's part range
# (the legal-ids loss never trained the other logits; sampling them gave 0% valid).
"$DS" generate --model-dir "$TMP/m" -n 40 -o "$TMP/gn.jsonl" --format jsonl -p 1 --seed 5 \
  --constrain none --max-invalid 100000 > /dev/null 2>&1
python3 - "$TMP/gn.jsonl" <<'EOF' && pass "--constrain none: records inside the part ranges" ||
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
valid = sum(r["valid"] for r in rows)
first = [r["explain"] for r in rows if r["explain"].startswith("token 1 (")]
sys.exit(0 if len(rows) >= 40 and valid >= 20 and not first else
         "%d rows, %d valid, first token out of range: %s" % (len(rows), valid, first[:2]))
EOF
  fail "--constrain none: $(head -c 300 "$TMP/gn.jsonl")"
python3 - "$TMP/g1.csv" "$TMP/t.csv" <<'EOF' && pass "every record type-valid" || fail "type check"
import csv, datetime, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
real = list(csv.reader(open(sys.argv[2], newline="")))
assert rows[0] == real[0] and len(rows) == 201, (rows[0], len(rows))
kinds = {r[0] for r in real[1:]}
counts = [int(r[1]) for r in real[1:]]
for r in rows[1:]:
    assert r[0] in kinds, r
    assert str(int(r[1])) == r[1] and min(counts) <= int(r[1]) <= max(counts), r
    assert r[2] == "%.2f" % float(r[2]), r
    datetime.datetime.strptime(r[3], "%Y-%m-%d")
    if r[4]:
        d = datetime.datetime.strptime(r[4], "%m/%d/%Y")
        assert r[4] == "%d/%d/%d" % (d.month, d.day, d.year), r
    assert r[6] == "k" and r[7] == "", r
EOF

# Start strings: complete fields, encoded as values. They fix the first columns
# of the generation order (fewest distinct values first): the default model
# generates 'when' before 'count', so a start on the header's first two
# columns needs --field-order header.
out=$("$DS" generate --model-dir "$TMP/m" --num-lines 5 --device cpu --start-string "b,17," 2>&1 >/dev/null)
grep -q "generates 'when' before 'count'.*field-order header" <<<"$out" &&
  pass "start string off the generation order: error naming the order" || fail "start order: $out"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mh" "${SMALL[@]}" \
  --field-types "note=text" --field-order header 2>"$TMP/log" || fail "train --field-order header"
"$DS" generate --model-dir "$TMP/mh" --num-lines 5 --seed 1 --device cpu --start-string "b,17," \
  --output "$TMP/s.csv" 2>"$TMP/slog" &&
  python3 -c 'import csv,sys; r=list(csv.reader(open(sys.argv[1])))[1:]; assert len(r)==5 and {(x[0],x[1]) for x in r}=={("b","17")}, r' "$TMP/s.csv" &&
  pass "start string" || fail "start string: $(tail -2 "$TMP/slog")"
out=$("$DS" generate --model-dir "$TMP/mh" --num-lines 5 --device cpu --start-string "zzz," 2>&1 >/dev/null)
grep -q "not seen in training" <<<"$out" && pass "unknown category in a start string: error" || fail "start: $out"

"$DS" evaluate --real "$TMP/t.csv" --synthetic "$TMP/g1.csv" --json "$TMP/e.json" >"$TMP/elog" 2>&1 &&
  [ -s "$TMP/e.json" ] && pass "evaluate on the output" || fail "evaluate: $(tail -2 "$TMP/elog")"

"$DS" info --model-dir "$TMP/m" 2>&1 | grep -q "when: datetime (%-m/%-d/%Y" && pass "info lists the schema" ||
  fail "info schema"

# Overrides: an unknown column and a value that does not fit are errors.
out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m3" "${SMALL[@]}" \
  --field-types "nope=text" 2>&1)
grep -q "no column 'nope'" <<<"$out" && pass "field_types: unknown column" || fail "unknown column: $out"
out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m3" "${SMALL[@]}" \
  --field-types "kind=integer" 2>&1)
grep -q "column 'kind'" <<<"$out" && pass "field_types: value does not fit" || fail "misfit: $out"
out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m3" "${SMALL[@]}" --dp 2>&1)
grep -q "tokenizer 'field'" <<<"$out" && pass "--dp refuses the field tokenizer" || fail "dp: $out"

# Resume: a run killed after epoch 2 and resumed ends with the uninterrupted
# run's weights (the adapted seq_length / batch_size come back from the model).
R=(--input "$TMP/t.csv" --field-delimiter , --epochs 4 --embedding-dim 16 --rnn-units 32 --seed 4
   --early-stopping=false --threads 1)
"$DS" train "${R[@]}" --model-dir "$TMP/full" 2>/dev/null
DATASYNTH_TEST_EXIT_AFTER_EPOCH=2 "$DS" train "${R[@]}" --model-dir "$TMP/cut" 2>/dev/null
"$DS" train --resume --model-dir "$TMP/cut" 2>"$TMP/rlog" || fail "resume: $(tail -2 "$TMP/rlog")"
wf() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/model_params.json'))['datasynth']['weights_file'])" "$1"; }
grep -q '"tokenizer": "field"' "$TMP/full/model_params.json" && pass "field is the default for CSV" ||
  fail "default tokenizer: $(grep '"tokenizer"' "$TMP/full/model_params.json")"
cmp -s "$TMP/full/$(wf "$TMP/full")" "$TMP/cut/$(wf "$TMP/cut")" && pass "resume: same weights as uninterrupted" ||
  fail "resume: weights differ"

# Numbers as exports write them (R: "3e+05"; Python: "8.927999999999999") are
# numeric columns, and the output holds plain numbers inside the train range.
python3 - "$TMP/x.csv" <<'EOF'
import csv, random, sys
r = random.Random(2)
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["income", "rate"])
    for i in range(60):
        w.writerow([r.choice(["3e+05", "1e+05", str(r.randint(20, 90) * 1000)]),
                    r.choice(["8.927999999999999", "-15.015999999999998", "%.4f" % r.uniform(-20, 20)])])
EOF
"$DS" train --input "$TMP/x.csv" --model-dir "$TMP/mx" "${SMALL[@]}" 2>"$TMP/xlog" &&
  "$DS" generate --model-dir "$TMP/mx" --num-lines 100 --seed 2 --device cpu --output "$TMP/gx.csv" 2>>"$TMP/xlog" ||
  fail "exported numbers: $(tail -2 "$TMP/xlog")"
"$DS" info --model-dir "$TMP/mx" > "$TMP/xinfo" 2>&1
grep -q "income: integer (D=0 normalized" "$TMP/xinfo" && grep -q "rate: decimal (D=4 normalized" "$TMP/xinfo" &&
  pass "exported numbers: typed integer / decimal (normalized)" || fail "exported numbers: $(grep -E 'income|rate' "$TMP/xinfo")"
python3 - "$TMP/gx.csv" <<'EOF' && pass "exported numbers: plain numbers in range" || fail "exported numbers: output"
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))[1:]
assert len(rows) == 100
for inc, rate in rows:
    assert re.fullmatch(r"[1-9][0-9]*", inc) and 20000 <= int(inc) <= 300000, inc
    assert re.fullmatch(r"-?[0-9]+(\.[0-9]{1,4})?", rate) and -20.0 <= float(rate) <= 20.0, rate
EOF

# A tampered tokenizer.json (checksummed in model_params.json) is rejected.
cp -r "$TMP/m" "$TMP/bad"
sed -i 's/"rare_count": 2/"rare_count": 3/' "$TMP/bad/tokenizer.json"
out=$("$DS" generate --model-dir "$TMP/bad" --num-lines 2 --device cpu 2>&1 >/dev/null)
grep -q "checksum" <<<"$out" && pass "tampered tokenizer.json rejected" || fail "tamper: $out"

finish
