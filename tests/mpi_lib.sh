# Shared by tests/mpi_*_test.sh (after tests/lib.sh): the mpirun command line
# for ranks on this machine, and a skip when the build or the machine has no MPI.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# Every rank writes its scratch files (other ranks' model directories) here.
export TMPDIR="$TMP" DATASYNTH_MPI_SCRATCH="$TMP"
MPIRUN=(mpirun --oversubscribe --bind-to none)
# mpi_available: 0 when mpirun exists and this datasynth was built with MPI.
mpi_available() {
  command -v mpirun >/dev/null || { echo "mpirun not installed (openmpi-bin)"; return 1; }
  ldd "$DS" 2>/dev/null | grep libmpi >/dev/null || { echo "datasynth built without MPI"; return 1; }
}
# Bytes of a model's kept weights file.
weights() {
  python3 -c "import json,sys; print(sys.argv[1] + '/' + json.load(open(sys.argv[1] + '/model_params.json'))['datasynth']['weights_file'])" "$1"
}
# small_field_job EPOCHS SEED: the first 240 rows of the bundled telco table in
# $TMP/t.csv and ARGS for a small field network on them (the shared setup of
# the optimizer and calibration tests).
small_field_job() {
  head -n 241 "$ROOT/examples/telco_churn_2k.csv" > "$TMP/t.csv"
  ARGS=(--input "$TMP/t.csv" --field-delimiter , --epochs "$1" --embedding-dim 16 --rnn-units 24
        --batch-size 8 --seed "$2" --early-stopping=false --threads 1)
}
# train_ranks N...: mpirun -n N datasynth train ARGS into $TMP/mN (stderr in
# $TMP/logN) for each N; a failed run fails the test.
train_ranks() {
  local n
  for n in "$@"; do
    "${MPIRUN[@]}" -n "$n" "$DS" train "${ARGS[@]}" --model-dir "$TMP/m$n" >/dev/null 2>"$TMP/log$n" ||
      fail "mpirun -n $n train: $(tail -3 "$TMP/log$n")"
  done
}
