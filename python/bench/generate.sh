#!/usr/bin/env bash
# Generation from Python vs the CLI: the same model, seed and record count,
# run alternately, pinned to one core (wall and user+sys seconds per run).
# Usage: python/bench/generate.sh MODEL_DIR [RECORDS=10000] [RUNS=5]
# (PY: the venv's python, default build/pyvenv/bin/python; DS: the CLI.)
set -euo pipefail
M=$1; N=${2:-10000}; RUNS=${3:-5}
PY=${PY:-build/pyvenv/bin/python}; DS=${DS:-build/datasynth}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
t() { /usr/bin/time -f "%e %U %S" -o "$OUT/t" taskset -c 1 "$@" >/dev/null 2>&1; awk '{printf "%.2f %.2f", $1, $2+$3}' "$OUT/t"; }
for i in $(seq "$RUNS"); do
  c=$(t "$DS" generate -m "$M" -n "$N" --seed 7 -o "$OUT/cli.csv" --overwrite)
  p=$(t "$PY" -c "import datasynth,sys; df=datasynth.Model.load(sys.argv[1]).generate($N, seed=7, progress=False); assert len(df)==$N" "$M")
  echo "run $i  cli wall/cpu $c   python wall/cpu $p"
done
