#!/usr/bin/env bash
# mpirun generation on this machine (src/dist/generate.h): the record ids
# spread over the ranks into one output, byte-identical to a single process
# (csv and jsonl, 2 and 3 ranks, each with local workers), and resumable
# after a kill, on another rank count.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
if ! why=$(mpi_available); then skip "mpirun generation: $why"; finish; fi
head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 2 --embedding-dim 16 \
  --rnn-units 32 --batch-size 8 --seq-length 32 --seed 5 --threads 1 --model-dir "$TMP/m" 2>/dev/null ||
  fail "training the model"
G=(--model-dir "$TMP/m" --num-lines 400 --seed 3 --max-invalid 100000)

"$DS" generate "${G[@]}" --parallelism 2 -o "$TMP/one.csv" 2>/dev/null || fail "single process"
"${MPIRUN[@]}" -n 2 "$DS" generate "${G[@]}" --parallelism 1 -o "$TMP/two.csv" 2>"$TMP/log2" ||
  fail "mpirun -n 2 generate: $(tail -3 "$TMP/log2")"
cmp -s "$TMP/one.csv" "$TMP/two.csv" && pass "2 ranks: csv byte-identical to one process" ||
  fail "2 ranks differ: $(cmp "$TMP/one.csv" "$TMP/two.csv")"
[ "$(wc -l < "$TMP/two.csv")" = 401 ] && pass "400 records and the header" || fail "lines: $(wc -l < "$TMP/two.csv")"
[ -e "$TMP/two.csv.parts" ] && fail "parts directory left" || pass "parts directory removed"
"$DS" generate "${G[@]}" --format jsonl --parallelism 1 -o "$TMP/one.jsonl" 2>/dev/null || fail "jsonl single"
"${MPIRUN[@]}" -n 3 "$DS" generate "${G[@]}" --format jsonl --parallelism 2 -o "$TMP/three.jsonl" 2>"$TMP/log3" ||
  fail "mpirun -n 3 generate: $(tail -3 "$TMP/log3")"
cmp -s "$TMP/one.jsonl" "$TMP/three.jsonl" && pass "3 ranks x 2 workers: jsonl (invalid records too) identical" ||
  fail "3 ranks differ"
# A strict invalid budget stops at the same record as one process.
S=(--model-dir "$TMP/m" --num-lines 400 --seed 3 --max-invalid 40 --constrain none --format jsonl)
"$DS" generate "${S[@]}" -o "$TMP/one_stop.jsonl" >/dev/null 2>&1
rc1=$?
"${MPIRUN[@]}" -n 2 "$DS" generate "${S[@]}" -o "$TMP/two_stop.jsonl" >/dev/null 2>&1
rc2=$?
[ $rc1 -ne 0 ] && [ $rc2 -ne 0 ] && cmp -s "$TMP/one_stop.jsonl" "$TMP/two_stop.jsonl" &&
  pass "max_invalid stops both at the same record ($(wc -l < "$TMP/one_stop.jsonl") records, exit $rc1 / $rc2)" || fail "max_invalid: exit $rc1 / $rc2"

# kill -9 of the whole job once some parts are finished, then --resume on 3
# ranks: the same output as one process.
L=(--model-dir "$TMP/m" --num-lines 3000 --seed 4 --parallelism 1)
"$DS" generate "${L[@]}" -o "$TMP/long.csv" 2>/dev/null || fail "single process, 3000 records"
kill_when_parts() {  # OUTPUT: starts the 2-rank job, kills it after the first finished part
  setsid "${MPIRUN[@]}" -n 2 "$DS" generate "${L[@]}" -o "$1" >/dev/null 2>&1 &
  local pid=$! i
  for i in $(seq 400); do
    ls "$1.parts"/*.jsonl.json >/dev/null 2>&1 && break
    sleep 0.05
  done
  # The ranks may sit in process groups of their own: kill the whole session
  # (setsid made $pid its leader) and wait until none of it is left, so that
  # no rank of the killed job still writes parts while the next run starts.
  kill -KILL -- -"$pid" 2>/dev/null
  pkill -KILL -s "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for i in $(seq 200); do pgrep -s "$pid" >/dev/null || break; sleep 0.05; done
}
kill_when_parts "$TMP/cut.csv"
[ -e "$TMP/cut.csv" ] && fail "killed run has a final output" || pass "killed run left no output"
ls "$TMP/cut.csv.parts"/*.jsonl.json >/dev/null 2>&1 && pass "finished parts kept" || fail "no finished part kept"
"${MPIRUN[@]}" -n 3 "$DS" generate "${L[@]}" -o "$TMP/cut.csv" --resume 2>"$TMP/rlog" ||
  fail "resume: $(tail -3 "$TMP/rlog")"
cmp -s "$TMP/long.csv" "$TMP/cut.csv" && pass "killed, resumed on 3 ranks: byte-identical" || fail "resumed output differs"
# Without --resume an interrupted run's parts are discarded, with a warning.
kill_when_parts "$TMP/cut2.csv"
"${MPIRUN[@]}" -n 2 "$DS" generate "${L[@]}" -o "$TMP/cut2.csv" 2>"$TMP/wlog" && grep -q "discarded" "$TMP/wlog" &&
  cmp -s "$TMP/long.csv" "$TMP/cut2.csv" && pass "a new run replaces old parts (warning)" || fail "rerun: $(cat "$TMP/wlog")"
# Standard output.
"${MPIRUN[@]}" -n 2 "$DS" generate "${G[@]}" -o - 2>/dev/null > "$TMP/stdout.csv"
cmp -s "$TMP/one.csv" "$TMP/stdout.csv" && pass "to standard output: identical" || fail "stdout output differs"
finish
