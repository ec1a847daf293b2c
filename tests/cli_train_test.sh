#!/usr/bin/env bash
# End-to-end: `datasynth train` and `info` through the CLI, including the error
# matrix of the Train issue (each: one clear line, non-zero exit, no model left).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

# Small network so the test runs in seconds.
SMALL=(--tokenizer char --epochs 2 --embedding-dim 16 --rnn-units 32 --batch-size 8 --seq-length 32 --seed 3)

expect_error() {  # expect_error NAME SUBSTRING MODEL_DIR -- ARGS...
  local name=$1 want=$2 dir=$3
  shift 4
  local out rc
  out=$("$DS" "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -eq 0 ]; then fail "$name: exit 0"; return; fi
  if ! grep -qF -- "$want" <<<"$out"; then fail "$name: message '$out' lacks '$want'"; return; fi
  if [ "$(grep -c "error:" <<<"$out")" -ne 1 ]; then fail "$name: not exactly one error line: $out"; return; fi
  if [ -n "$dir" ] && [ -e "$dir/model_params.json" ]; then fail "$name: left a model behind"; return; fi
  pass "$name ($out)"
}

# --- a working run ---
head -n 401 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
if "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" "${SMALL[@]}" 2>"$TMP/log"; then
  pass "train runs"
else
  fail "train failed: $(cat "$TMP/log")"
fi
wfile() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/model_params.json'))['datasynth']['weights_file'])" "$1"; }
for f in model_params.json "$(wfile "$TMP/m")" tokenizer.json model_history.csv column_rules.json; do
  [ -s "$TMP/m/$f" ] && pass "model has $f" || fail "model lacks $f"
done
grep -q "epoch 1/2" "$TMP/log" || grep -q "epoch   1" "$TMP/log" && pass "progress printed" || fail "no progress lines"
[ "$(head -1 "$TMP/m/model_history.csv")" = "epoch,loss,accuracy,val_loss,val_accuracy,best,steps" ] &&
  pass "history header" || fail "history header: $(head -1 "$TMP/m/model_history.csv")"
[ "$(tail -n +2 "$TMP/m/model_history.csv" | wc -l)" = 2 ] && pass "two history rows" || fail "history rows"
[ "$(awk -F, 'NR>1 && $6==1' "$TMP/m/model_history.csv" | wc -l)" = 1 ] && pass "one best epoch" || fail "best flag"
"$DS" info --model-dir "$TMP/m" >"$TMP/info" 2>&1 && grep -q "LSTM 32" "$TMP/info" && grep -q "columns      20" "$TMP/info" &&
  pass "info" || fail "info: $(cat "$TMP/info")"

# Reproducible: same seed, same weights.
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m2" "${SMALL[@]}" 2>/dev/null
cmp -s "$TMP/m/$(wfile "$TMP/m")" "$TMP/m2/$(wfile "$TMP/m2")" && pass "same seed, same weights" || fail "weights differ for the same seed"

# Config file + flags win.
echo '{"epochs": 1, "rnn_units": 16}' > "$TMP/cfg.json"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m3" "${SMALL[@]}" --config "$TMP/cfg.json" 2>/dev/null
grep -q '"rnn_units": 32' "$TMP/m3/model_params.json" && grep -q '"epochs": 2' "$TMP/m3/model_params.json" &&
  pass "flags win over config file" || fail "config precedence"
echo '{"epochs": 1}' > "$TMP/cfg1.json"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m4" --tokenizer char --embedding-dim 16 --rnn-units 16 --batch-size 8 --seq-length 32 --config "$TMP/cfg1.json" 2>/dev/null
grep -q '"epochs": 1' "$TMP/m4/model_params.json" && pass "config file applies" || fail "config file ignored"

"$DS" train --help | grep -A1 -- "--batch-size" | grep -q "default: 64" && pass "--help lists defaults" || fail "--help defaults"

# --- error matrix ---
expect_error "existing model" "already holds a trained model" "" -- train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" "${SMALL[@]}"
[ -s "$TMP/m/model_params.json" ] && pass "existing model untouched" || fail "existing model damaged"
expect_error "missing input" "does not exist" "$TMP/e1" -- train --input "$TMP/nope.csv" --model-dir "$TMP/e1" "${SMALL[@]}"
: > "$TMP/empty.csv"
expect_error "empty file" "empty" "$TMP/e2" -- train --input "$TMP/empty.csv" --field-delimiter , --model-dir "$TMP/e2" "${SMALL[@]}"
head -1 "$TMP/t.csv" > "$TMP/header.csv"
expect_error "header only" "header only" "$TMP/e3" -- train --input "$TMP/header.csv" --field-delimiter , --model-dir "$TMP/e3" "${SMALL[@]}"
head -5 "$TMP/t.csv" > "$TMP/few.csv"
expect_error "too few records" "too few records" "$TMP/e4" -- train --input "$TMP/few.csv" --field-delimiter , --model-dir "$TMP/e4" "${SMALL[@]}"
[ -e "$TMP/e4" ] && fail "too few records: left the directory" || pass "too few records: no directory left"
printf 'a,b\n1,\xff\xfe\n' > "$TMP/utf.csv"
expect_error "invalid utf-8" "UTF-8" "$TMP/e5" -- train --input "$TMP/utf.csv" --field-delimiter , --model-dir "$TMP/e5" "${SMALL[@]}"
expect_error "invalid utf-8 names line" "utf.csv:2" "$TMP/e5" -- train --input "$TMP/utf.csv" --field-delimiter , --model-dir "$TMP/e5" "${SMALL[@]}"
echo '{"epoch": 3}' > "$TMP/bad.json"
expect_error "unknown config key" "unknown config key 'epoch'" "$TMP/e6" -- train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/e6" --config "$TMP/bad.json"
expect_error "value out of range" "out of range" "$TMP/e7" -- train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/e7" --batch-size 0
printf 'a,b\n1,2\n3\n' > "$TMP/ragged.csv"
expect_error "ragged row" "ragged.csv:3" "$TMP/e8" -- train --input "$TMP/ragged.csv" --field-delimiter , --model-dir "$TMP/e8" "${SMALL[@]}"
mkdir -p "$TMP/unreadable.csv"
expect_error "unreadable input" "unreadable.csv" "$TMP/e9" -- train --input "$TMP/unreadable.csv" --field-delimiter , --model-dir "$TMP/e9" "${SMALL[@]}"

finish
