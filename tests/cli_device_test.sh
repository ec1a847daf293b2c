#!/usr/bin/env bash
# End-to-end: --device / --gpu-memory / --gpu-memory-limit of `train` and
# `generate`. On a machine without a usable GPU (CI, this project's CPU
# machines): `auto` runs on the CPU with exactly one warning line, `cuda` fails
# with one clear error and leaves no output, `cpu` is silent. With a GPU
# (scripts/gpu_check.sh runs this too): `cuda` trains and generates, and the
# summary shows the per-worker GPU memory.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

SMALL=(--tokenizer char --epochs 1 --embedding-dim 16 --rnn-units 32 --batch-size 8 --seq-length 32 --seed 3)
head -n 201 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
"$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" --device cpu "${SMALL[@]}" \
  2>"$TMP/train.log" || { echo "FAIL: training the test model: $(cat "$TMP/train.log")"; exit 1; }
grep -q "no usable GPU" "$TMP/train.log" && fail "train --device cpu printed a GPU warning" \
  || pass "train --device cpu: no GPU warning"

GEN=(generate --model-dir "$TMP/m" --num-lines 20 --parallelism 2 --seed 5 --max-invalid 100000)

# Is there a usable GPU? `auto` says so by its warning.
"$DS" "${GEN[@]}" --device auto --output "$TMP/auto.csv" 2>"$TMP/auto.log"
rc=$?
[ $rc -eq 0 ] && pass "generate --device auto runs" || fail "generate --device auto: exit $rc: $(cat "$TMP/auto.log")"
if grep -q "no usable GPU" "$TMP/auto.log"; then
  GPU=0
  [ "$(grep -c "no usable GPU" "$TMP/auto.log")" -eq 1 ] && pass "auto without a GPU: one warning line" \
    || fail "auto: warning count: $(cat "$TMP/auto.log")"
else
  GPU=1
  grep -q "GPU memory per worker (2 workers)" "$TMP/auto.log" && pass "auto on a GPU: per-worker memory shown" \
    || fail "auto on a GPU: no per-worker memory line: $(cat "$TMP/auto.log")"
fi
[ "$(($(wc -l <"$TMP/auto.csv") - 1))" -eq 20 ] && pass "auto: 20 records" || fail "auto: record count"

"$DS" "${GEN[@]}" --device cpu --output "$TMP/cpu.csv" 2>"$TMP/cpu.log" || fail "generate --device cpu failed"
grep -q "GPU" "$TMP/cpu.log" && fail "--device cpu mentions the GPU: $(cat "$TMP/cpu.log")" \
  || pass "--device cpu: silent about GPUs"
if [ $GPU -eq 0 ]; then
  cmp -s "$TMP/auto.csv" "$TMP/cpu.csv" && pass "auto fell back to the CPU: same records" \
    || fail "auto (CPU fallback) and cpu differ"
fi

if [ $GPU -eq 0 ]; then
  out=$("$DS" "${GEN[@]}" --device cuda --output "$TMP/cuda.csv" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && grep -q "error: --device cuda: no usable GPU" <<<"$out" && [ ! -e "$TMP/cuda.csv" ] \
      && [ "$(grep -c . <<<"$out")" -eq 1 ]; then
    pass "generate --device cuda without a GPU: one clear error, no output ($out)"
  else
    fail "generate --device cuda without a GPU: rc $rc, '$out'"
  fi
  out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mc" --device cuda "${SMALL[@]}" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && grep -q "no usable GPU" <<<"$out" && [ ! -e "$TMP/mc/model_params.json" ]; then
    pass "train --device cuda without a GPU: clear error, no model"
  else
    fail "train --device cuda without a GPU: rc $rc, '$out'"
  fi
else
  "$DS" "${GEN[@]}" --device cuda --gpu-memory-limit 256MiB --output "$TMP/cuda.csv" 2>"$TMP/cuda.log" \
    && pass "generate --device cuda runs" || fail "generate --device cuda: $(cat "$TMP/cuda.log")"
  grep -q "limit 256.00 MiB" "$TMP/cuda.log" && pass "--gpu-memory-limit is each worker's limit" \
    || fail "limit not shown: $(cat "$TMP/cuda.log")"
  "$DS" "${GEN[@]}" --device cuda --gpu-memory preallocate --gpu-memory-limit 64MiB --output "$TMP/pre.csv" \
    2>"$TMP/pre.log" && grep -q "peak reserved 64.00 MiB" "$TMP/pre.log" \
    && pass "preallocate reserves the limit" || fail "preallocate: $(cat "$TMP/pre.log")"
  "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mc" --device cuda "${SMALL[@]}" \
    2>"$TMP/tc.log" && grep -q "GPU memory: peak in use" "$TMP/tc.log" \
    && pass "train --device cuda: GPU memory in the summary" || fail "train cuda: $(cat "$TMP/tc.log")"
fi

out=$("$DS" "${GEN[@]}" --device tpu --output "$TMP/x.csv" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && grep -q "unknown device 'tpu'" <<<"$out" && [ ! -e "$TMP/x.csv" ] \
  && pass "unknown device: clear error" || fail "unknown device: rc $rc '$out'"
out=$("$DS" "${GEN[@]}" --device cpu --gpu-memory lots --output "$TMP/x.csv" 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] && grep -q "expected grow or preallocate" <<<"$out" \
  && pass "bad --gpu-memory: clear error" || fail "bad --gpu-memory: rc $rc '$out'"

finish
