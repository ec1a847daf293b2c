#!/usr/bin/env bash
# Sanitizer job of CI (.ci/run runs it after scripts/test.sh). Three steps, clang 14,
# no CUDA, no benchmarks, -O1:
#   1. ASan + UBSan: the unit tests (every gtest executable) and the bad-input matrix
#      (tests/bad_input_test.sh, the CLI's error paths), built in build-fuzz, the
#      build scripts/fuzz.sh uses (the library also carries the fuzzer's coverage
#      instrumentation: one library build serves both steps 1 and 3).
#   2. TSan: the parallel parts in build-tsan: the CPU backend's multi-threaded
#      training/inference (lstm_grad_test), the worker processes and the scheduler
#      (workers_test, generate_test, generate_e2e_test). OpenMP is clang's libomp with
#      its TSan tool (libarcher, OMP_TOOL_LIBRARIES) so OpenMP's own barriers and
#      tasks are understood; oneDNN uses libgomp, which TSan cannot see into, so the
#      tests that reach oneDNN GEMMs run with its threads off (see tsan.supp and
#      docs/reliability.md).
#   3. A short fuzz run: scripts/fuzz.sh $FUZZ_SECONDS (default 10) per target.
# Exit status: non-zero when any step fails. SANITIZE_STEPS="asan tsan fuzz" selects.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STEPS=${SANITIZE_STEPS:-asan tsan fuzz}
JOBS=$(nproc)
T0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
failed=()
build() {  # build DIR TARGETS...: a build failure ends the job
  local dir=$1
  shift
  if ! cmake --build "$dir" -j"$JOBS" --target "$@" > "$dir/build.log" 2>&1; then
    grep -E "error|FAILED" "$dir/build.log" | head -30
    echo "sanitize: build in $dir FAILED (log $dir/build.log)"
    exit 1
  fi
}

# Test executables (the gtest files): every one (GPU cases skip; the PyTorch
# cross-check compares with its committed golden files) except memory_estimate_test:
# memory_estimate_test measures the backends' real heap use and probes ulimit -v in a
# child: ASan's allocator (redzones, quarantine) and its shadow mappings change both,
# so it runs in the normal build only.
UNIT_TESTS=$(cd tests && ls *_test.cc | sed 's/\.cc$//' |
  grep -v -E '^(memory_estimate_test)$')
TSAN_TESTS="lstm_grad_test workers_test generate_test generate_e2e_test"

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$ROOT/scripts/tsan.supp"

if [[ " $STEPS " == *" asan "* ]]; then
  stamp "ASan+UBSan: configure + build (build-fuzz)"
  ./scripts/fuzz.sh --configure-only  # the same configuration as the fuzz step
  # shellcheck disable=SC2086
  build build-fuzz datasynth $UNIT_TESTS $(cd fuzz && ls *_fuzz.cc | sed 's/\.cc$//')
  stamp "ASan+UBSan: unit tests"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
  fails=0
  for t in $UNIT_TESTS; do
    s=$(date +%s)
    if ./build-fuzz/"$t" --gtest_brief=1 > "build-fuzz/$t.log" 2>&1; then
      echo "   $t: ok ($(( $(date +%s) - s ))s)"
    else
      echo "   $t: FAILED ($(( $(date +%s) - s ))s), build-fuzz/$t.log:"
      grep -E "ERROR: |runtime error|SUMMARY|FAILED|Failure" "build-fuzz/$t.log" | head -15 | sed 's/^/     /'
      fails=1
    fi
  done
  stamp "ASan+UBSan: bad-input matrix through the CLI"
  # Leak checking off for the CLI only: each command allocates its option structs
  # once per process and never frees them (tools/cmd_*.cc, by design).
  if ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} DS_TEST_SANITIZER=address \
     bash tests/bad_input_test.sh "$ROOT/build-fuzz/datasynth" "$ROOT" > build-fuzz/bad_input_test.log 2>&1; then
    echo "   bad_input_test: $(tail -1 build-fuzz/bad_input_test.log)"
  else
    echo "   bad_input_test: FAILED, build-fuzz/bad_input_test.log:"
    grep -E "FAIL|ERROR: |runtime error" build-fuzz/bad_input_test.log | head -15 | sed 's/^/     /'
    fails=1
  fi
  [ $fails -eq 0 ] || failed+=(asan)
  unset ASAN_OPTIONS
fi

if [[ " $STEPS " == *" tsan "* ]]; then
  stamp "TSan: configure + build (build-tsan)"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS="-Wno-pass-failed -Wno-unknown-warning-option" \
    -DDATASYNTH_SANITIZE=thread -DDATASYNTH_CUDA=OFF -DDATASYNTH_BENCH=OFF \
    -DDATASYNTH_WERROR=OFF >/dev/null
  # shellcheck disable=SC2086
  build build-tsan $TSAN_TESTS
  stamp "TSan: parallel tests"
  ARCHER=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | head -1 || true)
  fails=0
  for t in $TSAN_TESTS; do
    s=$(date +%s)
    if OMP_TOOL_LIBRARIES=$ARCHER ./build-tsan/"$t" --gtest_brief=1 > "build-tsan/$t.log" 2>&1; then
      echo "   $t: ok ($(( $(date +%s) - s ))s)"
    else
      echo "   $t: FAILED ($(( $(date +%s) - s ))s), build-tsan/$t.log:"
      grep -E "WARNING: ThreadSanitizer|SUMMARY|FAILED|Failure" "build-tsan/$t.log" | head -15 | sed 's/^/     /'
      fails=1
    fi
  done
  [ $fails -eq 0 ] || failed+=(tsan)
fi

if [[ " $STEPS " == *" fuzz "* ]]; then
  stamp "fuzz: ${FUZZ_SECONDS:-10}s per target"
  if [[ " $STEPS " == *" asan "* ]]; then export FUZZ_NO_BUILD=1; fi
  ./scripts/fuzz.sh "${FUZZ_SECONDS:-10}" || failed+=(fuzz)
fi

stamp "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanitize: FAILED: ${failed[*]}"
  exit 1
fi
echo "sanitize: all steps passed"
