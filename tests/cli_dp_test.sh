#!/usr/bin/env bash
# Differentially private training through the CLI: record-level DP-SGD runs,
# reports epsilon/delta per epoch and in info, refuses a SentencePiece
# vocabulary, keeps value rules out of the model, meets a target epsilon, and
# the DP model still learns (loss falls below the untrained loss).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
# penguins: 344 short records (fast); delta default 1/344.
cp "$ROOT/tests/data/datasets/penguins.csv" "$TMP/t.csv"
N=$(($(wc -l < "$TMP/t.csv") - 1))
SMALL=(--epochs 5 --embedding-dim 16 --rnn-units 32 --batch-size 32 --seq-length 20 --seed 9
       --dp-l2-norm-clip 1.0 --dp-deterministic-noise)

"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/dp" --dp --dp-noise-multiplier 0.8 "${SMALL[@]}" 2>"$TMP/log" &&
  pass "dp training runs" || fail "dp training: $(tail -3 "$TMP/log")"
[ "$(head -1 "$TMP/dp/model_history.csv")" = "epoch,loss,accuracy,val_loss,val_accuracy,epsilon,delta,best,steps" ] &&
  pass "history has epsilon and delta" || fail "history header: $(head -1 "$TMP/dp/model_history.csv")"
awk -F, 'NR>1 { if ($6 <= prev) bad=1; prev=$6 } END { exit bad }' "$TMP/dp/model_history.csv" &&
  pass "epsilon grows every epoch" || fail "epsilon not increasing: $(cat "$TMP/dp/model_history.csv")"
awk -F, -v n="$N" 'NR>1 && ($7 * n < 0.999 || $7 * n > 1.001) { bad=1 } END { exit bad }' "$TMP/dp/model_history.csv" &&
  pass "delta defaults to 1/n (n=$N)" || fail "delta: $(cat "$TMP/dp/model_history.csv")"
# DP defaults fill only what the user did not set (here: the optimizer and its step).
grep -q "dp: DP-SGD defaults for settings not given: optimizer adam, learning_rate 0.02" "$TMP/log" &&
  pass "dp defaults announced" || fail "dp defaults line: $(grep 'dp:' "$TMP/log")"
python3 - "$TMP/dp/model_params.json" <<'PY' && pass "explicit settings kept, dp defaults stored" || fail "dp config in model_params.json"
import json, sys
c = json.load(open(sys.argv[1]))
want = {"batch_size": 32, "epochs": 5, "rnn_units": 32, "embedding_dim": 16, "optimizer": "adam",
        "learning_rate": 0.02}
bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
print(bad or "ok")
sys.exit(1 if bad else 0)
PY
"$DS" info --model-dir "$TMP/dp" > "$TMP/info" 2>&1
grep -q "epsilon" "$TMP/info" && grep -q "one record" "$TMP/info" && pass "info shows epsilon and the unit" || fail "info: $(cat "$TMP/info")"
grep -q '"categories"' "$TMP/dp/column_rules.json" && fail "dp model stores category sets" || pass "no category sets stored under dp"
grep -q '"min"' "$TMP/dp/column_rules.json" && fail "dp model stores min/max" || pass "no min/max stored under dp"
grep -q '"type": "char"' "$TMP/dp/tokenizer.json" && pass "char tokenizer under dp" || fail "tokenizer under dp: $(head -c 200 "$TMP/dp/tokenizer.json")"
python3 - "$TMP/dp" <<'PY' && pass "dp model learns (loss falls every epoch, last < 0.9 x ln V)" || fail "dp model did not learn"
import csv, json, math, sys
d = sys.argv[1]
v = json.load(open(d + "/model_params.json"))["datasynth"]["network"]["vocab_size"]
rows = list(csv.DictReader(open(d + "/model_history.csv")))
loss = [float(r["loss"]) for r in rows]
print("losses", loss, "ln V", math.log(v))
sys.exit(0 if all(b < a for a, b in zip(loss, loss[1:])) and loss[-1] < 0.9 * math.log(v) else 1)
PY

out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/sp" --dp --tokenizer sentencepiece "${SMALL[@]}" 2>&1)
[ $? -ne 0 ] && grep -q "reveal rare substrings" <<<"$out" && pass "sentencepiece refused under dp" || fail "sentencepiece under dp: $out"
[ -e "$TMP/sp/model_params.json" ] && fail "refused run left a model" || pass "refused run left no model"

"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/target" --dp --dp-target-epsilon 5 --dp-delta 1e-5 "${SMALL[@]}" 2>"$TMP/log2" &&
  pass "target epsilon run" || fail "target epsilon: $(tail -3 "$TMP/log2")"
python3 - "$TMP/target" <<'PY' && pass "final epsilon within the target" || fail "target epsilon exceeded"
import json, sys
m = json.load(open(sys.argv[1] + "/model_params.json"))["datasynth"]
print("epsilon", m["epsilon"], "delta", m["delta"])
sys.exit(0 if 0 < m["epsilon"] <= 5.0 and m["delta"] == 1e-5 else 1)
PY
finish
