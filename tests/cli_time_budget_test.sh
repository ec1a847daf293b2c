#!/usr/bin/env bash
# max_training_time_seconds is a whole-run budget (issue 13, item 7): the wall
# time of `train` (plain and --tabular, every batch together) stays within 10%
# of it plus a small constant for process start, validation included (the last
# epoch is validated and saved inside the budget), and one line says that
# training stopped on the budget. Each case runs under `timeout`.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
T=(timeout --foreground -k 5 120)
CSV="$ROOT/examples/telco_churn_2k.csv"
# Epochs much longer than the budget, with a validation pass of ~1 s (28 batches).
NET=(--tokenizer char --epochs 1000 --embedding-dim 64 --rnn-units 256 --batch-size 32
     --seq-length 64 --seed 3)
now() { date +%s.%N; }
# within BUDGET SECONDS: 0.6 x budget <= seconds <= 1.1 x budget + 1 s (process start).
within() { awk -v b="$1" -v s="$2" 'BEGIN { exit !(s >= 0.6 * b && s <= 1.1 * b + 1.0) }'; }
last_val_loss() { tail -n 1 "$1/model_history.csv" | cut -d, -f4; }
stop_reason() {
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['datasynth']['stop_reason'])" \
    "$1/model_params.json"
}

# 1. Plain training, 6 s.
B=6
t0=$(now)
"${T[@]}" "$DS" train -i "$CSV" --field-delimiter , "${NET[@]}" --threads 1 \
  --max-training-time-seconds $B -m "$TMP/p" >"$TMP/p.log" 2>&1
rc=$?; s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
[ $rc -eq 0 ] && pass "plain: trained (exit 0)" || fail "plain: exit $rc: $(tail -3 "$TMP/p.log")"
within $B "$s" && pass "plain: ${s}s for a ${B}s budget" || fail "plain: ${s}s for a ${B}s budget"
[ "$(grep -c "^time budget: stopping" "$TMP/p.log")" = 1 ] && pass "plain: one line says so" ||
  fail "plain: no stop line: $(grep -v 'step [0-9]*/' "$TMP/p.log" | tail -4)"
[ -n "$(last_val_loss "$TMP/p")" ] && [ "$(stop_reason "$TMP/p")" = time_limit ] &&
  pass "plain: the last epoch was validated, stop_reason time_limit" ||
  fail "plain: history $(tail -n 1 "$TMP/p/model_history.csv")"
"$DS" info --model-dir "$TMP/p" >/dev/null 2>&1 && pass "plain: loadable" || fail "plain: not loadable"

# 2. --tabular, batches one after the other: the budget covers all of them.
B=8
t0=$(now)
"${T[@]}" "$DS" train --tabular -i "$CSV" "${NET[@]}" --threads 1 --parallel-batches 1 \
  --max-training-time-seconds $B -m "$TMP/t" >"$TMP/t.log" 2>&1
rc=$?; s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
[ $rc -eq 0 ] && pass "tabular: trained (exit 0)" || fail "tabular: exit $rc: $(tail -3 "$TMP/t.log")"
within $B "$s" && pass "tabular: ${s}s for a ${B}s budget (2 batches)" ||
  fail "tabular: ${s}s for a ${B}s budget"
n=$(grep -c "time budget [0-9.]*s)" "$TMP/t.log")
[ "$n" = 2 ] && pass "tabular: each batch started with its share" || fail "tabular: $n shares"
# The later batch is not starved: its share is at least a third of the first's.
awk '/time budget [0-9.]+s\)/ { match($0, /time budget [0-9.]+s\)/);
       v[n++] = substr($0, RSTART + 12, RLENGTH - 14) + 0 }
     END { exit !(n == 2 && v[1] >= v[0] / 3) }' "$TMP/t.log" &&
  pass "tabular: the second batch got a fair share" ||
  fail "tabular: shares: $(grep -o 'time budget [0-9.]*s)' "$TMP/t.log" | tr '\n' ' ')"
for b in "$TMP"/t/batch_*; do
  [ -n "$(last_val_loss "$b")" ] || fail "tabular: $b: last epoch not validated"
done
"${T[@]}" "$DS" generate --model-dir "$TMP/t" -n 3 -o "$TMP/t.csv" >/dev/null 2>&1 &&
  pass "tabular: the model generates" || fail "tabular: generate"

finish
