#!/usr/bin/env python3
"""Writes tests/data/privacy/composed_vectors.csv: epsilon of DP-SGD (Poisson-subsampled
Gaussian, `steps` steps) composed with ONE Gaussian mechanism of noise multiplier
sigma_m (the calibration marginals, src/train/calibrate.h), from Google's
dp-accounting RdpAccountant; tests/privacy_test.cc checks the C++ accountant
(RdpAccountant::AddSteps + AddGaussian) against it.

  python3 -m venv /tmp/dpvenv && /tmp/dpvenv/bin/pip install dp-accounting==0.6.0
  /tmp/dpvenv/bin/python scripts/make_dp_composed_vectors.py
"""
import csv
from importlib.metadata import version
import os
import sys

from absl import logging
import dp_accounting

logging.set_verbosity(logging.ERROR)
ORDERS = [1 + x / 20.0 for x in range(1, 100)] + list(range(6, 64)) + [128, 256, 512]
CASES = [  # q, sigma, steps, sigma_m, delta
    (0.0909, 4.145, 166, 26.9, 1 / 5634), (0.0909, 0.8746, 166, 5.0, 1 / 5634),
    (0.01, 1.1, 1000, 10.0, 1e-5), (0.2, 2.0, 100, 3.0, 1e-6), (1.0, 5.0, 10, 50.0, 1e-5)]


def main():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = os.path.join(root, "tests", "data", "privacy", "composed_vectors.csv")
  with open(out, "w", newline="") as f:
    f.write(f"# dp-accounting {version('dp-accounting')} RdpAccountant (add/remove one), DP-SGD"
            " composed with one Gaussian; written by scripts/make_dp_composed_vectors.py\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["q", "sigma", "steps", "sigma_m", "delta", "epsilon", "order"])
    for q, sigma, steps, sm, delta in CASES:
      acc = dp_accounting.rdp.RdpAccountant(ORDERS)
      acc.compose(dp_accounting.ComposedDpEvent([
          dp_accounting.SelfComposedDpEvent(
              dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps),
          dp_accounting.GaussianDpEvent(sm)]))
      eps, order = acc.get_epsilon_and_optimal_order(delta)
      w.writerow([repr(q), repr(sigma), steps, repr(sm), repr(delta), repr(float(eps)),
                  repr(float(order))])
  print(f"wrote {len(CASES)} vectors to {out}", file=sys.stderr)


if __name__ == "__main__":
  main()
