#!/usr/bin/env bash
# The CUDA backend is a module (src/backend/module.h) that a CPU run never
# loads: the binary links no CUDA library, `--version` and a CPU train and
# generate load none (the dynamic loader's own log, LD_DEBUG=files, lists
# every library a process opens, dlopen'ed ones included), and `--device
# cuda` without a GPU fails with one line naming why (no module in this
# build, no CUDA driver, no GPU, a bad DATASYNTH_CUDA_MODULE). With a GPU
# (scripts/gpu_check.sh runs this too) `--device cuda` loads the module that
# sits next to the binary.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

CUDA_LIBS='libcublas|libcublasLt|libcudart|libnccl|libdatasynth_cuda'
MODULE=$(dirname "$DS")/libdatasynth_cuda.so

needed=$(readelf -d "$DS" | grep NEEDED)
grep -Eq "$CUDA_LIBS" <<<"$needed" && fail "the binary links CUDA: $(grep -E "$CUDA_LIBS" <<<"$needed")" \
  || pass "the binary's NEEDED entries name no CUDA library"

# The module exports one symbol, the versioned entry point (backend/module.h).
if [ -e "$MODULE" ]; then
  syms=$(nm -D --defined-only "$MODULE" | awk '{print $3}' | grep -v '^$')
  [ "$syms" = "datasynth_backend_module_v1" ] && pass "the module exports only datasynth_backend_module_v1" \
    || fail "the module exports: $(tr '\n' ' ' <<<"$syms")"
fi

# loaded LOG: the libraries a process opened, from its LD_DEBUG=files log.
loaded() { grep -oE "file=[^ ]+" "$1" | sed 's/^file=//' | sort -u; }

LD_DEBUG=files "$DS" --version >"$TMP/v.out" 2>"$TMP/v.log"
grep -q . "$TMP/v.out" || fail "--version printed nothing"
if loaded "$TMP/v.log" | grep -Eq "$CUDA_LIBS"; then
  fail "--version loaded $(loaded "$TMP/v.log" | grep -E "$CUDA_LIBS" | tr '\n' ' ')"
else
  pass "--version loads no CUDA library ($(loaded "$TMP/v.log" | wc -l) libraries)"
fi

head -n 101 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
SMALL=(--tokenizer char --epochs 1 --embedding-dim 8 --rnn-units 16 --batch-size 8 --seq-length 32 --seed 3)
LD_DEBUG=files "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/m" --device auto \
  "${SMALL[@]}" >/dev/null 2>"$TMP/train.log" || { fail "train --device auto failed"; finish; }
GPU=1
grep -q "no usable GPU" "$TMP/train.log" && GPU=0
if [ $GPU -eq 0 ]; then
  loaded "$TMP/train.log" | grep -Eq "$CUDA_LIBS" \
    && fail "a CPU train (auto, no GPU) loaded $(loaded "$TMP/train.log" | grep -E "$CUDA_LIBS" | tr '\n' ' ')" \
    || pass "a CPU train (auto, no GPU) loads no CUDA library"
  LD_DEBUG=files "$DS" generate --model-dir "$TMP/m" --num-lines 5 --parallelism 2 --max-invalid 100000 \
    --device auto --output "$TMP/g.csv" 2>"$TMP/gen.log" || fail "generate --device auto failed"
  loaded "$TMP/gen.log" | grep -Eq "$CUDA_LIBS" \
    && fail "a CPU generate loaded $(loaded "$TMP/gen.log" | grep -E "$CUDA_LIBS" | tr '\n' ' ')" \
    || pass "a CPU generate (auto, two workers) loads no CUDA library"

  out=$("$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mc" --device cuda \
        "${SMALL[@]}" 2>&1 >/dev/null); rc=$?
  err=$(grep "error:" <<<"$out")
  if [ -e "$MODULE" ]; then want="no CUDA driver|the CUDA driver"; else want="this datasynth was built without CUDA"; fi
  if [ $rc -ne 0 ] && [ "$(grep -c . <<<"$err")" -eq 1 ] \
      && grep -Eq "datasynth: error: --device cuda: no usable GPU: ($want)" <<<"$err"; then
    pass "--device cuda without a GPU: one error naming why ($err)"
  else
    fail "--device cuda without a GPU: rc $rc, '$out' (wanted: $want)"
  fi
  out=$(DATASYNTH_CUDA_MODULE=$TMP/none.so "$DS" generate --model-dir "$TMP/m" --num-lines 5 \
        --device cuda --output "$TMP/x.csv" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] && grep -q "error: --device cuda: no usable GPU: DATASYNTH_CUDA_MODULE=$TMP/none.so: no such file" <<<"$out" \
    && pass "a missing DATASYNTH_CUDA_MODULE is named" || fail "DATASYNTH_CUDA_MODULE missing: rc $rc '$out'"
else
  LD_DEBUG=files "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mc" --device cuda \
    "${SMALL[@]}" >/dev/null 2>"$TMP/cuda.log" && pass "train --device cuda runs" \
    || fail "train --device cuda: $(grep -v "^ *[0-9]*:" "$TMP/cuda.log" | tail -3)"
  loaded "$TMP/cuda.log" | grep -q "$(basename "$MODULE")" && pass "--device cuda loads the module" \
    || fail "--device cuda did not load $MODULE: $(loaded "$TMP/cuda.log" | grep -i cuda | tr '\n' ' ')"
  "$DS" train --input "$TMP/t.csv" --field-delimiter , --model-dir "$TMP/mp" --device cpu "${SMALL[@]}" \
    >/dev/null 2>&1 || fail "train --device cpu on a GPU machine"
  LD_DEBUG=files "$DS" generate --model-dir "$TMP/mp" --num-lines 5 --device cpu --output "$TMP/c.csv" \
    2>"$TMP/cpu.log" || fail "generate --device cpu on a GPU machine"
  loaded "$TMP/cpu.log" | grep -Eq "$CUDA_LIBS" && fail "--device cpu loaded a CUDA library" \
    || pass "--device cpu on a GPU machine loads no CUDA library"
fi
finish
