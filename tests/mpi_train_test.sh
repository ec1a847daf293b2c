#!/usr/bin/env bash
# mpirun data-parallel training on this machine (docs/scale.md): the weights
# are bitwise the same for 1, 2 and 3 ranks (fixed shards, exact sums), within
# float rounding of a run without mpirun; rank 0 alone writes; --resume with
# another rank count; DP-SGD adds its noise once; tabular batches spread.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
if ! why=$(mpi_available); then skip "mpirun training: $why"; finish; fi
head -n 301 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
ARGS=(--input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 3 --embedding-dim 16
      --rnn-units 32 --batch-size 12 --seq-length 32 --seed 5 --early-stopping=false --threads 1)

for n in 1 2 3; do
  "${MPIRUN[@]}" -n $n "$DS" train "${ARGS[@]}" --model-dir "$TMP/m$n" >"$TMP/out$n" 2>"$TMP/log$n" ||
    fail "mpirun -n $n train: $(tail -3 "$TMP/log$n")"
done
cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/m2")" && cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/m3")" &&
  pass "weights bitwise equal for 1, 2 and 3 ranks" || fail "weights differ across rank counts"
# Ranks on one host sum in shared memory (src/dist/node_sum.h); the MPI
# allreduce path (several hosts) must give the same bits.
DATASYNTH_MPI_SHM=0 "${MPIRUN[@]}" -n 3 "$DS" train "${ARGS[@]}" --model-dir "$TMP/m3mpi" >/dev/null 2>&1 ||
  fail "mpirun -n 3 with DATASYNTH_MPI_SHM=0"
cmp -s "$(weights "$TMP/m3")" "$(weights "$TMP/m3mpi")" &&
  pass "shared-memory sum and MPI allreduce: the same weights" || fail "shared memory vs MPI allreduce differ"
cmp -s "$TMP/m1/model_history.csv" "$TMP/m3/model_history.csv" &&
  pass "history equal for 1 and 3 ranks" || fail "history differs: $(diff "$TMP/m1/model_history.csv" "$TMP/m3/model_history.csv")"
# Without dropout (the shards draw their own masks) an mpirun run is a plain
# run up to float rounding (a short run: rounding differences grow over many
# RMSprop steps, as between any two summation orders). fp32: bf16 operands would
# round the two runs' differing sums to different bf16 values, far above fp32 noise.
SHORT=(--precision fp32 --input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 1 --max-lines 20 --embedding-dim 16
       --rnn-units 32 --batch-size 12 --seq-length 32 --seed 5 --threads 1 --dropout-rate 0)
"$DS" train "${SHORT[@]}" --model-dir "$TMP/plain0" 2>/dev/null || fail "plain run"
"${MPIRUN[@]}" -n 2 "$DS" train "${SHORT[@]}" --model-dir "$TMP/mpi0" >/dev/null 2>&1 ||
  fail "mpirun run without dropout"
python3 - "$(weights "$TMP/plain0")" "$(weights "$TMP/mpi0")" <<'PY' && pass "without dropout, within float rounding of a plain run" || fail "plain vs mpirun"
import struct, sys
a, b = (open(p, "rb").read()[4096:] for p in sys.argv[1:3])  # after the header page
assert len(a) == len(b) and len(a) % 4 == 0
fa, fb = struct.unpack(f"<{len(a)//4}f", a), struct.unpack(f"<{len(b)//4}f", b)
d = max(abs(x - y) for x, y in zip(fa, fb))
scale = max(abs(x) for x in fa)
print(f"max |w_plain - w_mpi| = {d:.3g} (max |w| = {scale:.3g})")
sys.exit(0 if 0 < d < 1e-5 * scale else 1)
PY
grep -q "mpi: 3 ranks; each global batch of 12 in 4 shards" "$TMP/log3" &&
  grep -q "summed in shared memory (one host)" "$TMP/log3" && pass "rank count, shards and sum path logged" ||
  fail "no mpi line: $(grep mpi "$TMP/log3")"
[ "$(grep -c '^mpi profile rank [012]: setup .*shard steps .*allreduce .* of .*; process cpu [0-9.]*s ([0-9.-]*s outside the phases)$' "$TMP/log3")" = 3 ] &&
  pass "every rank's time per phase logged" || fail "profile lines: $(grep 'mpi profile' "$TMP/log3")"
[ "$(grep -cE '^epoch +[0-9]+ +loss' "$TMP/log3")" = 3 ] && pass "one log (rank 0's)" ||
  fail "epoch lines: $(grep -cE '^epoch +[0-9]+ +loss' "$TMP/log3")"
ls "$TMP" | grep -q datasynth-rank && fail "scratch directories of ranks 1.. left: $(ls "$TMP")" ||
  pass "other ranks' scratch directories removed"

# --resume with another rank count: 2 ranks, killed after epoch 2, resumed on 3.
DATASYNTH_TEST_EXIT_AFTER_EPOCH=2 "${MPIRUN[@]}" -n 2 "$DS" train "${ARGS[@]}" --model-dir "$TMP/cut" >/dev/null 2>&1
[ "$(tail -n +2 "$TMP/cut/model_history.csv" | wc -l)" = 2 ] && pass "killed after 2 epochs" || fail "cut history"
"${MPIRUN[@]}" -n 3 "$DS" train --resume --model-dir "$TMP/cut" >/dev/null 2>"$TMP/rlog" ||
  fail "resume on 3 ranks: $(tail -3 "$TMP/rlog")"
cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/cut")" &&
  pass "2 ranks then --resume on 3: the weights of an uninterrupted run" || fail "resumed weights differ"

# Ctrl-C reaching rank 0 alone: rank 0 decides for all (training steps and
# validation), so every rank stops and none waits in a collective for it.
LONG=(--input "$TMP/t.csv" --field-delimiter , --tokenizer char --epochs 500 --embedding-dim 16
      --rnn-units 32 --batch-size 12 --seq-length 32 --seed 5 --early-stopping=false --threads 1)
"${MPIRUN[@]}" -n 2 "$DS" train "${LONG[@]}" --model-dir "$TMP/int" >/dev/null 2>"$TMP/intlog" &
job=$!
for _ in $(seq 300); do grep -q "^epoch " "$TMP/intlog" && break; sleep 0.2; done
pid0=
for p in $(pgrep -P $job); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && pid0=$p
done
[ -n "$pid0" ] && kill -INT "$pid0"
for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.2; done
if kill -0 $job 2>/dev/null; then
  kill -9 $job; fail "Ctrl-C on rank 0: the job did not stop within 60 s"
else
  # rank 0's message, or (when mpirun stopped rank 0 first) a rank's exit code 130
  grep -qiE "interrupted|exit code: +130" "$TMP/intlog" && pass "Ctrl-C on rank 0 stops every rank" ||
    fail "Ctrl-C on rank 0 (pid '$pid0'): $(grep -v "^epoch" "$TMP/intlog" | head -8)"
fi

# DP-SGD: the same noise (rank 0 draws it once) and the same sums for 1 and 2 ranks.
cp "$ROOT/tests/data/datasets/penguins.csv" "$TMP/p.csv"
DP=(--input "$TMP/p.csv" --field-delimiter , --dp --dp-noise-multiplier 0.8 --epochs 2 --embedding-dim 16
    --rnn-units 32 --batch-size 32 --seq-length 20 --seed 9 --dp-deterministic-noise --threads 1)
for n in 1 2; do
  "${MPIRUN[@]}" -n $n "$DS" train "${DP[@]}" --model-dir "$TMP/dp$n" >/dev/null 2>"$TMP/dplog$n" ||
    fail "dp on $n ranks: $(tail -3 "$TMP/dplog$n")"
done
cmp -s "$(weights "$TMP/dp1")" "$(weights "$TMP/dp2")" && pass "DP-SGD weights equal for 1 and 2 ranks" ||
  fail "DP weights differ"
cmp -s "$TMP/dp1/model_history.csv" "$TMP/dp2/model_history.csv" &&
  pass "DP epsilon counts the global batch (same history)" || fail "DP history differs"

# Tabular: the batch models spread over 2 ranks, the same models as one process trains.
TAB=(--input "$TMP/t.csv" --field-delimiter , --tabular --tokenizer char --epochs 1 --embedding-dim 16
     --rnn-units 32 --batch-size 8 --seq-length 32 --seed 5 --threads 1)
"$DS" train "${TAB[@]}" --model-dir "$TMP/tab1" >/dev/null 2>&1 || fail "plain tabular"
"${MPIRUN[@]}" -n 2 "$DS" train "${TAB[@]}" --model-dir "$TMP/tab2" >/dev/null 2>"$TMP/tlog" ||
  fail "tabular on 2 ranks: $(tail -3 "$TMP/tlog")"
same=1
for f in "$TMP"/tab1/batch_*/weights-e*.bin; do cmp -s "$f" "${f/tab1/tab2}" || same=0; done
[ $same = 1 ] && cmp -s "$TMP/tab1/tabular.json" "$TMP/tab2/tabular.json" &&
  pass "tabular batches on 2 ranks: the same models and plan" || fail "tabular models differ"
"$DS" generate --model-dir "$TMP/tab2" --num-lines 20 --seed 3 -o "$TMP/tab.csv" 2>/dev/null &&
  [ "$(wc -l < "$TMP/tab.csv")" = 21 ] && pass "the spread tabular model generates" || fail "tabular generate"
finish
