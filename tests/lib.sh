# Helpers shared by the shell tests (tests/*_test.sh). Source it first:
#   source "$(dirname "$0")/lib.sh"
# Each case reports one line ("ok: NAME", "FAIL: NAME", "skip: NAME"); `finish`
# prints the closing "N passed, N failed[, N skipped]" line and exits non-zero
# when a case failed or when no case ran at all.
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

# finish: the closing line and the exit status of the whole file.
finish() {
  local line="$passes passed, $fails failed"
  [ "$skips" -gt 0 ] && line+=", $skips skipped"
  echo "$line"
  [ "$fails" -eq 0 ] && [ $((passes + skips)) -gt 0 ]
  exit
}
