# Helpers shared by the shell tests (tests/*_test.sh). Source it first:
#   source "$(dirname "$0")/lib.sh"
# Each case reports one line ("ok: NAME", "FAIL: NAME", "skip: NAME"); `finish`
# prints the closing "N passed, N failed[, N skipped]" line and exits non-zero
# when a case failed or when no case ran at all (77, which ctest counts as
# skipped, when every case skipped).
# A test is called as `bash tests/x_test.sh DATASYNTH_BINARY SOURCE_ROOT` (ctest does):
# sourcing this sets DS and ROOT from those and a scratch TMP removed on exit.
DS=$1
ROOT=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0; passes=0; skips=0
pass() { echo "ok: $1"; passes=$((passes + 1)); }
fail() { echo "FAIL: $1"; fails=$((fails + 1)); }
skip() { echo "skip: $1"; skips=$((skips + 1)); }

# check NAME COMMAND...: passes when COMMAND exits 0; on failure names the
# command and its exit status.
check() {
  local name=$1 rc=0
  shift
  "$@" || rc=$?
  if [ $rc -eq 0 ]; then pass "$name"; else fail "$name: exit $rc from $*"; fi
}

# finish: the closing line and the exit status of the whole file: 0 when
# nothing failed and something passed, 77 (ctest's SKIP_RETURN_CODE: "Skipped"
# in its summary, not "Passed") when nothing failed and every check skipped,
# 1 otherwise.
finish() {
  local line="$passes passed, $fails failed"
  [ "$skips" -gt 0 ] && line+=", $skips skipped"
  echo "$line"
  [ "$fails" -eq 0 ] || exit 1
  [ "$passes" -gt 0 ] && exit 0
  [ "$skips" -gt 0 ] && exit 77
  exit 1
}
