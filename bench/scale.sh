#!/usr/bin/env bash
# Data-parallel training speed-up from 1 to 2 mpirun ranks on this machine
# (docs/scale.md), 1 thread per rank, on two workloads:
#   char   the reference's network on telco_churn: char tokenizer, 2 x LSTM 256,
#          embedding 256, batch 64 x 100 tokens (about 0.3 s per step on one
#          core, 102 steps per epoch; 3 epochs: a few minutes of work)
#   field  the field tokenizer's defaults: 1 x LSTM 128 (a few ms per step;
#          the fixed costs of a rank weigh most here)
#   job    the whole default job (the field defaults, early stopping on: each
#          run trains the epochs it takes; records/s over those epochs, CPU
#          per epoch); not in the default set
#
#   bench/scale.sh [-s|--short] [--workload char|field|job|both] [--repeats N] [--data telco_churn.csv]
#
# -s, --short: 1 epoch of char and 3 of field, 1 repeat (about 3 minutes on an
# idle machine); default: 3 epochs of char, 10 of field, 3 repeats.
# FIELD_ARGS (environment): more arguments for the field workload, e.g.
# FIELD_ARGS="--rnn-units 64" for a cheaper step (the fixed costs weigh more).
#
# Per workload, REPEATS times, alternately:
#   one     taskset -c 1 datasynth train --threads 1               (no mpirun)
#   mpi2    mpirun -n 2 --bind-to core datasynth train --threads 1  (mpi_shards 4)
#   mpi2s2  the same with --mpi-shards 2 (one shard per rank and step)
#   mpi1    mpirun -n 1 (the shard path on one rank: the cost model's step time)
# and prints per run wall and CPU (user + sys, all ranks) seconds, records/s
# (training records x epochs / wall) and the load average, then the medians,
# the speed-ups by wall clock and by CPU time (2 x CPU of one / CPU of two:
# what the wall-clock ratio would be with an idle core per rank), every rank's
# time per phase (the trainer's "mpi profile" lines) and the cost model at 8
# to 256 ranks from the measured step. A 2-rank wall-clock figure needs both
# cores: run it on an idle machine (the load is printed beside every run).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DS=${DS:-$ROOT/build/datasynth}
REPEATS=3
SHORT=0
WORKLOADS="char field"
DATA=${DATA:-}
while [ $# -gt 0 ]; do
  case "$1" in
    -s|--short) SHORT=1; REPEATS=1; shift ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --workload) WORKLOADS="$2"; [ "$2" = both ] && WORKLOADS="char field"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    *) echo "usage: $0 [--short] [--workload char|field|both] [--repeats N] [--data CSV]" >&2; exit 2 ;;
  esac
done
if [ -z "$DATA" ]; then
  for d in "$ROOT/../shared/datasets" "$ROOT/../../shared/datasets" /work/shared/datasets; do
    [ -e "$d/telco_churn.csv" ] && DATA="$d/telco_churn.csv" && break
  done
fi
[ -e "$DATA" ] || { echo "scale.sh: telco_churn.csv not found (--data PATH)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export TMPDIR="$W"  # the other ranks' scratch model directories
python3 "$ROOT/bench/split_csv.py" "$DATA" "$W/tr.csv" "$W/ho.csv" --seed 0 >&2
RECORDS=$(($(wc -l < "$W/tr.csv") - 1))

args() {  # WORKLOAD: its training arguments
  local epochs
  case $1 in
    char) epochs=$((SHORT ? 1 : 3))
          echo --tokenizer char --num-layers 2 --rnn-units 256 --embedding-dim 256 \
               --batch-size 64 --seq-length 100 --epochs $epochs ;;
    field) epochs=$((SHORT ? 3 : 10)); echo --epochs $epochs ${FIELD_ARGS:-} ;;
    job) echo ${FIELD_ARGS:-} ;;
  esac
}
epochs_of() { args "$1" | grep -o -- '--epochs [0-9]*' | cut -d' ' -f2; }  # none for job

run() {  # WORKLOAD NAME: one run; appends "WORKLOAD NAME wall cpu load epochs" to $W/results
  local wl=$1 name=$2 m="$W/m_$1_$2" cmd es=(--early-stopping false)
  [ "$wl" = job ] && es=()
  case $name in
    one) cmd=(taskset -c 1 "$DS" train) ;;
    mpi1) cmd=(mpirun -n 1 --bind-to core "$DS" train) ;;
    mpi2) cmd=(mpirun -n 2 --bind-to core --map-by core "$DS" train) ;;
    mpi2s2) cmd=(mpirun -n 2 --bind-to core --map-by core "$DS" train --mpi-shards 2) ;;
  esac
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  # shellcheck disable=SC2046
  /usr/bin/time -f "%e %U %S" -o "$W/time" "${cmd[@]}" $(args "$wl") --input "$W/tr.csv" \
    --field-delimiter , --seed 7 --threads 1 "${es[@]}" --overwrite \
    --model-dir "$m" 2>"$W/log" >/dev/null || { tail -5 "$W/log" >&2; exit 1; }
  local wall user sys cpu
  read -r wall user sys < "$W/time"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  local ep=$(($(wc -l < "$m/model_history.csv") - 1))  # the epochs trained
  echo "$wl $name $wall $cpu $load $ep" >> "$W/results"
  grep -h "^network:\|^mpi profile" "$W/log" | sed "s/^/$wl $name /" >> "$W/lines"
  printf '%-5s %-6s wall %7.2fs  cpu %7.2fs  %3d epochs  %7.1f records/s  (load %s)\n' "$wl" "$name" \
    "$wall" "$cpu" "$ep" "$(awk -v n="$RECORDS" -v e="$ep" -v w="$wall" 'BEGIN { print n * e / w }')" "$load"
}

/usr/bin/time -f "%e" -o "$W/start" mpirun -n 2 true
echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RECORDS records;" \
     "mpirun -n 2 start $(cat "$W/start")s"
for wl in $WORKLOADS; do
  for r in $(seq "$REPEATS"); do
    for name in one mpi2 mpi2s2 mpi1; do run "$wl" $name; done
  done
done
python3 - "$W/results" "$W/lines" "$RECORDS" $(for wl in $WORKLOADS; do echo "$wl=$(epochs_of "$wl")"; done) <<'PY'
import re, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
lines = open(sys.argv[2]).read().splitlines()
records = int(sys.argv[3])
epochs = dict(a.split("=") for a in sys.argv[4:])
PHASES = ("setup", "validation", "shard steps", "fixed point", "wait", "allreduce", "optimizer", "save", "calibration", "other")

def med(wl, name, i):
    return statistics.median(float(r[i]) for r in rows if r[0] == wl and r[1] == name)

def rate(wl, name):  # median records/s (wall clock) over the epochs each run trained
    return statistics.median(records * int(r[5]) / float(r[2]) for r in rows if r[0] == wl and r[1] == name)

def cpu_epoch(wl, name):  # median CPU seconds per epoch
    return statistics.median(float(r[3]) / int(r[5]) for r in rows if r[0] == wl and r[1] == name)

def phases(wl, name, rank):  # {phase: (median wall, median cpu)} from the "mpi profile" lines
    got = {}
    for l in lines:
        if not l.startswith(f"{wl} {name} mpi profile rank {rank}:"):
            continue
        for p in PHASES[:-1]:
            m = re.search(re.escape(p) + r" ([0-9.]+)s \(cpu ([0-9.]+)s\)", l)
            if m:  # (a binary before the calibration phase has none)
                got.setdefault(p, []).append((float(m.group(1)), float(m.group(2))))
        m = re.search(r"other (-?[0-9.]+)s of ([0-9.]+)s", l)
        got.setdefault("other", []).append((float(m.group(1)), 0.0))
        got.setdefault("total", []).append((float(m.group(2)), 0.0))
        m = re.search(r"process cpu ([0-9.]+)s \((-?[0-9.]+)s outside", l)
        if m:  # the CPU no phase covers: exec, MPI_Init, the configuration
            got.setdefault("process", []).append((0.0, float(m.group(1))))
            got.setdefault("outside", []).append((0.0, float(m.group(2))))
    return {p: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for p, v in got.items()}

for wl in epochs:
    if not epochs[wl]:  # job: the epochs of the one-process runs (they vary per run)
        epochs[wl] = str(round(med(wl, "one", 5)))
    n = records * int(epochs[wl])
    net = next(l for l in lines if l.startswith(f"{wl} one network:"))
    params = float(re.search(r"([0-9.]+)M parameters", net).group(1)) * 1e6
    per_epoch = int(re.search(r"(\d+) steps per epoch", net).group(1))
    steps = per_epoch * int(epochs[wl])
    print(f"\n== {wl}: {records} records x {epochs[wl]} epochs, {params / 1e6:.2f}M parameters, "
          f"{steps} steps; medians of {sum(r[0] == wl and r[1] == 'one' for r in rows)} runs each")
    for name in ("one", "mpi1", "mpi2", "mpi2s2"):
        print(f"  {name:6s} wall {med(wl, name, 2):7.2f}s  cpu {med(wl, name, 3):7.2f}s  "
              f"{med(wl, name, 5):3.0f} epochs  {rate(wl, name):8.1f} records/s  "
              f"{records / cpu_epoch(wl, name):8.1f} records per cpu-second  (load {med(wl, name, 4):.1f})")
    for name, label in (("mpi2", "mpi_shards 4"), ("mpi2s2", "mpi_shards 2")):
        w = rate(wl, name) / rate(wl, "one")
        c = 2 * cpu_epoch(wl, "one") / cpu_epoch(wl, name)
        print(f"  speed-up 1 -> 2 ranks ({label}): wall clock {w:.2f}x, cpu time {c:.2f}x; "
              f"bar 1.7x by wall clock: {'met' if w >= 1.7 else 'NOT met'}")
    for name in ("mpi1", "mpi2", "mpi2s2"):
        for rank in range(2 if name != "mpi1" else 1):
            ph = phases(wl, name, rank)
            if ph:
                print(f"  {name} rank {rank} (wall/cpu s): " + ", ".join(
                    f"{p} {ph[p][0]:.2f}/{ph[p][1]:.2f}" for p in PHASES[:-1] if p in ph) +
                      f", other {ph['other'][0]:.2f} of {ph['total'][0]:.2f}" +
                      (f"; process cpu {ph['process'][1]:.2f}, outside the phases "
                       f"{ph['outside'][1]:.2f}" if "process" in ph else ""))
    # Cost model at 8..256 ranks (docs/scale.md) from the 1-rank shard path:
    # per-rank batch fixed (the global batch grows with N), the sharded
    # optimizer's ring reduce-scatter of the int64 sum (8 bytes per parameter)
    # and allgather of the float32 weights (4 bytes): (N-1)/N x 12 P bytes and
    # 2 (N-1) alpha, + one small allreduce (the statistics and the scale:
    # 2 log2 N alpha) + the local fixed-point work; the optimizer (1/N of the
    # weights per rank) counts as compute, nothing overlaps.
    ph = phases(wl, "mpi1", 0)
    steps1 = per_epoch * med(wl, "mpi1", 5)  # mpi1's steps (job: its own epochs)
    t_s, t_o = ph["shard steps"][0] / steps1, ph["optimizer"][0] / steps1
    t_q = ph["fixed point"][0] / steps1
    S = 12 * params
    print(f"  cost model inputs (mpi1, wall per step): shard steps {1e3 * t_s:.2f} ms, optimizer "
          f"{1e3 * t_o:.2f} ms (/N), fixed point {1e3 * t_q:.2f} ms, {S / 1e6:.1f} MB per "
          f"reduce-scatter + allgather")
    print("   ranks | link     | sum+gather | step     | efficiency | speed-up")
    for gbps, alpha in ((10, 25e-6), (100, 5e-6)):
        bw = gbps * 1e9 / 8
        for k in (8, 32, 64, 256):
            t_c = t_s + t_o / k
            t_ar = (k - 1) / k * S / bw + 2 * (k - 1) * alpha + 2 * (k - 1).bit_length() * alpha + t_q
            eff = (t_s + t_o) / (t_c + t_ar)  # against one rank running the whole optimizer
            print(f"   {k:5d} | {gbps:3d} Gb/s | {1e3 * t_ar:7.1f} ms | {1e3 * (t_c + t_ar):6.1f} ms | "
                  f"{100 * eff:8.1f} % | {k * eff:7.1f}x")
PY
