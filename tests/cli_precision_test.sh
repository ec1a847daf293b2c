#!/usr/bin/env bash
# --precision through the CLI (docs/precision.md): the precision a run used is
# named in the train summary and recorded in model_params.json; a CPU without
# bf16 (forced with DATASYNTH_CPU_BF16=0) falls back to fp32 with one line; the
# training default (auto) is bf16 on a CPU with it; a
# short bf16 run ends within 1% of fp32's val_loss on the same seed; bf16
# generation is byte-identical for any worker count;
# a model without the field loads as fp32.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

# 20 epochs: runs this short diverge by trajectory noise (fp32 over seeds 3-5
# spreads 2%); by epoch 20 bf16 ends 0.4-0.9% above fp32 on seeds 3-5.
SMALL=(--epochs 20 --embedding-dim 32 --rnn-units 64 --num-layers 1 --batch-size 16
       --seq-length 64 --seed 5 --device cpu --threads 1 --field-delimiter ,)
head -n 601 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
recorded() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['datasynth']['precision'])" "$1/model_params.json"; }
last_val() { tail -n 1 "$1/model_history.csv" | python3 -c "
import sys, csv; h = open(sys.argv[1]).readline().strip().split(','); r = next(csv.reader(sys.stdin))
print(r[h.index('val_loss')])" "$1/model_history.csv"; }

# --- the fallback: no bf16 on this "CPU" ---
if DATASYNTH_CPU_BF16=0 "$DS" train --input "$TMP/t.csv" --model-dir "$TMP/nob" --precision auto \
     "${SMALL[@]:2}" --epochs 1 2>"$TMP/log"; then
  n=$(grep -c "running fp32" "$TMP/log")
  [ "$n" = 1 ] && pass "no bf16: one line ($(grep "running fp32" "$TMP/log"))" || fail "no bf16: $n lines"
  [ "$(recorded "$TMP/nob")" = fp32 ] && pass "no bf16: records fp32" || fail "no bf16: records $(recorded "$TMP/nob")"
else
  fail "train without bf16: $(cat "$TMP/log")"
fi
"$DS" train --input "$TMP/t.csv" --model-dir "$TMP/x" --precision half "${SMALL[@]}" 2>"$TMP/log" &&
  fail "--precision half accepted" || { grep -q "precision" "$TMP/log" && pass "--precision half refused" || fail "refusal: $(cat "$TMP/log")"; }

if ! grep -qw avx512_bf16 /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo; then
  skip "bf16 runs: this CPU has neither AVX512_BF16 nor AMX"
  finish
fi

# --- the training default is auto: bf16 on this CPU ---
if "$DS" train --input "$TMP/t.csv" --model-dir "$TMP/def" "${SMALL[@]:2}" --epochs 1 2>"$TMP/log"; then
  [ "$(recorded "$TMP/def")" = bf16 ] && pass "default precision: bf16 on a CPU with it" ||
    fail "default precision records $(recorded "$TMP/def")"
else
  fail "train with the default precision: $(cat "$TMP/log")"
fi

# --- fp32 and bf16 on the same seed ---
for p in fp32 bf16; do
  if "$DS" train --input "$TMP/t.csv" --model-dir "$TMP/$p" --precision $p "${SMALL[@]}" 2>"$TMP/$p.log"; then
    grep -q "tokens/s ($p)" "$TMP/$p.log" && pass "$p: named in the summary" || fail "$p summary: $(tail -2 "$TMP/$p.log")"
    [ "$(recorded "$TMP/$p")" = $p ] && pass "$p: recorded" || fail "$p: records $(recorded "$TMP/$p")"
  else
    fail "train --precision $p: $(cat "$TMP/$p.log")"
  fi
done
v32=$(last_val "$TMP/fp32"); v16=$(last_val "$TMP/bf16")
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(b - a) <= 0.01 * a else 1)" "$v32" "$v16" &&
  pass "bf16 val_loss $v16 within 1% of fp32 $v32" || fail "bf16 val_loss $v16 vs fp32 $v32"

# --- generation: byte-identical across worker counts in bf16 ---
gen() { "$DS" generate -m "$TMP/bf16" -n 300 -o "$TMP/$1.csv" -p "$2" --seed 9 --precision "$3" --overwrite 2>"$TMP/gen.log" || fail "generate $*: $(cat "$TMP/gen.log")"; }
gen b1 1 bf16; gen b2 2 bf16; gen b3 3 bf16; gen f1 1 fp32; gen a1 2 auto
cmp -s "$TMP/b1.csv" "$TMP/b2.csv" && cmp -s "$TMP/b1.csv" "$TMP/b3.csv" &&
  pass "bf16 output identical for 1, 2, 3 workers" || fail "bf16 output differs by worker count"
# generate's auto: the model's bf16 where bf16 inference pays (not on an Intel
# CPU with AVX512_BF16 but no AMX: fp32 there, with one line).
if grep -qw GenuineIntel /proc/cpuinfo && ! grep -qw amx_bf16 /proc/cpuinfo; then
  cmp -s "$TMP/a1.csv" "$TMP/f1.csv" && grep -q "slower than fp32" "$TMP/gen.log" &&
    pass "auto on this Intel CPU without AMX: fp32, with a line" || fail "auto on Intel without AMX"
else
  cmp -s "$TMP/a1.csv" "$TMP/b1.csv" && pass "auto = the model's bf16" || fail "auto is not the model's bf16"
fi
DATASYNTH_CPU_BF16=0 "$DS" generate -m "$TMP/bf16" -n 50 -o "$TMP/nb.csv" -p 1 --seed 9 --overwrite 2>"$TMP/gen.log" &&
  grep -q "running fp32" "$TMP/gen.log" && pass "generate without bf16: fp32 with a line" || fail "generate without bf16: $(cat "$TMP/gen.log")"

# --- a model written before the field loads as fp32 ---
python3 - "$TMP/bf16/model_params.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); del p["datasynth"]["precision"]; p["precision"] = "fp32"
open(sys.argv[1], "w").write(json.dumps(p, indent=2))
PY
gen o1 1 auto
cmp -s "$TMP/o1.csv" "$TMP/f1.csv" && pass "a model without precision generates as fp32" || fail "old model not fp32"
finish
