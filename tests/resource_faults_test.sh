#!/usr/bin/env bash
# Resource faults (docs/reliability_faults.md, "Resource faults"): a full
# disk, a read-only model directory, shapes that cannot fit in memory. Each
# must give one clear error line, a non-zero exit, and leave nothing corrupted:
# the previous model stays loadable, a generated output keeps whole records
# and can be completed with --resume.
#
# Full disks are simulated two ways: RLIMIT_FSIZE (`ulimit -f`: write() fails
# with EFBIG; needs no privilege) and a small tmpfs (ENOSPC; needs mount,
# skipped with a message where it is not permitted), plus /dev/full.
# Read-only: a read-only bind mount (chmod does not stop root); skipped
# likewise. Memory: an absurd shape against MemAvailable, and `ulimit -v`.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
MOUNTS=()
cleanup() {  # replaces lib.sh's trap: unmount first, then remove TMP
  for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# one_error NAME SUBSTRING OUTPUT RC: non-zero exit, exactly one error line
# holding SUBSTRING.
one_error() {
  local name=$1 want=$2 out=$3 rc=$4
  if [ "$rc" -eq 0 ]; then fail "$name: exit 0"; return 1; fi
  if ! grep -qF -- "$want" <<<"$out"; then fail "$name: '$out' lacks '$want'"; return 1; fi
  if [ "$(grep -c "error:" <<<"$out")" -ne 1 ]; then fail "$name: not one error line: $out"; return 1; fi
  pass "$name ($(grep "error:" <<<"$out"))"
}
loadable() { "$DS" info --model-dir "$1" >/dev/null 2>&1 && "$DS" generate --model-dir "$1" -n 3 -p 1 >/dev/null 2>&1; }
# whole_prefix FILE FULL: FILE ends at a record boundary and is a prefix of FULL.
whole_prefix() {
  python3 - "$1" "$2" <<'EOF'
import csv, io, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
rows = list(csv.reader(io.StringIO(a.decode(), newline='')))
ok = b.startswith(a) and a.endswith(b'\n') and all(len(r) == 20 for r in rows)
print(len(rows) - 1)
sys.exit(0 if ok else 1)
EOF
}
try_mount() {  # try_mount DIR ARGS...: mounts, remembers it; false when not permitted
  local dir=$1
  shift
  mkdir -p "$dir"
  mount "$@" "$dir" 2>/dev/null || return 1
  MOUNTS=("$dir" "${MOUNTS[@]}")
}

head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
TR=(--input "$TMP/t.csv" --field-delimiter , --tokenizer char --embedding-dim 16 --rnn-units 16
    --batch-size 8 --seq-length 32 --seed 5 --early-stopping=false --threads 1)
"$DS" train "${TR[@]}" --epochs 1 --model-dir "$TMP/m" >/dev/null 2>&1 || { echo "train failed"; exit 1; }
# An interrupted run (killed after epoch 1 of 3): its checkpoint and epoch-1 model.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=1 "$DS" train "${TR[@]}" --epochs 3 --model-dir "$TMP/cut" >/dev/null 2>&1
cp -r "$TMP/cut" "$TMP/cut_copy"
GEN=(generate --model-dir "$TMP/m" --num-lines 3000 --seed 3 --parallelism 2 --checkpoint-interval 0.05)
"$DS" "${GEN[@]}" --output "$TMP/full.csv" 2>/dev/null || fail "reference generation"

# ---- training into a full disk ----
out=$( (ulimit -f 4; "$DS" train --resume --model-dir "$TMP/cut") 2>&1 >/dev/null); rc=$?
one_error "train --resume, file size limit" "$TMP/cut/weights-e0002.bin: write failed: File too large" "$out" $rc
loadable "$TMP/cut" && pass "the epoch-1 model stays loadable" || fail "model not loadable after the failed write"
ls "$TMP/cut" | grep -q "\.tmp\." && fail "temporary files left: $(ls -a "$TMP/cut")" || pass "no temporary files left"
"$DS" train --resume --model-dir "$TMP/cut" >/dev/null 2>&1 && loadable "$TMP/cut" &&
  [ "$(tail -n +2 "$TMP/cut/model_history.csv" | wc -l)" = 3 ] &&
  pass "with room again, --resume completes the 3 epochs" || fail "resume after the full disk"
out=$( (ulimit -f 4; "$DS" train "${TR[@]}" --epochs 1 --model-dir "$TMP/m2") 2>&1 >/dev/null); rc=$?
one_error "new training, file size limit" "$TMP/m2/weights-e0001.bin: write failed: File too large" "$out" $rc
[ ! -e "$TMP/m2/model_params.json" ] && pass "no half model left" || fail "a model was left behind"

if try_mount "$TMP/fs" -t tmpfs -o size=512k tmpfs; then
  cp -r "$TMP/cut_copy" "$TMP/fs/cut"
  dd if=/dev/zero of="$TMP/fs/fill" bs=4k 2>/dev/null  # fills the file system
  out=$("$DS" train --resume --model-dir "$TMP/fs/cut" 2>&1 >/dev/null); rc=$?
  one_error "train --resume on a full file system" "No space left on device" "$out" $rc
  grep -qF "$TMP/fs/cut/" <<<"$out" && pass "the error names the file" || fail "no file named: $out"
  loadable "$TMP/fs/cut" && pass "full file system: the epoch-1 model stays loadable" ||
    fail "full file system: model not loadable"
  rm -f "$TMP/fs/fill"
  "$DS" train --resume --model-dir "$TMP/fs/cut" >/dev/null 2>&1 && loadable "$TMP/fs/cut" &&
    pass "full file system: resumed once there is room" || fail "full file system: resume"
else
  skip "tmpfs mount not permitted: full file system (ENOSPC) cases"
fi

# ---- generating into a full disk ----
out=$( (ulimit -f 64; "$DS" "${GEN[@]}" --output "$TMP/g.csv") 2>&1 >/dev/null); rc=$?
one_error "generate, file size limit" "$TMP/g.csv: write failed: File too large" "$out" $rc
grep -q -- "--resume" <<<"$out" && pass "hint to resume" || fail "no resume hint: $out"
k=$(whole_prefix "$TMP/g.csv" "$TMP/full.csv") && pass "the output holds $k whole records" ||
  fail "output not whole records: $k"
grep -q "stopped after $k valid records" <<<"$out" && pass "the summary counts what the file holds" ||
  fail "summary: $out"
"$DS" "${GEN[@]}" --output "$TMP/g.csv" --resume >/dev/null 2>&1 && cmp -s "$TMP/g.csv" "$TMP/full.csv" &&
  pass "--resume completes it, identical to an uninterrupted run" || fail "resume after EFBIG"

if try_mount "$TMP/gfs" -t tmpfs -o size=160k tmpfs; then
  out=$("$DS" "${GEN[@]}" --output "$TMP/gfs/g.csv" 2>&1 >/dev/null); rc=$?
  # The records or the progress file (whichever write hits the full disk first).
  one_error "generate on a full file system" "No space left on device" "$out" $rc
  grep -qE "error: $TMP/gfs/g.csv(.progress.json)?: write failed" <<<"$out" && pass "the error names the file" ||
    fail "no file named: $out"
  k=$(whole_prefix "$TMP/gfs/g.csv" "$TMP/full.csv") && pass "full file system: $k whole records kept" ||
    fail "full file system: output not whole records"
  [ -e "$TMP/gfs/g.csv.progress.json" ] && pass "progress file kept" || fail "no progress file"
  if mount -o remount,size=2m "$TMP/gfs" 2>/dev/null; then
    "$DS" "${GEN[@]}" --output "$TMP/gfs/g.csv" --resume >/dev/null 2>&1 &&
      cmp -s "$TMP/gfs/g.csv" "$TMP/full.csv" && pass "full file system: --resume completes it identically" ||
      fail "full file system: resume"
  else
    skip "tmpfs remount not permitted"
  fi
else
  skip "tmpfs mount not permitted: generation on a full file system"
fi
out=$("$DS" "${GEN[@]}" --output /dev/full 2>&1 >/dev/null); rc=$?
one_error "generate to /dev/full" "/dev/full: write failed: No space left on device" "$out" $rc
[ -c /dev/full ] && pass "/dev/full is still a device" || fail "/dev/full replaced"
out=$("$DS" "${GEN[@]}" 2>&1 >/dev/full); rc=$?
one_error "generate to a full standard output" "stdout: write failed: No space left on device" "$out" $rc

# ---- read-only model directory ----
mkdir -p "$TMP/ro/existing"
cp -r "$TMP/m" "$TMP/ro/m"
if try_mount "$TMP/ro" --bind "$TMP/ro" && mount -o remount,bind,ro "$TMP/ro" 2>/dev/null; then
  for d in new existing m; do
    extra=()
    [ $d = m ] && extra=(--overwrite)
    start=$(date +%s%N)
    out=$("$DS" train "${TR[@]}" --epochs 50 --model-dir "$TMP/ro/$d" "${extra[@]}" 2>&1 >/dev/null); rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    one_error "train into read-only $d" "Read-only file system" "$out" $rc
    grep -q "epoch" <<<"$out" && fail "read-only $d: training started first" || pass "read-only $d: refused before training (${ms} ms)"
  done
  out=$("$DS" train --resume --model-dir "$TMP/ro/m" 2>&1 >/dev/null); rc=$?
  one_error "train --resume in a read-only directory" "not writable: Read-only file system" "$out" $rc
  loadable "$TMP/ro/m" && pass "a model on a read-only mount still generates" || fail "read-only model not usable"
else
  skip "read-only bind mount not permitted"
fi

# ---- shapes that cannot fit in memory ----
out=$("$DS" train "${TR[@]}" --epochs 1 --model-dir "$TMP/b1" --vocab-size 10000000 2>&1 >/dev/null); rc=$?
one_error "vocab_size 10^7" "vocab_size': value 10000000 out of range" "$out" $rc
TR2=("${TR[@]:0:6}" --seq-length 32 --seed 5 --early-stopping=false --threads 1)  # no shape flags
out=$("$DS" train "${TR2[@]}" --epochs 1 --model-dir "$TMP/b2" --batch-size 100000000 --rnn-units 100000 2>&1 >/dev/null); rc=$?
one_error "batch_size 10^8, rnn_units 10^5" "out of range" "$out" $rc
start=$(date +%s%N)
out=$("$DS" train "${TR2[@]}" --epochs 1 --model-dir "$TMP/b3" --batch-size 8 --rnn-units 65536 --embedding-dim 65536 2>&1 >/dev/null); rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
one_error "rnn_units = embedding_dim = 65536" "of memory, more than the" "$out" $rc
[ $rc -ne 137 ] && [ ! -e "$TMP/b3" ] && pass "refused in ${ms} ms, nothing left" || fail "rc $rc or left $TMP/b3"
# About 5 GB for 3072 units: over the 3 GB limit whatever the process already maps
# (a CUDA build maps far more at start than a CPU-only one; 2048 units, about
# 2.3 GB, fit under the limit in a CPU-only build and trained for many minutes).
out=$( (ulimit -v 3000000; timeout 60 "$DS" train "${TR2[@]}" --epochs 1 --model-dir "$TMP/b4" --batch-size 8 --embedding-dim 16 --rnn-units 3072) 2>&1 >/dev/null); rc=$?
one_error "rnn_units 3072 under ulimit -v 3 GB" "ulimit -v" "$out" $rc
out=$("$DS" generate --model-dir "$TMP/m" -n 100000 --predict-batch-size 65536 --parallelism 4096 -o "$TMP/b5.csv" 2>&1 >/dev/null); rc=$?
one_error "4096 workers x 65536 slots" "reduce predict_batch_size or parallelism" "$out" $rc
[ ! -e "$TMP/b5.csv" ] && [ ! -e "$TMP/b5.csv.partial" ] && pass "no output started" || fail "output left"

finish
