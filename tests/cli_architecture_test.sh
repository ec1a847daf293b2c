#!/usr/bin/env bash
# The model seam through the CLI: `train --architecture gru` + `generate` +
# `info`, and model compatibility: a model directory without `architecture`
# (format version 1, every model before the seam) loads as an LSTM; a wrong
# architecture is refused naming the key; a GRU model claiming format 1 is
# refused (a version-1 reader would misread its weights).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

SMALL=(--tokenizer char --epochs 2 --embedding-dim 16 --rnn-units 32 --batch-size 8 --seq-length 32
       --seed 5 --device cpu --field-delimiter ,)
head -n 201 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"

edit_params() {  # edit_params DIR PYTHON_STATEMENTS (p = the model_params.json object)
  python3 - "$1/model_params.json" "$2" <<'PY'
import json, sys
path, code = sys.argv[1], sys.argv[2]
p = json.load(open(path))
exec(code)
open(path, "w").write(json.dumps(p, indent=2))
PY
}
expect_error() {  # expect_error NAME SUBSTRING -- ARGS...
  local name=$1 want=$2
  shift 3
  local out
  if out=$("$DS" "$@" 2>&1 >/dev/null); then fail "$name: exit 0"; return; fi
  grep -qF -- "$want" <<<"$out" && pass "$name ($out)" || fail "$name: '$out' lacks '$want'"
}

# --- GRU: train, info, generate ---
if "$DS" train --input "$TMP/t.csv" --model-dir "$TMP/gru" --architecture gru "${SMALL[@]}" 2>"$TMP/log"; then
  pass "train --architecture gru"
  grep -q "network: .* 2 x GRU 32" "$TMP/log" && pass "train names the GRU" ||
    fail "train's network line: $(grep network: "$TMP/log")"
else
  fail "train --architecture gru: $(cat "$TMP/log")"
fi
grep -q '"architecture": "gru"' "$TMP/gru/model_params.json" && pass "config records gru" || fail "config lacks gru"
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['datasynth']; sys.exit(0 if d['network']['architecture']=='gru' and d['format_version']==2 else 1)" "$TMP/gru/model_params.json" &&
  pass "network block: gru, format 2" || fail "network block / format version"
"$DS" info --model-dir "$TMP/gru" >"$TMP/info" 2>&1 && grep -q "2 x GRU 32" "$TMP/info" &&
  pass "info says GRU" || fail "info: $(cat "$TMP/info")"
if "$DS" generate --model-dir "$TMP/gru" -n 20 --seed 1 -p 1 --device cpu -o "$TMP/gru.csv" 2>"$TMP/glog" &&
   [ "$(tail -n +2 "$TMP/gru.csv" | wc -l)" = 20 ]; then
  pass "generate from the GRU model (20 records)"
else
  fail "generate gru: $(cat "$TMP/glog")"
fi
"$DS" generate --model-dir "$TMP/gru" -n 20 --seed 1 -p 1 --device cpu -o "$TMP/gru2.csv" 2>/dev/null
cmp -s "$TMP/gru.csv" "$TMP/gru2.csv" && pass "GRU generation reproducible" || fail "GRU generation differs per run"
# The GRU learns: training loss of epoch 2 below epoch 1.
awk -F, 'NR==2{a=$2} NR==3{b=$2} END{exit !(b < a)}' "$TMP/gru/model_history.csv" &&
  pass "GRU loss decreases" || fail "GRU loss: $(cat "$TMP/gru/model_history.csv")"

# Resume keeps the architecture: killed after epoch 1, resumed, same weights as the whole run.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=1 "$DS" train --input "$TMP/t.csv" --model-dir "$TMP/cut" \
  --architecture gru "${SMALL[@]}" 2>/dev/null
"$DS" train --resume --model-dir "$TMP/cut" 2>"$TMP/rlog" || fail "GRU resume: $(cat "$TMP/rlog")"
wf() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]+'/model_params.json'))['datasynth']['weights_file'])" "$1"; }
cmp -s "$TMP/gru/$(wf "$TMP/gru")" "$TMP/cut/$(wf "$TMP/cut")" &&
  pass "GRU resumed run = uninterrupted run (weights)" || fail "GRU resume: weights differ"

expect_error "unknown --architecture" "config key 'architecture': 'rnn' is not one of: lstm, gru" -- \
  train --input "$TMP/t.csv" --model-dir "$TMP/bad" --architecture rnn "${SMALL[@]}"

# --- compatibility: a model written before the seam (no architecture, format 1) ---
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/lstm" "${SMALL[@]}" 2>/dev/null
"$DS" generate --model-dir "$TMP/lstm" -n 10 --seed 2 -p 1 --device cpu -o "$TMP/new.csv" 2>/dev/null
cp -r "$TMP/lstm" "$TMP/old"
edit_params "$TMP/old" 'p.pop("architecture"); p["datasynth"]["network"].pop("architecture"); p["datasynth"]["format_version"] = 1'
if "$DS" generate --model-dir "$TMP/old" -n 10 --seed 2 -p 1 --device cpu -o "$TMP/old.csv" 2>"$TMP/olog" &&
   cmp -s "$TMP/new.csv" "$TMP/old.csv"; then
  pass "old model (no architecture) loads as LSTM, same output"
else
  fail "old model: $(cat "$TMP/olog")"
fi
"$DS" info --model-dir "$TMP/old" 2>&1 | grep -q "2 x LSTM 32" && pass "old model: info says LSTM" || fail "old model info"

cp -r "$TMP/lstm" "$TMP/wrong"
edit_params "$TMP/wrong" 'p["datasynth"]["network"]["architecture"] = "transformer"'
expect_error "wrong network architecture" "network architecture 'transformer' is not one of: lstm, gru" -- \
  generate --model-dir "$TMP/wrong" -n 1 -p 1 --device cpu
cp -r "$TMP/lstm" "$TMP/mismatch"
edit_params "$TMP/mismatch" 'p["architecture"] = "gru"'
expect_error "config vs network" "config key 'architecture' is 'gru' but the network is 'lstm'" -- \
  generate --model-dir "$TMP/mismatch" -n 1 -p 1 --device cpu
cp -r "$TMP/gru" "$TMP/gru_v1"
edit_params "$TMP/gru_v1" 'p["datasynth"]["format_version"] = 1'
expect_error "GRU claiming format 1" "network architecture 'gru' needs model format version 2 (the file says 1)" -- \
  generate --model-dir "$TMP/gru_v1" -n 1 -p 1 --device cpu
cp -r "$TMP/lstm" "$TMP/future"
edit_params "$TMP/future" 'p["datasynth"]["format_version"] = 3'
expect_error "future format" "model format version 3 is not supported (this build reads 1 to 2)" -- \
  info --model-dir "$TMP/future"

finish
