#!/usr/bin/env bash
# Crash safety of generation through the CLI (docs/generate.md, "Crash safety
# and --resume"): a run killed with SIGKILL leaves OUT.partial of whole records
# and OUT.progress.json; `generate --resume` completes it to the requested
# count, byte-identical to an uninterrupted run (so no record is lost or
# duplicated). Also: a real kill -9 at an arbitrary moment, Ctrl-C then
# resume, a resume with other settings (refused, nothing touched), a new run
# over an interrupted one (warned, overwritten).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" --tokenizer char \
  --epochs 1 --embedding-dim 16 --rnn-units 16 --batch-size 8 --seq-length 32 --seed 5 \
  --early-stopping=false --threads 1 2>"$TMP/train.log" || { echo "train failed: $(cat "$TMP/train.log")"; exit 1; }

N=3000
# Checkpoints every 50 ms: the killed runs below resume from mid-run.
OPTS=(generate --model-dir "$TMP/m" --parallelism 2 --max-invalid 100000000 --checkpoint-interval 0.05)
GEN=("${OPTS[@]}" --num-lines $N --seed 3)
"$DS" "${GEN[@]}" --output "$TMP/full.csv" 2>"$TMP/full.log" && pass "uninterrupted run" ||
  fail "uninterrupted run: $(cat "$TMP/full.log")"

# whole_records FILE [BYTES]: every record of FILE (or of its first BYTES
# bytes) is a complete 20-field CSV row; prints the record count.
whole_records() {
  python3 - "$@" <<'EOF'
import csv, io, sys
data = open(sys.argv[1], 'rb').read()
if len(sys.argv) > 2:
    data = data[:int(sys.argv[2])]
text = data.decode('utf-8')
if text and not text.endswith('\n'):
    sys.exit('torn last record')
rows = list(csv.reader(io.StringIO(text, newline='')))
bad = [i for i, r in enumerate(rows) if len(r) != 20]
if bad:
    sys.exit(f'rows {bad[:5]} do not have 20 fields')
print(len(rows) - 1)  # header
EOF
}
progress() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
is_prefix() { python3 -c "import sys;a=open(sys.argv[1],'rb').read();b=open(sys.argv[2],'rb').read();sys.exit(0 if b.startswith(a) else 1)" "$1" "$2"; }

n=$(whole_records "$TMP/full.csv") && [ "$n" = $N ] && pass "$N records" || fail "full output: $n records"

# --- simulated kill -9 after 1000 records (deterministic) ---
DS_TEST_KILL_AFTER_RECORDS=2000 "$DS" "${GEN[@]}" --output "$TMP/cut.csv" 2>/dev/null
rc=$?
[ $rc -eq 137 ] && pass "killed (exit 137)" || fail "expected exit 137, got $rc"
[ ! -e "$TMP/cut.csv" ] && pass "no final file after the kill" || fail "final file exists after the kill"
if [ -e "$TMP/cut.csv.partial" ] && [ -e "$TMP/cut.csv.progress.json" ]; then
  pass "partial and progress files"
  k=$(whole_records "$TMP/cut.csv.partial") && [ "$k" -ge 2000 ] &&
    pass "partial holds whole records only ($k)" || fail "partial: $k"
  is_prefix "$TMP/cut.csv.partial" "$TMP/full.csv" && pass "partial is a prefix of the full output" ||
    fail "partial is not a prefix of the full output"
  pr=$(progress "$TMP/cut.csv.progress.json" records)
  [ "$pr" -gt 0 ] && [ "$pr" -le "$k" ] && pass "progress file covers $pr of them" ||
    fail "progress records $pr (partial: $k)"
else
  fail "partial or progress file missing: $(ls "$TMP")"
fi
"$DS" "${GEN[@]}" --output "$TMP/cut.csv" --resume 2>"$TMP/resume.log" && pass "resume runs" ||
  fail "resume failed: $(cat "$TMP/resume.log")"
grep -q "resumed after" "$TMP/resume.log" && pass "resume reported" || fail "resume log: $(cat "$TMP/resume.log")"
cmp -s "$TMP/cut.csv" "$TMP/full.csv" && pass "resumed output identical to the uninterrupted one" ||
  fail "resumed output differs"
n=$(whole_records "$TMP/cut.csv") && [ "$n" = $N ] && pass "resumed: $N records" || fail "resumed: $n records"
[ ! -e "$TMP/cut.csv.partial" ] && [ ! -e "$TMP/cut.csv.progress.json" ] && pass "no leftovers" ||
  fail "leftover files: $(ls "$TMP")"

# --- resume with other settings: refused, nothing touched ---
DS_TEST_KILL_AFTER_RECORDS=500 "$DS" "${GEN[@]}" --output "$TMP/x.csv" 2>/dev/null
before=$(md5sum "$TMP/x.csv.partial" "$TMP/x.csv.progress.json")
out=$("$DS" "${OPTS[@]}" --num-lines $N --seed 4 --output "$TMP/x.csv" --resume 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "seed = 3 in the interrupted run, 4 now" <<<"$out" &&
  pass "other seed refused ($(grep error <<<"$out" | head -c 160)...)" || fail "other seed: rc $rc: $out"
out=$("$DS" "${OPTS[@]}" --num-lines 10 --seed 3 --format jsonl --output "$TMP/x.csv" --resume 2>&1)
grep -q "num_lines = $N in the interrupted run, 10 now" <<<"$out" && grep -q "format = " <<<"$out" &&
  pass "other count and format refused" || fail "other count: $out"
[ "$(md5sum "$TMP/x.csv.partial" "$TMP/x.csv.progress.json")" = "$before" ] &&
  pass "refused resumes leave the files untouched" || fail "files changed by a refused resume"
# --- a new run over it (no --resume): warned and overwritten ---
out=$("$DS" "${GEN[@]}" --output "$TMP/x.csv" 2>&1)
grep -q "interrupted run" <<<"$out" && pass "warning about the interrupted run" || fail "no warning: $out"
cmp -s "$TMP/x.csv" "$TMP/full.csv" && [ ! -e "$TMP/x.csv.partial" ] && [ ! -e "$TMP/x.csv.progress.json" ] &&
  pass "new run overwrites it" || fail "new run over a partial"

# --- a real kill -9 at an arbitrary moment ---
BIG=("${OPTS[@]}" --num-lines 8000 --seed 9)
"$DS" "${BIG[@]}" --output "$TMP/bigfull.csv" 2>/dev/null || fail "big uninterrupted run"
for i in 1 2; do
  rm -f "$TMP/big.csv"*
  "$DS" "${BIG[@]}" --output "$TMP/big.csv" 2>/dev/null &
  pid=$!
  # Until a checkpoint past the header exists (or the run ends).
  for _ in $(seq 1 400); do
    if [ -e "$TMP/big.csv.progress.json" ] &&
       [ "$(progress "$TMP/big.csv.progress.json" records 2>/dev/null || echo 0)" -gt $((i * 500)) ]; then
      break
    fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  if [ -e "$TMP/big.csv" ]; then
    pass "kill $i: the run finished first"
    continue
  fi
  bytes=$(progress "$TMP/big.csv.progress.json" bytes)
  k=$(whole_records "$TMP/big.csv.partial" "$bytes") && pass "kill $i: $k whole records at the checkpoint" ||
    fail "kill $i: checkpoint not at whole records"
  is_prefix "$TMP/big.csv.partial" "$TMP/bigfull.csv" && pass "kill $i: partial is a prefix" ||
    fail "kill $i: partial is not a prefix of the full output"
  "$DS" "${BIG[@]}" --output "$TMP/big.csv" --resume 2>"$TMP/r.log" &&
    cmp -s "$TMP/big.csv" "$TMP/bigfull.csv" && pass "kill $i: resumed to the identical output" ||
    fail "kill $i: resume: $(cat "$TMP/r.log")"
done

# --- Ctrl-C: the final name holds the records so far; --resume completes it ---
rm -f "$TMP/big.csv"*
"$DS" "${BIG[@]}" --output "$TMP/big.csv" 2>"$TMP/int.log" &
pid=$!
for _ in $(seq 1 400); do
  [ -e "$TMP/big.csv.progress.json" ] &&
    [ "$(progress "$TMP/big.csv.progress.json" records 2>/dev/null || echo 0)" -gt 500 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
if [ $rc -eq 0 ]; then
  pass "Ctrl-C: the run finished first"
else
  [ $rc -eq 130 ] && pass "Ctrl-C: exit 130" || fail "Ctrl-C: exit $rc"
  grep -q -- "--resume" "$TMP/int.log" && pass "Ctrl-C: hint to resume" || fail "Ctrl-C: $(cat "$TMP/int.log")"
  [ -e "$TMP/big.csv" ] && [ -e "$TMP/big.csv.progress.json" ] && pass "Ctrl-C: output and progress kept" ||
    fail "Ctrl-C: files $(ls "$TMP")"
  "$DS" "${BIG[@]}" --output "$TMP/big.csv" --resume 2>"$TMP/r.log" &&
    cmp -s "$TMP/big.csv" "$TMP/bigfull.csv" && pass "Ctrl-C: resumed to the identical output" ||
    fail "Ctrl-C: resume: $(cat "$TMP/r.log")"
fi

# --- stdout cannot be resumed ---
out=$("$DS" "${GEN[@]}" --resume 2>&1 >/dev/null)
grep -q "not standard output" <<<"$out" && pass "--resume to stdout refused" || fail "stdout resume: $out"

finish
