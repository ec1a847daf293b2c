#!/usr/bin/env bash
# Small tables keep how their columns go together (docs/quality.md "Unseen
# tables"): a 150-row table where a class sets x and x sets y (Pearson ~0.95),
# beside 9 independent noise columns. On tables this small the network stops
# early (its held-out loss turns up on the noise digits) before it learns the
# links, so the field tokenizer's default calibrates the kept weights to the
# training records' 2-way marginals (calibrate_pairs 3): with the default the
# links come out, with --calibrate false they do not (the failure this guards).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
python3 - "$TMP/t.csv" <<'EOF'
import random, sys
random.seed(3)
with open(sys.argv[1], 'w') as f:
    f.write('c,x,y,' + ','.join(f'n{i}' for i in range(9)) + '\n')
    for _ in range(150):
        c = random.choice('ABC')
        x = random.gauss({'A': 10, 'B': 20, 'C': 30}[c], 3)
        y = 2 * x + random.gauss(0, 2)
        f.write(f'{c},{x:.2f},{y:.2f},' + ','.join('%.2f' % random.uniform(0, 100) for _ in range(9)) + '\n')
EOF
TRAIN=(--input "$TMP/t.csv" --seed 1 --threads 1 --max-training-steps 60 --rnn-units 32 --embedding-dim 16)
links() {  # links CSV: "pearson(x,y) pearson(class index,x)" of the generated rows
  python3 - "$1" <<'EOF'
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))
def pearson(a, b):
    n = len(a); ma = sum(a) / n; mb = sum(b) / n
    cov = sum((p - ma) * (q - mb) for p, q in zip(a, b))
    va = sum((p - ma) ** 2 for p in a); vb = sum((q - mb) ** 2 for q in b)
    return cov / (va * vb) ** 0.5
x = [float(v['x']) for v in r]; y = [float(v['y']) for v in r]
c = [float('ABC'.index(v['c'])) for v in r]
print('%.2f %.2f' % (pearson(x, y), pearson(c, x)))
EOF
}
for mode in default off; do
  extra=(); [ $mode = off ] && extra=(--calibrate false)
  "$DS" train "${TRAIN[@]}" "${extra[@]}" -m "$TMP/m_$mode" >"$TMP/$mode.log" 2>&1 ||
    fail "train $mode: $(tail -3 "$TMP/$mode.log")"
  "$DS" generate -m "$TMP/m_$mode" -n 400 -o "$TMP/$mode.csv" --seed 2 -p 1 >/dev/null 2>&1 ||
    fail "generate $mode"
done
read -r xy cx <<<"$(links "$TMP/default.csv")"
read -r oxy ocx <<<"$(links "$TMP/off.csv")"
echo "pearson(x, y), pearson(class, x): default $xy $cx, --calibrate false $oxy $ocx (real ~0.95, ~0.93)"
python3 -c "import sys; sys.exit(0 if float('$xy') > 0.7 and float('$cx') > 0.7 else 1)" &&
  pass "default: the links come out (x~y $xy, class~x $cx)" || fail "default lost the links: $xy $cx"
python3 -c "import sys; sys.exit(0 if float('$oxy') < 0.5 else 1)" &&
  pass "--calibrate false: the network alone misses x~y ($oxy): the case is a real one" ||
  fail "without calibration x~y is $oxy: the test no longer shows the failure"
finish
