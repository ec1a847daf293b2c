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
