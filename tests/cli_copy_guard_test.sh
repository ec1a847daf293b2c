#!/usr/bin/env bash
# End-to-end: the copy guard (generate/copy_guard.h, docs/generate.md "Exact
# copies"). A small table whose every value combination the model learns:
# rows seen once are rare and never come out; rows seen 3 times may. The
# output is byte-identical for 1, 2 and 3 workers and across an interrupted
# and resumed run; copy_guard.bin is checked like every model file; a model
# without one (older versions, copy_guard = false) still generates.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

python3 - "$TMP/t.csv" <<'EOF'
import csv, sys
with open(sys.argv[1], "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["k", "v", "n"])
    for a in "abcde":
        for b in "vwxyz":
            if (a + b) in ("av", "bw", "cx", "dy", "ez"):
                for _ in range(3): w.writerow([a, b, "1"])   # common rows (3 times each)
            else:
                w.writerow([a, b, "1"])                    # rare rows (once each)
EOF

SMALL=(--epochs 30 --embedding-dim 16 --rnn-units 32 --seed 3 --threads 1)
"$DS" train -i "$TMP/t.csv" -m "$TMP/m" "${SMALL[@]}" 2>"$TMP/log" ||
  { fail "train: $(tail -3 "$TMP/log")"; finish; }
grep -q "copy guard: 20 distinct rows of the 35 training rows are rare" "$TMP/log" &&
  pass "train: 20 rare rows guarded" || fail "train log: $(grep -i copy "$TMP/log")"
[ -s "$TMP/m/copy_guard.bin" ] && [ "$(stat -c %s "$TMP/m/copy_guard.bin")" = $((32 + 8 * 20 + 4)) ] &&
  pass "copy_guard.bin: 20 hashes, no values" || fail "copy_guard.bin size"
grep -q '"copy_guard_crc32"' "$TMP/m/model_params.json" && pass "model_params.json names it" ||
  fail "no copy_guard_crc32"
"$DS" info -m "$TMP/m" 2>&1 | grep -q "copy guard   20 rare training rows" && pass "info shows it" ||
  fail "info: no copy guard line"

# rare_copies FILE: exact copies of rows seen once in the training table
rare_copies() {
  python3 - "$1" "$TMP/t.csv" <<'EOF'
import collections, csv, sys
train = collections.Counter(map(tuple, list(csv.reader(open(sys.argv[2])))[1:]))
rows = list(csv.reader(open(sys.argv[1])))[1:]
print(sum(1 for r in rows if train.get(tuple(r)) == 1))
EOF
}
gen() { "$DS" generate -m "$TMP/m" -n 300 --seed 5 --device cpu --max-invalid 100000 "$@"; }
for p in 1 2 3; do
  gen -o "$TMP/g$p.csv" -p $p 2>"$TMP/glog$p" || fail "generate -p $p: $(tail -2 "$TMP/glog$p")"
done
[ "$(rare_copies "$TMP/g1.csv")" = 0 ] && pass "no copy of a rare row" ||
  fail "$(rare_copies "$TMP/g1.csv") copies of rare rows"
cmp -s "$TMP/g1.csv" "$TMP/g2.csv" && cmp -s "$TMP/g1.csv" "$TMP/g3.csv" &&
  pass "1, 2 and 3 workers: byte-identical" || fail "worker counts differ"
grep -q "exact copies of rare training rows rejected" "$TMP/glog1" &&
  pass "summary counts the rejections" || fail "summary: $(tail -2 "$TMP/glog1")"
# The count crosses the worker protocol (-p 2, 3) as a flag of the record.
rej() { grep -o "[0-9]* exact cop[a-z]* of rare training rows rejected" "$TMP/glog$1" | cut -d' ' -f1; }
[ -n "$(rej 1)" ] && [ "$(rej 1)" = "$(rej 2)" ] && [ "$(rej 1)" = "$(rej 3)" ] &&
  pass "1, 2 and 3 workers count the same $(rej 1) rejections" ||
  fail "rejections counted: $(rej 1) / $(rej 2) / $(rej 3)"
gen -o "$TMP/off.csv" -p 1 --no-copy-guard 2>"$TMP/glog" || fail "generate --no-copy-guard"
n=$(rare_copies "$TMP/off.csv")
[ "$n" -gt 0 ] && pass "--no-copy-guard: $n copies of rare rows (the guard has work here)" ||
  fail "--no-copy-guard: no copies (the test table is too easy)"

# Interrupted and resumed: the same bytes as the straight run.
DS_TEST_KILL_AFTER_RECORDS=120 gen -o "$TMP/r.csv" -p 2 --checkpoint-interval 0 2>/dev/null
gen -o "$TMP/r.csv" -p 2 --resume 2>"$TMP/rlog" || fail "resume: $(tail -2 "$TMP/rlog")"
cmp -s "$TMP/g1.csv" "$TMP/r.csv" && pass "killed + --resume: byte-identical" ||
  fail "resumed output differs"

# Model-file checks.
cp -r "$TMP/m" "$TMP/bad"
printf '\x01' | dd of="$TMP/bad/copy_guard.bin" bs=1 seek=40 conv=notrunc 2>/dev/null
"$DS" generate -m "$TMP/bad" -n 5 --device cpu -o "$TMP/x.csv" --overwrite 2>"$TMP/elog" &&
  fail "damaged copy_guard.bin accepted" ||
  { grep -q "copy_guard.bin: does not belong" "$TMP/elog" && pass "damaged copy_guard.bin refused" ||
    fail "error: $(cat "$TMP/elog")"; }
rm "$TMP/bad/copy_guard.bin"
"$DS" generate -m "$TMP/bad" -n 5 --device cpu -o "$TMP/x.csv" --overwrite 2>"$TMP/elog" &&
  fail "missing copy_guard.bin accepted" ||
  { grep -q "copy_guard.bin: missing" "$TMP/elog" && pass "missing copy_guard.bin refused" ||
    fail "error: $(cat "$TMP/elog")"; }
# An older model: no file and no key in model_params.json.
python3 - "$TMP/bad/model_params.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); del j["datasynth"]["copy_guard_crc32"]
json.dump(j, open(sys.argv[1], "w"), indent=2)
EOF
"$DS" generate -m "$TMP/bad" -n 50 --device cpu -o "$TMP/old.csv" 2>"$TMP/elog" &&
  pass "a model without a copy guard generates" || fail "old model: $(tail -2 "$TMP/elog")"
cp "$TMP/m/copy_guard.bin" "$TMP/bad/"
"$DS" generate -m "$TMP/bad" -n 5 --device cpu -o "$TMP/x.csv" --overwrite 2>"$TMP/elog" &&
  fail "unnamed copy_guard.bin accepted" ||
  { grep -q "not named by model_params.json" "$TMP/elog" && pass "unnamed copy_guard.bin refused" ||
    fail "error: $(cat "$TMP/elog")"; }

# copy_guard = false at training: no file, copies allowed.
"$DS" train -i "$TMP/t.csv" -m "$TMP/m0" "${SMALL[@]}" --copy-guard false 2>"$TMP/log" ||
  fail "train --copy-guard false: $(tail -2 "$TMP/log")"
[ ! -e "$TMP/m0/copy_guard.bin" ] && pass "copy_guard false: no file" || fail "file written"
finish
