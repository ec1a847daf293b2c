#!/usr/bin/env bash
# End-to-end: a field model trains on the loss over each target's legal ids
# (model/network.h, "legal"): model_params.json records it, the untrained loss
# is far below ln(vocabulary) (the full softmax's), and generation stays 100%
# valid; a char model keeps the full-vocabulary loss.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

DATA=$ROOT/tests/data/datasets/penguins.csv
SMALL=(--epochs 4 --embedding-dim 16 --rnn-units 32 --seed 3 --threads 1)

if "$DS" train --input "$DATA" --model-dir "$TMP/f" "${SMALL[@]}" > "$TMP/f.log" 2>&1; then
  pass "field model trains"
else
  fail "field train: $(tail -3 "$TMP/f.log")"
fi
python3 - "$TMP/f/model_params.json" "$TMP/f.log" <<'PY' && pass "field: loss legal, untrained loss below ln(V)" || fail "field loss"
import json, math, re, sys
j = json.load(open(sys.argv[1]))
d = j["datasynth"]
assert d["loss"] == "legal", d.get("loss")
V = d["network"]["vocab_size"]
untrained = float(re.search(r"untrained ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert untrained < 0.6 * math.log(V), (untrained, math.log(V))
PY
if "$DS" generate --model-dir "$TMP/f" -n 200 -o "$TMP/s.csv" --seed 1 > "$TMP/g.log" 2>&1 &&
   grep -q "(0 invalid, 100.0% valid)" "$TMP/g.log"; then
  pass "field: 200 records, 100% valid"
else
  fail "field generate: $(tail -2 "$TMP/g.log")"
fi

if "$DS" train --input "$DATA" --model-dir "$TMP/c" --tokenizer char --batch-size 8 --max-training-steps 3 \
    --epochs 1 --embedding-dim 16 --rnn-units 32 --seed 3 --threads 1 > "$TMP/c.log" 2>&1; then
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["datasynth"]["loss"] == "full"' \
    "$TMP/c/model_params.json" && pass "char: loss full" || fail "char: loss not full"
else
  fail "char train: $(tail -3 "$TMP/c.log")"
fi
finish
