#!/usr/bin/env bash
# DP quality suite (docs/privacy.md "Measured"): datasynth --dp with a public
# schema beside dpmm's MST and PrivBayes given the same schema, epsilon 1, 4
# and 10, delta = 1/n, one core each (taskset), scored by `datasynth evaluate`
# against the train split with the held-out 20% as the ceiling.
#   bench/dp_suite.sh [WORK]     (default /tmp/dp_suite)
# Environment: TABLES (default "telco_churn penguins mpg gapminder"; each needs
# bench/schemas/<table>.json and /work/shared/datasets/<table>.csv, or set
# DATA), EPS ("1 4 10"), PEERS ("mst privbayes"; "" = none), ROWS (2000),
# CORE (1), DS (build/datasynth), DPMM_PY (/work/venvs/dpmm/bin/python: PyPI dpmm),
# DS_FLAGS (extra datasynth train flags, e.g. "--calibrate-pairs 0" for the 1-way
# calibration only, "--dp-marginal-share 0.5"; the --dp defaults include the 2-way
# calibration, docs/privacy.md), RUN_DS (1; 0 = the peers only).
# Writes WORK/<table>/<method>_e<eps>/{synth.csv,eval.json,train.log,time.txt}
# and WORK/summary.md (the table).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/dp_suite}
TABLES=${TABLES:-telco_churn penguins mpg gapminder}
EPS=${EPS:-1 4 10}
PEERS=${PEERS-mst privbayes}
ROWS=${ROWS:-2000}
CORE=${CORE:-1}
DS=${DS:-$ROOT/build/datasynth}
DATA=${DATA:-/work/shared/datasets}
DPMM_PY=${DPMM_PY:-/work/venvs/dpmm/bin/python}
DS_FLAGS=${DS_FLAGS-}
RUN_DS=${RUN_DS:-1}
mkdir -p "$WORK"
score() {  # dir: evaluate the synth of one run
  "$DS" evaluate --real "$1/../train.csv" --synthetic "$1/synth.csv" --holdout "$1/../hold.csv" \
    --overwrite --json "$1/eval.json" > "$1/eval.txt" 2>&1 || echo "evaluate failed: $1" >&2
}
for t in $TABLES; do
  T=$WORK/$t
  mkdir -p "$T"
  schema=$ROOT/bench/schemas/$t.json
  [ -f "$schema" ] || { echo "no schema $schema" >&2; exit 2; }
  python3 "$ROOT/bench/split_csv.py" "$DATA/$t.csv" "$T/train.csv" "$T/hold.csv" --seed 0
  n=$(($(wc -l < "$T/train.csv") - 1))
  delta=$(python3 -c "print(1 / $n)")
  for e in $EPS; do
    R=$T/datasynth_e$e
    if [ "$RUN_DS" = 1 ]; then
    mkdir -p "$R"
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %U %S" -o "$R/time.txt" taskset -c "$CORE" "$DS" train --input "$T/train.csv" \
      --model-dir "$R/model" --overwrite --dp --dp-target-epsilon "$e" --dp-delta "$delta" \
      --schema "$schema" --seed 1 $DS_FLAGS > "$R/train.log" 2>&1
    taskset -c "$CORE" "$DS" generate --model-dir "$R/model" --num-lines "$ROWS" --seed 1 \
      --output "$R/synth.csv" > "$R/gen.log" 2>&1
    score "$R"
    fi
    for p in $PEERS; do
      R=$T/${p}_e$e
      mkdir -p "$R"
      /usr/bin/time -f "%e %U %S" -o "$R/time.txt" taskset -c "$CORE" "$DPMM_PY" \
        "$ROOT/bench/dp_peer_dpmm.py" "$p" "$T/train.csv" "$schema" "$e" "$delta" "$R/synth.csv" \
        "$ROWS" 0 > "$R/train.log" 2>&1 || { echo "peer $p failed: $R/train.log" >&2; continue; }
      score "$R"
    done
  done
done
python3 - "$WORK" <<'PY'
import glob, json, os, sys
work = sys.argv[1]
lines = ["| table | method | epsilon | train s (wall) | SQS | distributions / correlations / deep | exact copies |",
         "|---|---|---|---|---|---|---|"]
for ev in sorted(glob.glob(os.path.join(work, "*", "*_e*", "eval.json"))):
  run = os.path.dirname(ev)
  table, name = os.path.basename(os.path.dirname(run)), os.path.basename(run)
  method, eps = name.rsplit("_e", 1)
  j = json.load(open(ev))
  q = j["quality"]
  t = open(os.path.join(run, "time.txt")).read().split()[0] if os.path.exists(os.path.join(run, "time.txt")) else "?"
  lines.append(f"| {table} | {method} | {eps} | {t} | {q['overall']:.1f} | "
               f"{q['field_distribution_stability']['score']:.0f} / {q['field_correlation_stability']['score']:.0f}"
               f" / {q['deep_structure_stability']['score']:.0f} | {j['privacy']['exact_copies']} |")
open(os.path.join(work, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
