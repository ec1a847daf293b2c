#!/usr/bin/env bash
# mpirun with the pair calibration after training (docs/scale.md "The
# calibration, spread"): every rank generates its own range of each
# iteration's attempt ids and the integer counts are summed, so the calibrated
# weights and pair tables must be bitwise those of one rank, each rank must
# have generated about 1/N of the attempts, and its time must show in the
# profile's calibration phase.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
if ! why=$(mpi_available); then skip "mpirun calibration: $why"; finish; fi
small_field_job 2 4

train_ranks 1 2 3
line() { grep "^calibrate: mean total variation" "$1"; }
# It calibrated pairs, and the kept state measures closer to the targets.
python3 - "$(line "$TMP/log1")" <<'PY' && pass "1 rank: pairs calibrated, distance reduced" ||
import re, sys
m = re.search(r"\(([0-9]+) of them 2-way\) to the targets ([0-9.]+) -> ([0-9.]+)", sys.argv[1])
sys.exit(0 if m and int(m.group(1)) > 0 and float(m.group(3)) < 0.7 * float(m.group(2)) else 1)
PY
  fail "no pair calibration that helped: $(line "$TMP/log1" | cut -c1-200)"
ls "$TMP/m1"/weights-*-cal.bin >/dev/null 2>&1 && [ -s "$TMP/m1/pair_tables.bin" ] ||
  fail "no calibrated weights or pair tables: $(ls "$TMP/m1")"
for n in 2 3; do
  cmp -s "$(weights "$TMP/m1")" "$(weights "$TMP/m$n")" && cmp -s "$TMP/m1/pair_tables.bin" "$TMP/m$n/pair_tables.bin" &&
    pass "$n ranks: calibrated weights and pair tables bitwise those of 1 rank" ||
    fail "$n ranks: the calibrated model differs from 1 rank's"
  # 5 measurements (iterations 0-4; 240 records, so 12 x 240 = 2880 a
  # measurement, CalibrationSamples: 720, 720, 1440, 2880, 2880): about
  # 8640 / n attempts here; 5760 / n when the last step is kept unmeasured
  # after a steady fall (CalibrateOptions::skip_steady_last).
  python3 - "$(line "$TMP/log$n")" "$n" <<'PY' &&
import re, sys
m = re.search(r"with ([0-9, ]+) records, sampled over ([0-9]+) ranks \(([0-9]+) attempts on this one\)", sys.argv[1])
n = int(sys.argv[2])
total = sum(int(x) for x in m.group(1).split(", ")) if m else 0
want = 5760 if "its step unmeasured after a steady fall" in sys.argv[1] else 8640
sys.exit(0 if m and total == want and int(m.group(2)) == n and
         0.9 * total / n <= int(m.group(3)) <= 1.1 * total / n else 1)
PY
    pass "$n ranks: rank 0 generated 1/$n of the calibration's attempts" ||
    fail "$n ranks: the sampling is not split: $(line "$TMP/log$n" | grep -o '; measured[^;]*;')"
  [ "$(grep -cE "^mpi profile rank [0-9]: .*calibration [0-9.]+s \(cpu ([1-9]|0\.[0-9]*[1-9])" "$TMP/log$n")" = "$n" ] &&
    pass "$n ranks: every rank's calibration time in the profile" ||
    fail "$n ranks: profile lines: $(grep 'mpi profile' "$TMP/log$n" | grep -o 'calibration[^,;]*')"
done
# The targets come from rank 0: under dp each rank's noise is its own draw,
# yet the run must calibrate like one rank (deterministic noise makes the
# draws comparable: 1 and 2 ranks the same model).
"$DS" schema -i "$TMP/t.csv" -o "$TMP/s.json" 2>/dev/null || fail "schema template"
DP=(--input "$TMP/t.csv" --field-delimiter , --dp --dp-target-epsilon 8 --schema "$TMP/s.json" --epochs 1
    --embedding-dim 16 --rnn-units 24 --batch-size 32 --seed 9 --dp-deterministic-noise --threads 1)
for n in 1 2; do
  "${MPIRUN[@]}" -n $n "$DS" train "${DP[@]}" --model-dir "$TMP/dp$n" >/dev/null 2>"$TMP/dplog$n" ||
    fail "dp on $n ranks: $(tail -3 "$TMP/dplog$n")"
done
line "$TMP/dplog2" | grep -q "sampled over 2 ranks" && cmp -s "$(weights "$TMP/dp1")" "$(weights "$TMP/dp2")" &&
  pass "dp: the calibration spread over 2 ranks gives 1 rank's model" || fail "dp calibrated models differ"
finish
