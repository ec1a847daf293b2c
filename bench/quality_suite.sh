#!/usr/bin/env bash
# Quality suite: every table of ../shared/datasets, split 80/20 (seed 0), one
# synthetic table per method as large as the train split, scored by
# `datasynth evaluate --real train --synthetic synth --holdout hold --json`
# (the holdout scored the same way is the ceiling). docs/quality.md.
#
#   bench/quality_suite.sh                       # all tables, METHODS=field,char,peer
#   TABLES=penguins,mpg METHODS=field,peer bench/quality_suite.sh
#
# Methods:
#   field    `datasynth train` with the defaults (field tokenizer for CSV) and
#            `generate -n <train rows> -p 1` (the path of docs/typed_fields.md)
#   field_fp32  as field with `--precision fp32` (the default is auto: bf16
#            where the CPU has it; docs/precision.md)
#   tabular  `datasynth synthesize`'s path: `train --tabular` + `generate`
#   char     as field with `--tokenizer char` (takes the whole budget)
#   peer     TabularARGN (mostlyai-engine), bench/peer_argn.py, fixed column
#            order and typed dates, max_training_time = BUDGET
# Env: TABLES (names without extension, default all), METHODS, BUDGET (training
# seconds, default 600), WORK (default /tmp/quality_suite), CPU (core for
# taskset, default 1), SEED (training seed, default 1), FORCE=1 (redo results
# that exist; default: skip them, so an interrupted run resumes), DS (datasynth
# binary, default build/datasynth), PEER_PY (python with mostlyai-engine,
# default /work/venvs/mostly/bin/python), DATA (default ../shared/datasets),
# TABLE_OUT (markdown table file, default $WORK/quality_table.md), TABLE_FROM
# (more WORK dirs the table takes results from where WORK has none, e.g. the
# peer's), TABLE_METHODS (the table's methods, default METHODS). Re-running the
# field side on a new build, next to stored peer results:
#   WORK=/tmp/qs_main METHODS=field TABLE_FROM=/tmp/quality_suite \
#     TABLE_METHODS=field,char,peer bench/quality_suite.sh
# A failing method leaves WORK/<table>/<method>/error.txt and the suite goes on.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DS=${DS:-$ROOT/build/datasynth}
DATA=${DATA:-$ROOT/../shared/datasets}
WORK=${WORK:-/tmp/quality_suite}
METHODS=${METHODS:-field,char,peer}
BUDGET=${BUDGET:-600}
CPU=${CPU:-1}
SEED=${SEED:-1}
FORCE=${FORCE:-0}
PEER_PY=${PEER_PY:-/work/venvs/mostly/bin/python}
TABLE_OUT=${TABLE_OUT:-$WORK/quality_table.md}
PY=${PY:-python3}
[ -x "$DS" ] || { echo "quality_suite: no datasynth binary at $DS (build first)" >&2; exit 2; }
[ -d "$DATA" ] || { echo "quality_suite: no datasets at $DATA" >&2; exit 2; }
if [ -z "${TABLES:-}" ]; then
  TABLES=$(cd "$DATA" && ls *.csv *.csv.gz 2>/dev/null | sed -E 's/\.csv(\.gz)?$//' | sort | paste -sd, -)
fi
mkdir -p "$WORK"
PIN=(taskset -c "$CPU" nice -n 5)
TIME=(/usr/bin/time -f "%e %U %S")

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# split TABLE -> WORK/TABLE/split/{train,hold}.csv (once)
split_table() {
  local t=$1 d=$WORK/$1/split src
  [ -s "$d/train.csv" ] && [ -s "$d/hold.csv" ] && return 0
  mkdir -p "$d"
  if [ -f "$DATA/$t.csv" ]; then src=$DATA/$t.csv
  elif [ -f "$DATA/$t.csv.gz" ]; then src=$d/full.csv; gzip -dc "$DATA/$t.csv.gz" > "$src"
  else echo "no $t.csv or $t.csv.gz in $DATA" >&2; return 1; fi
  "$PY" "$ROOT/bench/split_csv.py" "$src" "$d/train.tmp" "$d/hold.tmp" --seed 0 >&2 &&
    mv "$d/train.tmp" "$d/train.csv" && mv "$d/hold.tmp" "$d/hold.csv"
}

# datasynth: train (extra flags in $@) then generate as many rows as train has
run_datasynth() {
  local d=$1 train=$2 rows=$3; shift 3
  rm -rf "$d/model"
  "${TIME[@]}" -o "$d/train_time.txt" "${PIN[@]}" "$DS" train -i "$train" -m "$d/model" \
    --threads 1 --seed "$SEED" --max-training-time-seconds "$BUDGET" "$@" \
    > "$d/train.log" 2>&1 || { tail -5 "$d/train.log"; return 1; }
  "${TIME[@]}" -o "$d/gen_time.txt" "${PIN[@]}" "$DS" generate -m "$d/model" -n "$rows" \
    -o "$d/synth.csv" -p 1 --seed "$SEED" --device cpu --overwrite \
    > "$d/gen.log" 2>&1 || { tail -5 "$d/gen.log"; return 1; }
}

run_method() {
  local t=$1 m=$2 d=$WORK/$1/$2 s=$WORK/$1/split rows
  if [ -s "$d/result.json" ] && [ "$FORCE" != 1 ]; then log "$t $m: done before (FORCE=1 redoes)"; return 0; fi
  rm -rf "$d"; mkdir -p "$d"
  rows=$(( $("$PY" -c 'import csv,sys; csv.field_size_limit(1<<30); print(sum(1 for _ in csv.reader(open(sys.argv[1], newline=""))))' "$s/train.csv") - 1 ))
  log "$t $m: training (budget ${BUDGET}s, core $CPU, $rows rows)"
  local ok=0 extra=()
  case $m in
    field) run_datasynth "$d" "$s/train.csv" "$rows" > "$d/error.txt" 2>&1 || ok=1 ;;
    field_fp32) run_datasynth "$d" "$s/train.csv" "$rows" --precision fp32 > "$d/error.txt" 2>&1 || ok=1 ;;
    char) run_datasynth "$d" "$s/train.csv" "$rows" --tokenizer char > "$d/error.txt" 2>&1 || ok=1 ;;
    tabular) run_datasynth "$d" "$s/train.csv" "$rows" --tabular > "$d/error.txt" 2>&1 || ok=1 ;;
    peer)
      [ -x "$PEER_PY" ] || { echo "no $PEER_PY (python3 -m venv /work/venvs/mostly && pip install mostlyai-engine)" > "$d/error.txt"; return 1; }
      "${TIME[@]}" -o "$d/train_time.txt" "${PIN[@]}" "$PEER_PY" "$ROOT/bench/peer_argn.py" \
        "$s/train.csv" "$d/synth.csv" --workspace "$d/ws" --minutes "$(awk "BEGIN{print $BUDGET/60}")" \
        > "$d/peer.json" 2> "$d/peer.log" || { tail -5 "$d/peer.log" > "$d/error.txt"; ok=1; }
      rm -rf "$d/ws"
      extra=(--peer-json "$d/peer.json") ;;
    *) echo "unknown method $m (field, field_fp32, tabular, char, peer)" > "$d/error.txt"; ok=1 ;;
  esac
  if [ $ok != 0 ]; then log "$t $m: FAILED: $(tail -1 "$d/error.txt")"; return 1; fi
  rm -rf "$d/model"  # keep the results, not the weights
  "${PIN[@]}" "$DS" evaluate --real "$s/train.csv" --synthetic "$d/synth.csv" --holdout "$s/hold.csv" \
    --overwrite --json "$d/eval.json" > "$d/eval.txt" 2>&1 || { cp "$d/eval.txt" "$d/error.txt"; log "$t $m: evaluate FAILED"; return 1; }
  [ "$m" = peer ] || extra=(--time "$d/train_time.txt" --gen-time "$d/gen_time.txt" \
    --gen-log "$d/gen.log" --train-log "$d/train.log")
  "$PY" "$ROOT/bench/quality_score.py" record --train "$s/train.csv" --synth "$d/synth.csv" \
    --eval "$d/eval.json" --method "$m" -o "$d/result.tmp" "${extra[@]}" > /dev/null 2> "$d/error.txt" &&
    mv "$d/result.tmp" "$d/result.json" && rm -f "$d/error.txt" "$d/synth.csv.gz" &&
    gzip -f "$d/synth.csv" && log "$t $m: $(cat "$d/result.json" | tr -d '\n ' | cut -c1-160)"
}

# One run per (table, method) at a time, across suite processes sharing WORK:
# a lock dir holding the owner's pid (a lock whose owner is gone is taken over).
run_locked() {
  local lock=$WORK/$1/.$2.lock rc
  if ! mkdir "$lock" 2>/dev/null; then
    if kill -0 "$(cat "$lock/pid" 2>/dev/null)" 2>/dev/null; then
      log "$1 $2: running in another suite process (pid $(cat "$lock/pid")), skipped"; return 0
    fi
    rm -rf "$lock"; mkdir "$lock" || return 1
  fi
  echo $$ > "$lock/pid"
  run_method "$@"; rc=$?
  rm -rf "$lock"
  return $rc
}

IFS=, read -ra TLIST <<< "$TABLES"
IFS=, read -ra MLIST <<< "$METHODS"
for t in "${TLIST[@]}"; do
  split_table "$t" || { log "$t: split failed"; continue; }
  for m in "${MLIST[@]}"; do run_locked "$t" "$m"; done
done
# shellcheck disable=SC2086  # TABLE_FROM: more WORK dirs, for methods not run here
"$PY" "$ROOT/bench/quality_score.py" table "$WORK" ${TABLE_FROM:-} --methods "${TABLE_METHODS:-$METHODS}" > "$TABLE_OUT"
cat "$TABLE_OUT"
