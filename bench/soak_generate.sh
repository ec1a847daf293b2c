#!/usr/bin/env bash
# Soak test of generation: a long run with 2 workers, its memory over time,
# and a check that no record was lost or duplicated.
#
#   bench/soak_generate.sh [build dir] [records] [workers] [chunk]
#   defaults: build, 1000000 records, 2 workers, chunks of 100000 records
#   SOAK_DIR=dir keeps the files there (default: a temporary directory, removed)
#   SOAK_MODEL=dir uses that model instead of training a small one
#   SOAK_SEED (11), SOAK_CONSTRAIN (auto, see below)
#
# 1. Trains a small model on examples/telco_churn_2k.csv (char tokenizer,
#    1 epoch, 2 x LSTM 64: fast, and the records are realistic rows).
# 2. `datasynth generate --format jsonl --parallelism W`: one JSON object per
#    record, valid and invalid, each with "id", its attempt index (the
#    scheduler's record id, which is also its Philox stream). Every second,
#    VmRSS of the main process and of each worker (/proc/PID/status) is
#    sampled into memory.csv.
# 3. Checks (what "lost or duplicated" means here): generated texts may
#    legitimately repeat (the model can produce the same row twice), so
#    records are identified by their id, not their text. A complete count run
#    must hold ids 0, 1, ..., M-1 exactly once each, in order (a gap = a
#    lost record, a repeat = a duplicated one), exactly N valid records, the
#    last record valid. Per chunk of C records: the count of valid/invalid
#    records and a SHA-256 of the chunk's bytes (chunks.csv). And the content
#    is checked against an independent run: the first chunk generated again
#    with 1 worker (output depends only on the seed) must be byte-identical
#    to the soak run's first C records.
# 4. Reports the memory series and whether it is flat: the main process's
#    and the workers' peak VmRSS and RssAnon in the first and last thirds of
#    the run (after a warm-up of 3 samples; flat = the last third's peak within
#    10% + 1 MiB of the first's), and their growth per 100k records over the
#    second half. Exit status 1 when a check fails or memory grows.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-build}
N=${2:-1000000}
W=${3:-2}
C=${4:-100000}
DS=$ROOT/$BUILD/datasynth
[ -x "$DS" ] || DS=$BUILD/datasynth
if [ -n "${SOAK_DIR:-}" ]; then
  DIR=$SOAK_DIR
  mkdir -p "$DIR"
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
SEED=${SOAK_SEED:-11}
# The CLI default (constrained decoding): with the small model nearly every
# record is valid. SOAK_CONSTRAIN=none with a better-trained SOAK_MODEL mixes
# invalid records into the id sequence (the 1-epoch model then produces
# almost only invalid ones: do not combine the two).
CONSTRAIN=${SOAK_CONSTRAIN:-auto}

if [ -n "${SOAK_MODEL:-}" ]; then
  MODEL=$SOAK_MODEL
else
  MODEL=$DIR/model
  rm -rf "$MODEL"
  echo "training a small model on examples/telco_churn_2k.csv ..."
  "$DS" train --input "$ROOT/examples/telco_churn_2k.csv" --field-delimiter , --model-dir "$MODEL" \
    --tokenizer char --epochs 1 --embedding-dim 32 --rnn-units 64 --batch-size 32 --seq-length 64 \
    --seed 5 --early-stopping=false 2>"$DIR/train.log" || { cat "$DIR/train.log"; exit 1; }
  tail -n 2 "$DIR/train.log"
fi

OUT=$DIR/soak.jsonl
rm -f "$OUT" "$OUT".partial "$OUT".progress.json
echo "generating $N records with $W workers -> $OUT"
start=$EPOCHREALTIME
"$DS" generate --model-dir "$MODEL" --num-lines "$N" --parallelism "$W" --seed "$SEED" \
  --format jsonl --max-invalid 1000000000 --constrain "$CONSTRAIN" --output "$OUT" --overwrite 2>"$DIR/generate.log" &
pid=$!

# Memory: one sample a second, main process and workers (its children):
# VmRSS (resident, shared library pages included) and RssAnon (anonymous
# memory: where a leak would show).
echo "t_s,records,main_rss_kb,main_anon_kb,workers_rss_kb,workers_anon_kb,workers" > "$DIR/memory.csv"
mem() { awk '/^VmRSS:/ {r=$2} /^RssAnon:/ {a=$2} END {print (r ? r : 0), (a ? a : 0)}' "/proc/$1/status" 2>/dev/null || echo "0 0"; }
while kill -0 $pid 2>/dev/null; do
  t=$(awk -v a="$EPOCHREALTIME" -v b="$start" 'BEGIN {printf "%.1f", a - b}')
  read -r main main_anon < <(mem $pid)
  wr=0; wa=0; wn=0
  for c in $(pgrep -P $pid 2>/dev/null || cat /proc/$pid/task/*/children 2>/dev/null); do
    read -r r a < <(mem "$c")
    wr=$((wr + r)); wa=$((wa + a)); wn=$((wn + 1))
  done
  recs=$(grep -o '"records": *[0-9]*' "$OUT.progress.json" 2>/dev/null | grep -o '[0-9]*$' || true)
  recs=${recs:--1}
  [ "$main" != 0 ] && [ "$recs" -ge 0 ] && echo "$t,$recs,$main,$main_anon,$wr,$wa,$wn" >> "$DIR/memory.csv"
  sleep 1
done
wait $pid || { echo "generation failed:"; tail -n 5 "$DIR/generate.log"; exit 1; }
end=$EPOCHREALTIME
tail -n 1 "$DIR/generate.log"

# Independent reference for the first chunk: 1 worker, same seed.
REF=$DIR/ref.jsonl
FIRST_VALID=$(python3 - "$OUT" "$C" <<'EOF'
import sys
n = 0
with open(sys.argv[1], 'rb') as f:
    for i, line in enumerate(f):
        if i == int(sys.argv[2]):
            break
        n += b'"valid":true' in line
print(n)
EOF
)
"$DS" generate --model-dir "$MODEL" --num-lines "$FIRST_VALID" --parallelism 1 --seed "$SEED" \
  --format jsonl --max-invalid 1000000000 --constrain "$CONSTRAIN" --output "$REF" --overwrite 2>/dev/null

python3 - "$OUT" "$N" "$C" "$DIR/memory.csv" "$REF" "$DIR/chunks.csv" "$start" "$end" <<'EOF'
import csv, hashlib, json, sys
out, n_want, chunk, mem_path, ref, chunks_path, t0, t1 = sys.argv[1:9]
n_want, chunk = int(n_want), int(chunk)
problems = []
valid = invalid = 0
expect_id = 0
gaps = repeats = 0
rows = []
h = hashlib.sha256(); cv = ci = 0; first_lines = []
last_valid = None
with open(out, 'rb') as f:
    for i, line in enumerate(f):
        j = json.loads(line)
        rid = j['id']
        if rid != expect_id and len(problems) < 5:
            problems.append(f'line {i}: id {rid}, expected {expect_id}')
        if rid == expect_id:
            expect_id += 1
        elif rid < expect_id:
            repeats += 1
        else:
            gaps += rid - expect_id
            expect_id = rid + 1
        last_valid = j['valid']
        if j['valid']: valid += 1; cv += 1
        else: invalid += 1; ci += 1
        h.update(line)
        if i < chunk: first_lines.append(line)
        if (i + 1) % chunk == 0:
            rows.append((len(rows), cv, ci, h.hexdigest())); h = hashlib.sha256(); cv = ci = 0
if cv or ci: rows.append((len(rows), cv, ci, h.hexdigest()))
with open(chunks_path, 'w') as f:
    f.write('chunk,valid,invalid,sha256\n')
    for r in rows: f.write(','.join(map(str, r)) + '\n')
records = valid + invalid
ok = True
def check(cond, what):
    global ok
    print(('ok:   ' if cond else 'FAIL: ') + what)
    ok &= cond
check(valid == n_want, f'{valid} valid records (wanted {n_want}), {invalid} invalid')
check(gaps == 0 and repeats == 0, f'ids 0..{records - 1} each exactly once, in order (gaps {gaps}, repeats {repeats})' + ('; ' + '; '.join(problems) if problems else ''))
check(last_valid is True, 'the last record is valid (the run stopped at the N-th valid record)')
check(sum(r[1] + r[2] for r in rows) == records, f'{len(rows)} chunks of {chunk} records: counts add up')
# The reference stops at the last valid record of the first chunk.
head = first_lines
while head and b'"valid":true' not in head[-1]:
    head.pop()
head = b''.join(head)
refb = open(ref, 'rb').read()
nl = head.count(b'\n')
check(len(head) > 0 and refb == head, f'first chunk ({nl} records) identical to an independent 1-worker run')
secs = float(t1) - float(t0)
print(f'time: {secs:.1f} s, {valid / secs:.0f} valid records/s')
print('chunks (index, valid, invalid, sha256 prefix):')
for r in rows: print(f'  {r[0]:3d} {r[1]:7d} {r[2]:6d} {r[3][:16]}')

m = list(csv.DictReader(open(mem_path)))
print(f'memory: {len(m)} samples (memory.csv); KiB:')
print('     t_s   records  main_rss main_anon wrk_rss wrk_anon')
step = max(1, len(m) // 25)
for r in m[::step] + ([m[-1]] if m and (len(m) - 1) % step else []):
    print(f"  {float(r['t_s']):6.1f} {int(r['records']):9d} {int(r['main_rss_kb']):9d} "
          f"{int(r['main_anon_kb']):9d} {int(r['workers_rss_kb']):7d} {int(r['workers_anon_kb']):8d}")
body = m[3:] if len(m) > 9 else m
if len(body) >= 3:
    third = max(1, len(body) // 3)
    def peak(rs, k): return max(int(r[k]) for r in rs)
    half = body[len(body) // 2:]  # growth after the warm-up: the second half
    r0, r1 = int(half[0]['records']), int(half[-1]['records'])
    for k, name in (('main_rss_kb', 'main VmRSS'), ('main_anon_kb', 'main RssAnon'),
                    ('workers_rss_kb', 'workers VmRSS (sum)'), ('workers_anon_kb', 'workers RssAnon (sum)')):
        a, b = peak(body[:third], k), peak(body[-third:], k)
        growth = (int(half[-1][k]) - int(half[0][k])) / max(1, r1 - r0) * 100000
        flat = b <= a * 1.10 + 1024
        print(f'{name}: peak {a} KiB in the first third, {b} KiB in the last third, '
              f'{growth:+.0f} KiB per 100k records in the second half -> {"flat" if flat else "GROWING"}')
        ok &= flat
else:
    print('memory: too few samples to judge (run longer)')
sys.exit(0 if ok else 1)
EOF
