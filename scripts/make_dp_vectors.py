#!/usr/bin/env python3
"""Writes tests/data/privacy/rdp_vectors.csv: epsilon of DP-SGD (Poisson-subsampled
Gaussian, add/remove-one) from Google's dp-accounting RdpAccountant, the reference
numbers that src/privacy/rdp_accountant.cc must match (tests/privacy_test.cc).

  python3 -m venv /tmp/dpvenv && /tmp/dpvenv/bin/pip install dp-accounting==0.6.0
  /tmp/dpvenv/bin/python scripts/make_dp_vectors.py

Orders are the reference's (gretel-synthetics / TF Privacy): 1 + x/20 for x = 1..99,
6..63, 128, 256, 512. Columns:
  q, sigma, steps, delta: the mechanism and target delta
  epsilon, order: dp_accounting's get_epsilon_and_optimal_order (improved conversion)
  epsilon_classic, order_classic: eps = min_a rdp(a) + log(1/delta)/(a-1) over the same
      dp_accounting RDP values (the pre-2020 TF Privacy conversion)
"""
import csv
from importlib.metadata import version
import math
import os
import sys

from absl import logging
import dp_accounting
import numpy as np

# dp_accounting warns (once per order) when the fractional-order series does not
# converge and drops that order; the C++ accountant does the same, silently.
logging.set_verbosity(logging.ERROR)

ORDERS = [1 + x / 20.0 for x in range(1, 100)] + list(range(6, 64)) + [128, 256, 512]
QS = [0.001, 0.01, 0.05, 0.2, 1.0]
SIGMAS = [0.5, 0.8, 1.1, 2.0, 5.0]
STEPS = [1, 100, 1000, 10000]
DELTAS = [1e-5, 1e-6, 1 / 7043]


def main():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = os.path.join(root, "tests", "data", "privacy", "rdp_vectors.csv")
  os.makedirs(os.path.dirname(out), exist_ok=True)
  rows = []
  for q in QS:
    for sigma in SIGMAS:
      for steps in STEPS:
        acc = dp_accounting.rdp.RdpAccountant(ORDERS)
        acc.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
                steps))
        rdp = acc.rdp
        for delta in DELTAS:
          eps, order = acc.get_epsilon_and_optimal_order(delta)
          classic = rdp - math.log(delta) / (np.array(ORDERS) - 1)
          k = int(np.nanargmin(classic))
          rows.append([q, sigma, steps, delta, eps, order, classic[k], ORDERS[k]])
  with open(out, "w", newline="") as f:
    f.write(f"# dp-accounting {version('dp-accounting')} RdpAccountant (add/remove one);"
            " written by scripts/make_dp_vectors.py\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["q", "sigma", "steps", "delta", "epsilon", "order", "epsilon_classic",
                "order_classic"])
    for r in rows:
      w.writerow([repr(float(r[0])), repr(float(r[1])), r[2], repr(float(r[3])),
                  repr(float(r[4])), repr(float(r[5])), repr(float(r[6])), repr(float(r[7]))])
  print(f"wrote {len(rows)} vectors to {out}", file=sys.stderr)


if __name__ == "__main__":
  main()
