#!/usr/bin/env python3
"""Writes tests/data/privacy/split_vectors.csv: epsilon of DP-SGD (Poisson-subsampled
Gaussian, `steps` steps) composed with the TWO Gaussian measurements of the pair
calibration (src/train/calibrate.h): all pair histograms with noise multiplier
sigma_m / sqrt(f) (selection), then the targets with sigma_m / sqrt(1 - f), from
Google's dp-accounting RdpAccountant. tests/pair_tables_test.cc checks that the C++
accountant's single AddGaussian(sigma_m) (what the trainer charges) gives the same
epsilon and order.

  /work/venvs/dpmm/bin/python scripts/make_dp_split_vectors.py   (dp-accounting 0.6.0)
"""
import csv
from importlib.metadata import version
import math
import os
import sys

from absl import logging
import dp_accounting

logging.set_verbosity(logging.ERROR)
ORDERS = [1 + x / 20.0 for x in range(1, 100)] + list(range(6, 64)) + [128, 256, 512]
F = 0.25  # kSelectionShare
CASES = [  # q, sigma, steps, sigma_m, delta
    (0.0909, 9.0, 166, 3.2, 1 / 5634), (0.0909, 1.5, 166, 1.0, 1 / 5634),
    (0.0909, 0.9, 166, 2.5, 1 / 5634), (0.01, 1.1, 1000, 10.0, 1e-5), (1.0, 5.0, 10, 0.7, 1e-6)]


def main():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = os.path.join(root, "tests", "data", "privacy", "split_vectors.csv")
  with open(out, "w", newline="") as f:
    f.write(f"# dp-accounting {version('dp-accounting')} RdpAccountant (add/remove one), DP-SGD"
            f" composed with Gaussians sigma_m/sqrt({F}) and sigma_m/sqrt(1-{F}); written by"
            " scripts/make_dp_split_vectors.py\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["q", "sigma", "steps", "sigma_m", "delta", "epsilon", "order"])
    for q, sigma, steps, sm, delta in CASES:
      acc = dp_accounting.rdp.RdpAccountant(ORDERS)
      acc.compose(dp_accounting.ComposedDpEvent([
          dp_accounting.SelfComposedDpEvent(
              dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps),
          dp_accounting.GaussianDpEvent(sm / math.sqrt(F)),
          dp_accounting.GaussianDpEvent(sm / math.sqrt(1 - F))]))
      eps, order = acc.get_epsilon_and_optimal_order(delta)
      w.writerow([repr(q), repr(sigma), steps, repr(sm), repr(delta), repr(float(eps)),
                  repr(float(order))])
  print(f"wrote {len(CASES)} vectors to {out}", file=sys.stderr)


if __name__ == "__main__":
  main()
