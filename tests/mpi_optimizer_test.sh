#!/usr/bin/env bash
# mpirun on one host with the field tokenizer's defaults (Adam; docs/scale.md
# "The optimizer, sharded"): each rank updates its slice of the weights, so
# the weights, the optimizer state in the checkpoint and the history
# (validation loss included) must be bitwise those of one rank, and a
# checkpoint of a sharded run must resume on another rank count.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
if ! why=$(mpi_available); then skip "mpirun training: $why"; finish; fi
# The field default network, smaller (Adam, plateau schedule, field tokens).
small_field_job 3 3
checkpoint() { ls "$1"/checkpoint-e*.bin | tail -1; }

train_ranks 1 2 3
grep -q "optimizer adam" "$TMP/log1" && pass "the field defaults train with Adam" ||
  fail "not the field defaults: $(grep 'field tokenizer' "$TMP/log1")"
grep -q "summed in shared memory (one host), optimizer sharded over the ranks" "$TMP/log3" &&
  pass "3 ranks: optimizer sharded" || fail "no sharded optimizer: $(grep '^mpi:' "$TMP/log3")"
cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/m2")" && cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/m3")" &&
  pass "sharded Adam: weights bitwise equal for 1, 2 and 3 ranks" || fail "weights differ across rank counts"
# The checkpoint holds the whole optimizer state, gathered from the slices.
cmp -s "$(checkpoint "$TMP/m1")" "$(checkpoint "$TMP/m3")" &&
  pass "checkpoint (weights and Adam state) bitwise equal for 1 and 3 ranks" ||
  fail "checkpoints differ: the optimizer state of a sharded run is not the whole state"
cmp -s "$TMP/m1/model_history.csv" "$TMP/m2/model_history.csv" &&
  cmp -s "$TMP/m1/model_history.csv" "$TMP/m3/model_history.csv" &&
  pass "history (loss, val_loss, accuracy) equal for 1, 2 and 3 ranks" ||
  fail "history differs: $(diff "$TMP/m1/model_history.csv" "$TMP/m3/model_history.csv")"
# The allreduce path (several hosts: every rank updates every weight) agrees.
DATASYNTH_MPI_SHM=0 "${MPIRUN[@]}" -n 2 "$DS" train "${ARGS[@]}" --model-dir "$TMP/m2mpi" >/dev/null 2>&1 ||
  fail "mpirun -n 2 with DATASYNTH_MPI_SHM=0"
cmp -s "$(weights "$TMP/m2")" "$(weights "$TMP/m2mpi")" &&
  pass "sharded (shared memory) and whole (MPI allreduce) optimizer: the same weights" ||
  fail "sharded vs whole optimizer differ"
# Without dropout (the shards draw their own masks) the shard path is a plain
# run up to float rounding: the same loss (over each target's legal ids, as
# one process computes it; a shard that lost its legal ids trained and
# reported the whole vocabulary's softmax).
ONE=(--input "$TMP/t.csv" --field-delimiter , --epochs 1 --embedding-dim 16 --rnn-units 24
     --batch-size 8 --seed 3 --early-stopping=false --threads 1 --dropout-rate 0)
"$DS" train "${ONE[@]}" --model-dir "$TMP/plain0" >/dev/null 2>&1 ||
  fail "plain run without dropout"
"${MPIRUN[@]}" -n 2 "$DS" train "${ONE[@]}" --model-dir "$TMP/mpi0" >/dev/null 2>&1 || fail "mpirun -n 2 without dropout"
python3 - "$TMP/plain0/model_history.csv" "$TMP/mpi0/model_history.csv" <<'PY' &&
import csv, sys
a, b = (next(csv.DictReader(open(p))) for p in sys.argv[1:3])
print({k: (a[k], b[k]) for k in ("loss", "val_loss")})
sys.exit(0 if all(abs(float(a[k]) - float(b[k])) < 1e-3 * float(a[k]) for k in ("loss", "val_loss")) else 1)
PY
  pass "without dropout: the loss of a plain run (legal ids in every shard)" ||
  fail "mpirun's loss differs from a plain run's"

# Killed after epoch 1 on 3 ranks (sharded), resumed on 1, and on 2: the
# uninterrupted weights (the checkpoint's state must be every slice's).
for to in 1 2; do
  DATASYNTH_TEST_EXIT_AFTER_EPOCH=1 "${MPIRUN[@]}" -n 3 "$DS" train "${ARGS[@]}" --model-dir "$TMP/cut$to" \
    >/dev/null 2>&1
  [ "$(tail -n +2 "$TMP/cut$to/model_history.csv" | wc -l)" = 1 ] || fail "cut history ($to)"
  "${MPIRUN[@]}" -n $to "$DS" train --resume --model-dir "$TMP/cut$to" >/dev/null 2>"$TMP/rlog$to" ||
    fail "resume on $to: $(tail -3 "$TMP/rlog$to")"
  cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/cut$to")" &&
    pass "3 sharded ranks then --resume on $to: the weights of an uninterrupted run" ||
    fail "resumed on $to: weights differ"
done
finish
