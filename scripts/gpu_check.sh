#!/usr/bin/env bash
# GPU check: ONE script to run on a machine with an NVIDIA GPU (CUDA 13,
# CMake, ninja, a C++ compiler, optionally PyTorch with CUDA). It configures a
# CUDA build (the binary and the CUDA module libdatasynth_cuda.so, in
# $BUILD_DIR), runs the GPU tests (allocator_test, backend_test,
# backend_module_test, cli_device_test, cli_cuda_module_test) and the
# GPU benchmark (bench/gpu_bench.cc, plus PyTorch's cuDNN LSTM measured in the
# same run), and writes everything to $OUT (default out/gpu_check). It never
# installs anything and needs no network. Budget: under 8 minutes.
#
#   scripts/gpu_check.sh                 run the check
#   scripts/gpu_check.sh --pack-deps     (on a Debian machine that builds the
#       project) bundle the headers, libraries and CMake/pkg-config files of
#       the build dependencies into build-deps/gpu-deps.tar.xz (about 10 MB),
#       for a GPU machine that lacks the Debian -dev packages: carry that file
#       (it is git-ignored) and the check unpacks and uses it when a
#       dependency is missing.
#
# Results: $OUT/summary.txt (human), $OUT/results.jsonl (one JSON object per
# measurement), $OUT/*.xml (gtest), $OUT/build.log, $OUT/gpu_check.log.
# Exit status: 0 all passed; 1 a test or benchmark failed; 3 cannot build here
# (the summary says what is missing).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DEPS_TAR=build-deps/gpu-deps.tar.xz
DEPS_PREFIX=$ROOT/build-deps/prefix
MULTIARCH=x86_64-linux-gnu

# ---------------------------------------------------------------------------
if [ "${1:-}" = "--pack-deps" ]; then
  stage=$(mktemp -d)
  inc=(fmt nlohmann CLI dnnl.h dnnl.hpp dnnl_config.h dnnl_debug.h dnnl_types.h dnnl_version.h
       dnnl_threadpool.h dnnl_threadpool.hpp dnnl_threadpool_iface.hpp oneapi
       sentencepiece_processor.h sentencepiece_trainer.h gtest gmock zlib.h zconf.h)
  mkdir -p "$stage/include" "$stage/lib/$MULTIARCH/pkgconfig" "$stage/lib/$MULTIARCH/cmake" \
           "$stage/share/cmake"
  for i in "${inc[@]}"; do
    [ -e "/usr/include/$i" ] || { echo "pack-deps: /usr/include/$i missing" >&2; exit 3; }
    cp -a "/usr/include/$i" "$stage/include/"
  done
  L=/usr/lib/$MULTIARCH
  for pat in 'libfmt.so*' 'libdnnl.so*' 'libsentencepiece.so*' 'libsentencepiece_train.so*' \
             'libgtest*.a' 'libgmock*.a' 'libz.so*' 'libOpenCL.so*'; do
    for f in $L/$pat /lib/$MULTIARCH/$pat; do [ -e "$f" ] && cp -a "$f" "$stage/lib/$MULTIARCH/"; done
  done
  # libz.so may be an absolute symlink into /lib: make it relative.
  for f in "$stage/lib/$MULTIARCH"/*.so; do
    t=$(readlink "$f") || continue
    case "$t" in /*) ln -sf "$(basename "$t")" "$f"; [ -e "$stage/lib/$MULTIARCH/$(basename "$t")" ] ||
                     cp "$t" "$stage/lib/$MULTIARCH/" ;; esac
  done
  cp -a $L/cmake/fmt $L/cmake/dnnl $L/cmake/GTest "$stage/lib/$MULTIARCH/cmake/"
  cp -a /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$stage/share/cmake/"
  sed 's|^prefix=.*|prefix=${pcfiledir}/../../..|' $L/pkgconfig/sentencepiece.pc \
    > "$stage/lib/$MULTIARCH/pkgconfig/sentencepiece.pc"
  mkdir -p build-deps
  XZ_OPT=${XZ_OPT:--T0} tar -C "$stage" -cJf "$DEPS_TAR" .
  rm -rf "$stage"
  echo "pack-deps: wrote $DEPS_TAR ($(du -h "$DEPS_TAR" | cut -f1)); carry it to the GPU machine"
  exit 0
fi

# ---------------------------------------------------------------------------
OUT=${OUT:-$ROOT/out/gpu_check}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
LOG=$OUT/gpu_check.log
RESULTS=$OUT/results.jsonl
SUMMARY=$OUT/summary.txt
: > "$RESULTS"
: > "$SUMMARY"
exec > >(tee -a "$LOG") 2>&1
T0=$(date +%s)
BUDGET=${BUDGET:-450}  # seconds; later steps are skipped past it
failures=()
note() { echo "$*" | tee -a "$SUMMARY"; }
step() { echo; echo "== [$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
finish() {
  note ""
  note "elapsed: $(( $(date +%s) - T0 ))s"
  if [ "$1" = 3 ]; then note "RESULT: cannot build here (see above)";
  elif [ ${#failures[@]} -eq 0 ]; then note "RESULT: all GPU checks passed";
  else note "RESULT: FAILED: ${failures[*]}"; fi
  exit "$1"
}

note "datasynth GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---- 1. the machine --------------------------------------------------------
step "machine"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
  note "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 | head -1)"
else
  note "gpu: nvidia-smi not found"
fi
NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
note "nvcc: ${NVCC:-MISSING} $( [ -n "$NVCC" ] && "$NVCC" --version | grep -o 'release [0-9.]*')"
note "cmake: $(cmake --version 2>/dev/null | head -1 || echo MISSING)"
note "ninja: $(ninja --version 2>/dev/null || echo MISSING)"
CXX=${CXX:-$(command -v c++ || command -v g++ || true)}
note "c++: ${CXX:-MISSING} $($CXX --version 2>/dev/null | head -1)"
PY=""
TORCH="not importable"
for cand in ${PYTHON:-} python3 /usr/bin/python3 python; do  # the first python that has torch
  command -v "$cand" >/dev/null || continue
  v=$("$cand" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>/dev/null) || continue
  PY=$(command -v "$cand"); TORCH="$v ($PY)"; break
done
[ -z "$PY" ] && PY=$(command -v python3 || true)
note "torch: $TORCH"
note "cpus: $(nproc)"
if [ -z "$NVCC" ] || ! command -v cmake >/dev/null || [ -z "$CXX" ]; then
  note "missing: nvcc, cmake or a C++ compiler"
  finish 3
fi
GEN=-GNinja
command -v ninja >/dev/null || GEN="-GUnix Makefiles"

# ---- 2. build dependencies ---------------------------------------------------
# The project needs these headers (Debian package in brackets); the check
# compiles one include of each.
step "dependencies"
declare -A DEPS=(
  [fmt/core.h]=libfmt-dev [nlohmann/json.hpp]=nlohmann-json3-dev [CLI/CLI.hpp]=libcli11-dev
  [dnnl.h]=libdnnl-dev [sentencepiece_processor.h]=libsentencepiece-dev
  [gtest/gtest.h]=libgtest-dev [zlib.h]=zlib1g-dev [omp.h]="the compiler's OpenMP (libgomp)"
)
missing_deps() {
  local extra=("$@") m=()
  for h in "${!DEPS[@]}"; do
    echo "#include <$h>" | "$CXX" -std=c++20 -fopenmp "${extra[@]}" -E -x c++ - >/dev/null 2>&1 ||
      m+=("$h (${DEPS[$h]})")
  done
  command -v pkg-config >/dev/null || m+=("pkg-config (the tool; not in the bundle)")
  pkg-config --exists sentencepiece 2>/dev/null || [ ${#extra[@]} -gt 0 ] || m+=("sentencepiece.pc (libsentencepiece-dev)")
  [ ${#m[@]} -eq 0 ] || printf '%s\n' "${m[@]}"
}
mapfile -t MISSING < <(missing_deps)
CMAKE_EXTRA=()
if [ ${#MISSING[@]} -gt 0 ]; then
  note "missing build dependencies: ${MISSING[*]}"
  if [ -f "$DEPS_TAR" ]; then
    note "using the carried bundle $DEPS_TAR"
    rm -rf "$DEPS_PREFIX" && mkdir -p "$DEPS_PREFIX" && tar -C "$DEPS_PREFIX" -xJf "$DEPS_TAR"
    mapfile -t MISSING < <(missing_deps -I"$DEPS_PREFIX/include")
    if [ ${#MISSING[@]} -gt 0 ]; then
      note "still missing with the bundle: ${MISSING[*]}"
      finish 3
    fi
    export PKG_CONFIG_PATH=$DEPS_PREFIX/lib/$MULTIARCH/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$DEPS_PREFIX/lib/$MULTIARCH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    CMAKE_EXTRA+=("-DCMAKE_PREFIX_PATH=$DEPS_PREFIX" "-DZLIB_ROOT=$DEPS_PREFIX")
  else
    note "no dependency bundle ($DEPS_TAR): on a Debian machine that builds datasynth, run"
    note "  scripts/gpu_check.sh --pack-deps   and carry $DEPS_TAR here"
    finish 3
  fi
else
  note "build dependencies: all present"
fi

# ---- 3. configure and build ---------------------------------------------------
step "configure + build ($BUILD_DIR, $JOBS jobs)"
ARCH=${CUDA_ARCH:-}
if [ -z "$ARCH" ] && command -v nvidia-smi >/dev/null; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  [ -n "$cc" ] && ARCH="${cc}-real;90-virtual"
fi
[ -n "$ARCH" ] && CMAKE_EXTRA+=("-DCMAKE_CUDA_ARCHITECTURES=$ARCH")
if ! timeout 120 cmake -S . -B "$BUILD_DIR" "$GEN" -DCMAKE_BUILD_TYPE=Release -DDATASYNTH_CUDA=ON \
     -DCMAKE_CUDA_COMPILER="$NVCC" -DDATASYNTH_BENCH=ON -DDATASYNTH_TESTS=ON \
     "${CMAKE_EXTRA[@]}" > "$OUT/build.log" 2>&1; then
  note "configure FAILED (tail of $OUT/build.log):"
  tail -25 "$OUT/build.log" | tee -a "$SUMMARY"
  finish 3
fi
# datasynth_cuda: the CUDA backend module (src/backend/module.h), which the
# binary, the tests and gpu_bench load from $BUILD_DIR (next to them).
TARGETS=(allocator_test backend_test backend_module_test gpu_bench datasynth datasynth_cuda)
if ! timeout 300 cmake --build "$BUILD_DIR" -j"$JOBS" --target "${TARGETS[@]}" >> "$OUT/build.log" 2>&1; then
  note "build FAILED (errors from $OUT/build.log):"
  grep -E "error|undefined reference" "$OUT/build.log" | head -25 | tee -a "$SUMMARY"
  finish 3
fi
note "build: ok ($(( $(date +%s) - T0 ))s elapsed)"
if [ -f "$BUILD_DIR/libdatasynth_cuda.so" ]; then
  note "cuda module: $BUILD_DIR/libdatasynth_cuda.so ($(du -h "$BUILD_DIR/libdatasynth_cuda.so" | cut -f1))"
else
  note "cuda module: $BUILD_DIR/libdatasynth_cuda.so MISSING"
  failures+=("cuda module")
fi

# ---- 4. tests ------------------------------------------------------------------
for t in allocator_test backend_test backend_module_test; do
  step "test $t"
  timeout 180 "$BUILD_DIR/$t" --gtest_output="xml:$OUT/$t.xml" > "$OUT/$t.txt" 2>&1
  rc=$?
  tail -3 "$OUT/$t.txt"
  skipped=$(grep -c '^\[  SKIPPED \]' "$OUT/$t.txt" || true)
  if [ $rc -eq 0 ]; then
    note "$t: passed ($(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$OUT/$t.txt" | head -1); skipped lines: $skipped)"
    grep -m3 "no GPU:" "$OUT/$t.txt" | sed 's/^/  /' | tee -a "$SUMMARY"
  else
    note "$t: FAILED (rc $rc)"
    grep -E '^\[  FAILED  \]|Failure|error' "$OUT/$t.txt" | head -20 | sed 's/^/  /' | tee -a "$SUMMARY"
    failures+=("$t")
  fi
done
# cli_device_test: train/generate --device cuda through the CLI;
# cli_cuda_module_test: --device cuda loads the module, --device cpu loads no CUDA library.
for t in cli_device_test cli_cuda_module_test; do
  step "test $t"
  if timeout 120 bash "tests/$t.sh" "$BUILD_DIR/datasynth" "$PWD" > "$OUT/$t.txt" 2>&1; then
    note "$t: $(tail -1 "$OUT/$t.txt")"
  else
    note "$t: FAILED"
    grep FAIL "$OUT/$t.txt" | head -10 | sed 's/^/  /' | tee -a "$SUMMARY"
    failures+=("$t")
  fi
done

# ---- 5. benchmarks -----------------------------------------------------------------
bench() {  # name timeout args...
  local name=$1 to=$2; shift 2
  if [ "$(left)" -lt 20 ]; then note "bench $name: skipped (time budget)"; return; fi
  step "bench $name"
  local out
  out=$(timeout "$to" "$@" 2> "$OUT/bench_$name.err")
  local rc=$?
  echo "$out" | grep '^{' | tee -a "$RESULTS"
  if [ $rc -ne 0 ]; then
    note "bench $name: FAILED (rc $rc): $(tail -3 "$OUT/bench_$name.err" | tr '\n' ' ')"
    failures+=("bench_$name")
  fi
}
B=$BUILD_DIR/gpu_bench
bench train_v100_fp32 60 "$B" train --vocab 100 --iters 20
bench train_v100_tf32 60 "$B" train --vocab 100 --iters 20 --tf32
bench train_v20000_fp32 90 "$B" train --vocab 20000 --iters 10
bench gen_1proc_grow 60 "$B" generate --procs 1 --tokens 300
bench gen_8proc_grow 90 "$B" generate --procs 8 --tokens 300
bench gen_32proc_grow 120 "$B" generate --procs 32 --tokens 200
bench gen_8proc_preallocate 90 "$B" generate --procs 8 --tokens 300 --preallocate
bench gen_1proc_grow_v20000 60 "$B" generate --procs 1 --tokens 200 --vocab 20000

# PyTorch peer (cuDNN LSTM), same network and batch, in the same run.
if [[ "$TORCH" == *"available True"* ]] && [ "$(left)" -gt 30 ]; then
  step "bench pytorch cuDNN"
  timeout 150 "$PY" - >> "$RESULTS" 2> "$OUT/bench_torch.err" <<'PYEOF'
import json, time, torch, torch.nn as nn
dev = torch.device("cuda")
class Net(nn.Module):
    def __init__(s, V, E=256, H=256, p=0.2):
        super().__init__()
        s.emb, s.drop = nn.Embedding(V, E), nn.Dropout(p)
        s.lstm = nn.LSTM(E, H, num_layers=2, dropout=p, batch_first=True)
        s.out = nn.Linear(H, V)
    def forward(s, x, st=None):
        y, st = s.lstm(s.drop(s.emb(x)), st)
        return s.out(s.drop(y)), st
def run(V, tf32, iters):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(0)
    B, T = 64, 100
    net = Net(V).to(dev)
    opt = torch.optim.RMSprop(net.parameters(), lr=0.01, alpha=0.9, eps=1e-7)
    lossf = nn.CrossEntropyLoss()
    x = torch.randint(0, V, (B, T), device=dev); y = torch.randint(0, V, (B, T), device=dev)
    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x)[0].reshape(-1, V), y.reshape(-1)); loss.backward(); opt.step()
    for _ in range(3): step()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(iters): step()
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    res = {"bench": "train", "backend": "pytorch-cudnn-" + torch.__version__, "vocab": V,
           "batch": B, "steps": T, "tf32": tf32, "iters": iters,
           "tokens_per_s": round(iters * B * T / dt), "ms_per_batch": round(1e3 * dt / iters, 3)}
    if V == 100 and not tf32:
        net.eval()
        with torch.no_grad():
            tok = torch.zeros(B, 1, dtype=torch.long, device=dev); st = None
            for _ in range(10):
                lg, st = net(tok, st); tok = lg[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize(); n = 300; t = time.perf_counter()
            for _ in range(n):
                lg, st = net(tok, st); tok = lg[:, -1].argmax(-1, keepdim=True).cpu().to(dev)
            torch.cuda.synchronize()
            res["sample_tokens_per_s_1proc"] = round(n * B / (time.perf_counter() - t))
    print(json.dumps(res), flush=True)
run(100, False, 20); run(100, True, 20); run(20000, False, 10)
PYEOF
  rc=$?
  tail -4 "$RESULTS" | grep pytorch
  if [ $rc -ne 0 ]; then note "bench pytorch: FAILED (rc $rc): $(tail -3 "$OUT/bench_torch.err" | tr '\n' ' ')"; fi
else
  note "bench pytorch: skipped (torch with CUDA not importable, or time budget)"
fi

# ---- 5b. end to end: train on the GPU, generate on the CPU from the same model file ----
if [ "$(left)" -gt 60 ] && [ -x "$BUILD_DIR/datasynth" ]; then
  step "end to end: train --device cuda, generate on the CPU"
  E2E=$OUT/e2e
  mkdir -p "$E2E"
  if timeout 150 "$BUILD_DIR/datasynth" train --input examples/telco_churn_2k.csv --field-delimiter , \
       --model-dir "$E2E/model" --tokenizer char --epochs ${E2E_EPOCHS:-8} --device cuda --seed 3 \
       > "$E2E/train.log" 2>&1; then
    tr '\r' '\n' < "$E2E/train.log" | grep -E "^epoch +[0-9]|trained|network|warning" | tee -a "$SUMMARY"
    if timeout 60 "$BUILD_DIR/datasynth" generate --model-dir "$E2E/model" --num-lines 500 \
         --output "$E2E/synth.csv" --seed 7 --parallelism 4 --device cpu > "$E2E/generate.log" 2>&1; then
      tail -1 "$E2E/generate.log" | tee -a "$SUMMARY"
    else
      note "e2e generate FAILED: $(tail -2 "$E2E/generate.log" | tr '\n' ' ')"
      failures+=("e2e_generate")
    fi
    # The same model generated by GPU workers through the CLI (1, 8, 32 workers).
    for P in 1 8 32; do
      if timeout 90 "$BUILD_DIR/datasynth" generate --model-dir "$E2E/model" --num-lines 2000 \
           --output "$E2E/synth_cuda_$P.csv" --seed 7 --parallelism $P --device cuda \
           > "$E2E/generate_cuda_$P.log" 2>&1; then
        tr '\r' '\n' < "$E2E/generate_cuda_$P.log" | grep -E "^generated|GPU memory" | tee -a "$SUMMARY"
      else
        note "e2e generate --device cuda -p $P FAILED: $(tail -2 "$E2E/generate_cuda_$P.log" | tr '\n' ' ')"
        failures+=("e2e_generate_cuda_$P")
      fi
    done
  else
    note "e2e train --device cuda FAILED: $(tail -3 "$E2E/train.log" | tr '\n' ' ')"
    failures+=("e2e_train")
  fi
fi

# ---- 6. summary table ------------------------------------------------------------------
step "summary"
"${PY:-python3}" - "$RESULTS" >> "$SUMMARY" 2>/dev/null <<'PYEOF' || cat "$RESULTS" >> "$SUMMARY"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("\ntraining (default network, batch 64 x 100 steps):")
for r in rows:
    if r.get("bench") == "train" and "tokens_per_s" in r:
        print(f"  {r['backend']:<28} V={r['vocab']:<6} tf32={str(r['tf32']):<5} "
              f"{r['tokens_per_s']:>10,} tokens/s  {r['ms_per_batch']:>8} ms/batch")
print("\ngeneration (64 slots per process, greedy, default network):")
for r in rows:
    if r.get("bench") == "generate" and "tokens_per_s" in r:
        gib = 1 << 30
        print(f"  procs={r['procs']:<3} V={r['vocab']:<6} {r['mode']:<11} {r['tokens_per_s']:>10,.0f} tokens/s"
              f"  limit/proc {r['limit_per_proc']/gib:.1f} GiB  reserved sum {r['reserved_sum']/gib:.2f} GiB"
              f"  device used {r['device_used_workers_up']/gib:.1f} GiB  failed {r['failed_workers']}")
    if r.get("sample_tokens_per_s_1proc"):
        print(f"  pytorch 1 proc (V=100, 64 lines): {r['sample_tokens_per_s_1proc']:,} tokens/s")
    if "skipped" in r:
        print(f"  {r['bench']}: {r['skipped']}")
PYEOF
cat "$SUMMARY" | tail -20
finish $([ ${#failures[@]} -eq 0 ] && echo 0 || echo 1)
