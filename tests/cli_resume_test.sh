#!/usr/bin/env bash
# Crash safety of training: a run killed after an epoch leaves a loadable
# model, `--resume` continues it (history continues, no epoch counted twice),
# and the resumed run ends with the same weights as an uninterrupted one.
# Then kill -9 at random moments: the directory is always either not a model
# yet or a loadable one.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
ARGS=(--input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 4 --embedding-dim 16
      --rnn-units 32 --batch-size 8 --seq-length 32 --seed 5 --early-stopping=false --threads 1)

"$DS" train "${ARGS[@]}" --model-dir "$TMP/full" 2>/dev/null || fail "uninterrupted run"
DATASYNTH_TEST_EXIT_AFTER_EPOCH=2 "$DS" train "${ARGS[@]}" --model-dir "$TMP/cut" 2>/dev/null
rc=$?
[ $rc -eq 137 ] && pass "simulated kill after epoch 2" || fail "expected exit 137, got $rc"
"$DS" info --model-dir "$TMP/cut" >/dev/null 2>&1 && pass "killed run leaves a loadable model" || fail "killed run not loadable"
[ "$(tail -n +2 "$TMP/cut/model_history.csv" | wc -l)" = 2 ] && pass "2 epochs in history" || fail "history after kill"
out=$("$DS" train "${ARGS[@]}" --model-dir "$TMP/cut" 2>&1 >/dev/null)
grep -q "already holds" <<<"$out" && pass "no silent overwrite of an interrupted run" || fail "rerun without --resume: $out"
"$DS" train --resume --model-dir "$TMP/cut" 2>"$TMP/resume.log" && pass "resume runs" || fail "resume failed: $(cat "$TMP/resume.log")"
[ "$(tail -n +2 "$TMP/cut/model_history.csv" | cut -d, -f1 | tr '\n' ' ')" = "1 2 3 4 " ] &&
  pass "history continues 1..4" || fail "history: $(cat "$TMP/cut/model_history.csv")"
wf=$(python3 -c "import json;print(json.load(open('$TMP/full/model_params.json'))['datasynth']['weights_file'])")
wc=$(python3 -c "import json;print(json.load(open('$TMP/cut/model_params.json'))['datasynth']['weights_file'])")
cmp -s "$TMP/full/$wf" "$TMP/cut/$wc" && pass "resumed weights identical to an uninterrupted run" ||
  fail "resumed weights differ ($wf vs $wc)"
cmp -s "$TMP/full/model_history.csv" "$TMP/cut/model_history.csv" && pass "identical history" || fail "history differs"

# kill -9 at random moments
for i in 1 2 3 4 5; do
  rm -rf "$TMP/k"
  "$DS" train "${ARGS[@]}" --model-dir "$TMP/k" 2>/dev/null &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  if [ -e "$TMP/k/model_params.json" ]; then
    "$DS" info --model-dir "$TMP/k" >/dev/null 2>&1 && pass "kill $i: loadable model" || fail "kill $i: model_params.json but not loadable"
  else
    pass "kill $i: no model yet"
  fi
  if [ -e "$TMP/k/checkpoint.json" ]; then
    "$DS" train --resume --model-dir "$TMP/k" 2>/dev/null && "$DS" info --model-dir "$TMP/k" >/dev/null 2>&1 &&
      pass "kill $i: resumed to completion" || fail "kill $i: resume failed"
  fi
done
finish
