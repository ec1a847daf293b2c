#!/usr/bin/env bash
# Data-parallel training speed-up from 1 to 2 mpirun ranks on this machine
# (docs/scale.md), 1 thread per rank, the telco field model (defaults).
#
#   bench/scale.sh [--epochs N] [--repeats N] [--data telco_churn.csv]
#
# Runs, alternately, REPEATS times each:
#   1 rank   taskset -c 1 datasynth train --threads 1              (no mpirun)
#   mpi x1   mpirun -n 1 --bind-to core datasynth train --threads 1 (the shard path, 1 rank)
#   mpi x2   mpirun -n 2 --bind-to core datasynth train --threads 1
#   mpi x2s2 the same with --mpi-shards 2 (one shard per rank and step)
# and prints, per run, wall and CPU (user + sys, all ranks) seconds, records/s
# (training records x epochs / wall) and the trainer's own tokens/s (training
# steps only), then the medians and the speed-ups: by wall clock, and by CPU
# time per record (what the wall-clock ratio would be with one idle core per
# rank). Also prints each 2-rank run's share of step time spent summing
# gradients and the numbers docs/scale.md's cost model uses (parameters,
# global batch, step time).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DS=${DS:-$ROOT/build/datasynth}
EPOCHS=1
REPEATS=3
DATA=${DATA:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    *) echo "usage: $0 [--epochs N] [--repeats N] [--data CSV]" >&2; exit 2 ;;
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
python3 "$ROOT/bench/split_csv.py" "$DATA" "$W/tr.csv" "$W/ho.csv" --seed 0 >&2
RECORDS=$(($(wc -l < "$W/tr.csv") - 1))
ARGS=(--input "$W/tr.csv" --field-delimiter , --epochs "$EPOCHS" --seed 7 --threads 1
      --early-stopping false --overwrite)

run() {  # NAME: one run; appends "NAME wall cpu tokens/s" to $W/results
  local name=$1 m="$W/m_$1"
  local cmd
  case $name in
    one) cmd=(taskset -c 1 "$DS" train) ;;
    mpi1) cmd=(mpirun -n 1 --bind-to core "$DS" train) ;;
    mpi2) cmd=(mpirun -n 2 --bind-to core --map-by core "$DS" train) ;;
    mpi2s2) cmd=(mpirun -n 2 --bind-to core --map-by core "$DS" train --mpi-shards 2) ;;
  esac
  /usr/bin/time -f "%e %U %S" -o "$W/time" "${cmd[@]}" "${ARGS[@]}" --model-dir "$m" 2>"$W/log" >/dev/null
  read -r wall user sys < "$W/time"
  local tps
  tps=$(grep -o 'trained .* epochs* in .*, [0-9]* tokens/s' "$W/log" | grep -o '[0-9]* tokens/s' | cut -d' ' -f1)
  local cpu
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  echo "$name $wall $cpu $tps" >> "$W/results"
  grep -h "^network:\|^mpi:" "$W/log" | sed "s/^/  [$name] /" >&2
  grep -h "^network:\|^mpi: .*CPU" "$W/log" | sed "s/^/$name /" >> "$W/lines"
  printf '%-5s wall %7.2fs  cpu %7.2fs  %8.1f records/s  %7s tokens/s (trainer)\n' "$name" "$wall" \
    "$cpu" "$(awk -v n="$RECORDS" -v e="$EPOCHS" -v w="$wall" 'BEGIN { print n * e / w }')" "$tps"
}

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $RECORDS records x $EPOCHS epochs"
for r in $(seq "$REPEATS"); do
  for name in one mpi2 mpi1 mpi2s2; do run $name; done
done
python3 - "$W/results" "$RECORDS" "$EPOCHS" "$W/lines" <<'PY'
import re, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
lines = open(sys.argv[4]).read().splitlines()
n = int(sys.argv[2]) * int(sys.argv[3])
med = lambda name, i: statistics.median(float(r[i]) for r in rows if r[0] == name)
print(f"\nmedians over {sum(r[0] == 'one' for r in rows)} runs each:")
for name in ("one", "mpi1", "mpi2", "mpi2s2"):
    print(f"  {name:5s} wall {med(name, 1):7.2f}s  cpu {med(name, 2):7.2f}s  "
          f"{n / med(name, 1):8.1f} records/s  {n / med(name, 2):8.1f} records per cpu-second")
print(f"speed-up 1 -> 2 ranks, wall clock:            {med('one', 1) / med('mpi2', 1):.2f}x")
print(f"speed-up 1 -> 2 ranks, cpu time (idle cores): {2 * med('one', 2) / med('mpi2', 2):.2f}x")
print(f"speed-up mpirun 1 -> 2 ranks, wall clock:     {med('mpi1', 1) / med('mpi2', 1):.2f}x")
print(f"speed-up 1 -> 2 ranks (mpi_shards 2), wall:    {med('one', 1) / med('mpi2s2', 1):.2f}x, "
      f"cpu time: {2 * med('one', 2) / med('mpi2s2', 2):.2f}x")
def shard_cpu(name):
    v = [float(m.group(1)) for l in lines if l.startswith(name + " mpi:")
         for m in [re.search(r"shard steps ([0-9.]+)s", l)] if m]
    return statistics.median(v) if v else float("nan")
print(f"training steps alone (CPU of the shard steps, rank 0): 1 rank {shard_cpu('mpi1'):.2f}s, "
      f"2 ranks {shard_cpu('mpi2'):.2f}s ({shard_cpu('mpi1') / shard_cpu('mpi2'):.2f}x), "
      f"2 ranks with 2 shards {shard_cpu('mpi2s2'):.2f}s")

# Cost model at 8..256 ranks (docs/scale.md) from the measured 1-rank step:
# per-rank batch fixed (weak scaling: the global batch grows with N), ring
# allreduce of the int64 gradient buffer (8 bytes per parameter) plus the
# two small allreduces (max, statistics) and the local fixed-point work.
net = next(l for l in lines if " network:" in l)
params = float(re.search(r"([0-9.]+)M parameters", net).group(1)) * 1e6
steps = int(re.search(r"(\d+) steps per epoch", net).group(1)) * int(sys.argv[3])
cpu = [re.search(r"shard steps ([0-9.]+)s, sums ([0-9.]+)s", l) for l in lines if l.startswith("mpi1 mpi:")]
t_c = statistics.median(float(m.group(1)) for m in cpu if m) / steps
t_q = statistics.median(float(m.group(2)) for m in cpu if m) / steps
S = 8 * params
print(f"\nmodel inputs: {params / 1e6:.2f}M parameters ({S / 1e6:.1f} MB of int64 per allreduce), "
      f"1-rank step {1e3 * t_c:.1f} ms CPU, fixed-point sums {1e3 * t_q:.1f} ms")
print(" ranks | link     | allreduce | step     | efficiency | speed-up")
for gbps, alpha in ((10, 25e-6), (100, 5e-6)):
    bw = gbps * 1e9 / 8
    for n in (8, 16, 32, 64, 128, 256):
        ring = 2 * (n - 1) / n * S / bw + 2 * (n - 1) * alpha
        small = 2 * 2 * (n - 1).bit_length() * alpha
        t_ar = ring + small + t_q
        eff = t_c / (t_c + t_ar)
        print(f" {n:5d} | {gbps:3d} Gb/s | {1e3 * t_ar:7.1f} ms | {1e3 * (t_c + t_ar):6.1f} ms | "
              f"{100 * eff:8.1f} % | {n * eff:7.1f}x")
PY
