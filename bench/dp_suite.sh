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
# calibration, docs/privacy.md; "--dp-deterministic-noise" to compare two builds
# draw for draw), RUN_DS (1; 0 = the peers only), SEEDS (datasynth's training
# seeds, "1"), PEER_SEEDS (the peers' seeds, "0").
# Writes WORK/<table>/<method>_e<eps>_s<seed>/{synth.csv,eval.json,train.log,time.txt}
# and WORK/summary.md (the table: each row the mean over its seeds, with their count).
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
SEEDS=${SEEDS:-1}
PEER_SEEDS=${PEER_SEEDS:-0}
DS_SEEDS=$SEEDS
[ "$RUN_DS" = 1 ] || DS_SEEDS=""
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
    for seed in $DS_SEEDS; do
      R=$T/datasynth_e${e}_s$seed
      mkdir -p "$R"
      # shellcheck disable=SC2086
      /usr/bin/time -f "%e %U %S" -o "$R/time.txt" taskset -c "$CORE" "$DS" train --input "$T/train.csv" \
        --model-dir "$R/model" --overwrite --dp --dp-target-epsilon "$e" --dp-delta "$delta" \
        --schema "$schema" --seed "$seed" $DS_FLAGS > "$R/train.log" 2>&1
      taskset -c "$CORE" "$DS" generate --model-dir "$R/model" --num-lines "$ROWS" --seed 1 \
        --output "$R/synth.csv" --overwrite > "$R/gen.log" 2>&1
      score "$R"
    done
    for p in $PEERS; do
      for seed in $PEER_SEEDS; do
        R=$T/${p}_e${e}_s$seed
        mkdir -p "$R"
        /usr/bin/time -f "%e %U %S" -o "$R/time.txt" taskset -c "$CORE" "$DPMM_PY" \
          "$ROOT/bench/dp_peer_dpmm.py" "$p" "$T/train.csv" "$schema" "$e" "$delta" "$R/synth.csv" \
          "$ROWS" "$seed" > "$R/train.log" 2>&1 || { echo "peer $p failed: $R/train.log" >&2; continue; }
        score "$R"
      done
    done
  done
done
python3 - "$WORK" <<'PY'
import collections, glob, json, os, sys
work = sys.argv[1]
runs = collections.defaultdict(list)  # (table, method, eps) -> [(eval, seconds)]
for ev in sorted(glob.glob(os.path.join(work, "*", "*_e*_s*", "eval.json"))):
  run = os.path.dirname(ev)
  table, name = os.path.basename(os.path.dirname(run)), os.path.basename(run)
  method, rest = name.rsplit("_e", 1)
  eps = rest.rsplit("_s", 1)[0]
  tf = os.path.join(run, "time.txt")
  t = float(open(tf).read().split()[0]) if os.path.exists(tf) else float("nan")
  runs[(table, method, float(eps))].append((json.load(open(ev)), t))
lines = ["| table | method | epsilon | seeds | train s (wall, mean) | SQS (mean) | distributions / correlations / deep | exact copies (most) |",
         "|---|---|---|---|---|---|---|---|"]
mean = lambda xs: sum(xs) / len(xs)
for (table, method, eps), rs in sorted(runs.items()):
  q = [j["quality"] for j, _ in rs]
  sub = " / ".join(f"{mean([x[k]['score'] for x in q]):.0f}" for k in
                   ("field_distribution_stability", "field_correlation_stability", "deep_structure_stability"))
  lines.append(f"| {table} | {method} | {eps:g} | {len(rs)} | {mean([t for _, t in rs]):.0f} | "
               f"{mean([x['overall'] for x in q]):.1f} | {sub} | {max(j['privacy']['exact_copies'] for j, _ in rs)} |")
open(os.path.join(work, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
