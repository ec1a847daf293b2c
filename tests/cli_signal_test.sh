#!/usr/bin/env bash
# SIGINT / SIGTERM during training (issue 13, item 6): `train` (plain, --dp,
# --tabular) and `synthesize` stop between steps, exit 130 with "interrupted;
# continue with --resume" and the command, keep the last saved epoch loadable,
# and `--resume` completes. A run stopped before its first save removes what it
# created, and only that. Each case runs under `timeout`; the signal is sent
# when the progress output shows the moment wanted (no fixed sleeps).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
T=(timeout --foreground -k 5 120)
CSV="$ROOT/examples/telco_churn_2k.csv"
BASE=(--tokenizer char --epochs 1000 --embedding-dim 16 --rnn-units 32 --seq-length 32 --seed 5)
SMALL=("${BASE[@]}" --batch-size 8 --threads 1)
TAB=("${BASE[@]}" --batch-size 8 --threads 2)
# Epochs of several seconds: a signal sent at the first step lands before the first save.
SLOW=(--tokenizer char --epochs 1000 --embedding-dim 32 --rnn-units 128 --batch-size 4
      --seq-length 32 --seed 5 --threads 1)

# wait_for FILE PATTERN [COUNT]: until PATTERN occurs COUNT times in FILE (60 s at most).
wait_for() {
  local n=${3:-1}
  for _ in $(seq 1200); do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$n" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
start() { local log=$1; shift; "${T[@]}" "$DS" "$@" >"$log" 2>&1 & pid=$!; }
stop() { kill -"$1" "$pid" 2>/dev/null; wait "$pid"; rc=$?; }
rows() { tail -n +2 "$1/model_history.csv" | wc -l; }
no_temp_files() { [ -z "$(find "$1" -name '.*.tmp.*' 2>/dev/null)" ]; }

# 1. Before the first save, into a directory the run creates: removed.
start "$TMP/1.log" train -i "$CSV" --field-delimiter , "${SLOW[@]}" -m "$TMP/m1"
wait_for "$TMP/1.log" "step 1/" || fail "1: no progress: $(cat "$TMP/1.log")"
stop INT
[ $rc -eq 130 ] && pass "1: SIGINT before the first save exits 130" || fail "1: exit $rc"
grep -q "^datasynth: interrupted before the first epoch was saved; removed" "$TMP/1.log" &&
  pass "1: message says nothing was saved" || fail "1: message: $(tail -2 "$TMP/1.log")"
[ ! -e "$TMP/m1" ] && pass "1: the directory it created is gone" || fail "1: left $(ls -A "$TMP/m1")"

# 2. Before the first save, into a directory that existed: it and the user's files stay.
mkdir "$TMP/m2" && echo mine > "$TMP/m2/notes.txt"
start "$TMP/2.log" train -i "$CSV" --field-delimiter , "${SLOW[@]}" -m "$TMP/m2"
wait_for "$TMP/2.log" "step 1/" || fail "2: no progress"
stop TERM
[ $rc -eq 130 ] && pass "2: SIGTERM exits 130" || fail "2: exit $rc"
[ "$(ls -A "$TMP/m2")" = notes.txt ] && [ "$(cat "$TMP/m2/notes.txt")" = mine ] &&
  pass "2: pre-existing directory kept with only the user's file" || fail "2: left $(ls -A "$TMP/m2")"

# 3. After a save: loadable, the hint, --resume completes and the history continues.
start "$TMP/3.log" train -i "$CSV" --field-delimiter , "${SMALL[@]}" -m "$TMP/m3"
wait_for "$TMP/3.log" "^epoch   1 " || fail "3: no epoch: $(cat "$TMP/3.log")"
stop TERM
[ $rc -eq 130 ] && pass "3: SIGTERM after a save exits 130" || fail "3: exit $rc"
grep -q "^datasynth: interrupted; continue with --resume" "$TMP/3.log" &&
  grep -qF "datasynth train --resume --model-dir $TMP/m3" "$TMP/3.log" &&
  pass "3: message and the exact command" || fail "3: message: $(tail -2 "$TMP/3.log")"
"$DS" info --model-dir "$TMP/m3" >/dev/null 2>&1 && pass "3: the saved epoch is a loadable model" ||
  fail "3: not loadable"
no_temp_files "$TMP/m3" && pass "3: no temporary files left" || fail "3: temporary files"
n=$(rows "$TMP/m3")
"${T[@]}" "$DS" train --resume --model-dir "$TMP/m3" --epochs $((n + 1)) >"$TMP/3r.log" 2>&1 &&
  [ "$(tail -n +2 "$TMP/m3/model_history.csv" | cut -d, -f1 | tr '\n' ' ')" = "$(seq -s ' ' 1 $((n + 1))) " ] &&
  "$DS" info --model-dir "$TMP/m3" >/dev/null 2>&1 &&
  pass "3: --resume completes (epochs 1..$((n + 1)))" || fail "3: resume: $(tail -3 "$TMP/3r.log")"

# 4. The same signal twice at once (as `timeout` sends it) is one request.
start "$TMP/4.log" train -i "$CSV" --field-delimiter , "${SMALL[@]}" -m "$TMP/m4"
wait_for "$TMP/4.log" "^epoch   1 " || fail "4: no epoch"
kill -TERM "$pid"; stop TERM
[ $rc -eq 130 ] && grep -q "continue with --resume" "$TMP/4.log" &&
  "$DS" info --model-dir "$TMP/m4" >/dev/null 2>&1 &&
  pass "4: a doubled SIGTERM still stops cleanly" || fail "4: exit $rc: $(tail -2 "$TMP/4.log")"

# 5. --dp: the accountant's state resumes with the checkpoint.
start "$TMP/5.log" train --dp -i "$CSV" --field-delimiter , "${BASE[@]}" --batch-size 64 --threads 1 \
  --dp-noise-multiplier 1 -m "$TMP/m5"
wait_for "$TMP/5.log" "^epoch   1 " || fail "5: no epoch: $(cat "$TMP/5.log")"
stop INT
[ $rc -eq 130 ] && grep -q "continue with --resume" "$TMP/5.log" && pass "5: --dp interrupted" ||
  fail "5: exit $rc: $(tail -2 "$TMP/5.log")"
n=$(rows "$TMP/m5")
"${T[@]}" "$DS" train --resume --model-dir "$TMP/m5" --epochs $((n + 1)) >"$TMP/5r.log" 2>&1 &&
  [ "$(rows "$TMP/m5")" = $((n + 1)) ] && pass "5: --dp --resume completes" ||
  fail "5: resume: $(tail -3 "$TMP/5r.log")"

# 6. --tabular after every batch saved an epoch: resumable by batch.
start "$TMP/6.log" train --tabular -i "$CSV" "${TAB[@]}" -m "$TMP/m6"
wait_for "$TMP/6.log" "epoch   1 " 2 || fail "6: no epochs: $(cat "$TMP/6.log")"
stop INT
[ $rc -eq 130 ] && pass "6: --tabular SIGINT exits 130" || fail "6: exit $rc"
grep -q "^datasynth: interrupted; continue with --resume" "$TMP/6.log" &&
  grep -qF "datasynth train --tabular --resume --model-dir $TMP/m6" "$TMP/6.log" &&
  pass "6: message and the exact command" || fail "6: message: $(tail -2 "$TMP/6.log")"
[ ! -e "$TMP/m6/tabular.json" ] && [ -e "$TMP/m6/tabular_checkpoint.json" ] &&
  pass "6: not a model yet, resume state kept" || fail "6: $(ls -A "$TMP/m6")"
for b in "$TMP"/m6/batch_*; do
  "$DS" info --model-dir "$b" >/dev/null 2>&1 || fail "6: $b not loadable"
done
out=$("${T[@]}" "$DS" train --tabular -i "$CSV" "${TAB[@]}" -m "$TMP/m6" 2>&1)
grep -q "interrupted tabular training run" <<<"$out" && pass "6: a new run does not replace it silently" ||
  fail "6: new run: $out"
n=0; for b in "$TMP"/m6/batch_*; do r=$(rows "$b"); [ "$r" -gt $n ] && n=$r; done
"${T[@]}" "$DS" train --tabular --resume --model-dir "$TMP/m6" --epochs $((n + 1)) >"$TMP/6r.log" 2>&1 &&
  [ -e "$TMP/m6/tabular.json" ] && [ ! -e "$TMP/m6/tabular_checkpoint.json" ] &&
  [ ! -e "$TMP/m6/.tabular-tmp" ] && pass "6: --tabular --resume completes" ||
  fail "6: resume: $(tail -3 "$TMP/6r.log")"
"${T[@]}" "$DS" generate --model-dir "$TMP/m6" -n 5 -o "$TMP/6.csv" >/dev/null 2>&1 &&
  [ "$(wc -l <"$TMP/6.csv")" = 6 ] && pass "6: the resumed tabular model generates" || fail "6: generate"

# 7. --tabular before any batch saved: the directory it created is gone.
start "$TMP/7.log" train --tabular -i "$CSV" "${SLOW[@]}" -m "$TMP/m7"
wait_for "$TMP/7.log" "network:" || fail "7: no progress: $(cat "$TMP/7.log")"
stop INT
[ $rc -eq 130 ] && grep -q "nothing to resume" "$TMP/7.log" && [ ! -e "$TMP/m7" ] &&
  pass "7: --tabular before a save: exit 130, directory removed" ||
  fail "7: exit $rc, $(tail -1 "$TMP/7.log"), left: $(ls -A "$TMP/m7" 2>&1)"

# 8. synthesize: its training phase, with and without --model-dir.
start "$TMP/8.log" synthesize -i "$CSV" "${TAB[@]}" -m "$TMP/m8" -o "$TMP/8.csv"
wait_for "$TMP/8.log" "epoch   1 " 2 || fail "8: no epochs"
stop TERM
[ $rc -eq 130 ] && grep -qF "datasynth train --tabular --resume --model-dir $TMP/m8" "$TMP/8.log" &&
  [ ! -e "$TMP/8.csv" ] && pass "8: synthesize interrupted: exit 130, the command, no output" ||
  fail "8: exit $rc: $(tail -2 "$TMP/8.log")"
"${T[@]}" "$DS" train --tabular --resume --model-dir "$TMP/m8" --epochs 2 >"$TMP/8r.log" 2>&1 &&
  [ -e "$TMP/m8/tabular.json" ] && pass "8: its model resumes" || fail "8: resume: $(tail -3 "$TMP/8r.log")"
start "$TMP/8b.log" synthesize -i "$CSV" "${TAB[@]}" -o "$TMP/8b.csv"
wait_for "$TMP/8b.log" "epoch   1 " || fail "8b: no epochs"
stop INT
[ $rc -eq 130 ] && grep -q "temporary directory" "$TMP/8b.log" && ! grep -q "to continue:" "$TMP/8b.log" &&
  pass "8b: synthesize without --model-dir: exit 130, no false promise" ||
  fail "8b: exit $rc: $(tail -2 "$TMP/8b.log")"

finish
