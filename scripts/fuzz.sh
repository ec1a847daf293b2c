#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cc) with clang in build-fuzz/ and runs each
# for SECONDS_PER_TARGET seconds (default 60). The whole library is compiled with
# -fsanitize=fuzzer-no-link,address,undefined (coverage + ASan + UBSan), the targets
# with -fsanitize=fuzzer. Exit status 1 when a target crashes, leaks, times out or
# violates an invariant; the input is saved in build-fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#   FUZZ_TARGETS="csv_fuzz config_fuzz" scripts/fuzz.sh 600   only some targets
#   FUZZ_NO_BUILD=1 scripts/fuzz.sh 10                         reuse build-fuzz as is
#   scripts/fuzz.sh --configure-only                            configure build-fuzz, no run
#
# Corpora: the seeds in fuzz/corpus/<target>/ and fuzz/regressions/<target>/ are read,
# never written; inputs the fuzzer finds go to build-fuzz/corpus/<target>/ (kept between
# runs, git-ignored). A fixed crash's input belongs in fuzz/regressions/<target>/, where
# tests/fuzz_regressions_test.cc replays it in the normal build.
# The clang build in build-fuzz is the same one scripts/sanitize.sh uses for the
# ASan/UBSan unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIGURE_ONLY=""
if [ "${1:-}" = "--configure-only" ]; then CONFIGURE_ONLY=1; shift; fi
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
ALL_TARGETS=$(cd fuzz && ls *_fuzz.cc | sed 's/\.cc$//')
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

configure_fuzz_build() {
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link -Wno-pass-failed -Wno-unknown-warning-option" \
    -DDATASYNTH_SANITIZE="address;undefined" -DDATASYNTH_FUZZ=ON -DDATASYNTH_CUDA=OFF \
    -DDATASYNTH_BENCH=OFF -DDATASYNTH_WERROR=OFF >/dev/null
}

if [ -n "$CONFIGURE_ONLY" ]; then
  configure_fuzz_build
  exit 0
fi
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  configure_fuzz_build
  # shellcheck disable=SC2086
  if ! cmake --build "$BUILD_DIR" -j"$(nproc)" --target $TARGETS > "$BUILD_DIR/fuzz-build.log" 2>&1; then
    grep -E "error|FAILED" "$BUILD_DIR/fuzz-build.log" | head -30
    echo "fuzz: build FAILED (log $BUILD_DIR/fuzz-build.log)"
    exit 1
  fi
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
max_len() {
  case $1 in
    tensor_file_fuzz) echo 20000 ;;
    tokenizer_fuzz|model_dir_fuzz) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

failed=()
for t in $TARGETS; do
  corpus=$BUILD_DIR/corpus/$t
  artifacts=$BUILD_DIR/artifacts/$t
  mkdir -p "$corpus" "$artifacts" "fuzz/regressions/$t"
  log=$BUILD_DIR/fuzz-$t.log
  echo "== $t: ${SECONDS_PER_TARGET}s"
  start=$(date +%s)
  if /usr/bin/time -f "%U %S" -o "$BUILD_DIR/fuzz-$t.cpu" "$BUILD_DIR/$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=3072 \
       -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$artifacts/" \
       "$corpus" "fuzz/corpus/$t" "fuzz/regressions/$t" > "$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    cpu=$(awk '{printf "%.0f", $1 + $2}' "$BUILD_DIR/fuzz-$t.cpu")
    echo "   ok: $execs executions in $(( $(date +%s) - start ))s (${cpu}s CPU), $cov, corpus $(ls "$corpus" | wc -l) files"
  else
    echo "   FAILED (log $log):"
    grep -E "ERROR|==[0-9]+==|SUMMARY|invariant|Test unit written|runtime error" "$log" | head -20 | sed 's/^/   /'
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: all targets ran ${SECONDS_PER_TARGET}s without a finding"
