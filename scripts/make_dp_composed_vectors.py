#!/usr/bin/env python3
"""Writes the golden vectors of DP-SGD (Poisson-subsampled Gaussian, `steps` steps)
composed with Gaussian releases, from Google's dp-accounting RdpAccountant:

  tests/data/privacy/composed_vectors.csv  with ONE Gaussian of noise multiplier sigma_m
      (the calibration marginals, src/train/calibrate.h); tests/dp_schema_test.cc checks
      the C++ accountant (RdpAccountant::AddSteps + AddGaussian) against it;
  tests/data/privacy/split_vectors.csv     with the TWO Gaussian measurements of the pair
      calibration: all pair histograms at sigma_m / sqrt(f) (selection), then the targets
      at sigma_m / sqrt(1 - f); tests/pair_tables_test.cc checks that the C++ accountant's
      single AddGaussian(sigma_m) (what the trainer charges) gives the same epsilon and order.

  python3 -m venv /tmp/dpvenv && /tmp/dpvenv/bin/pip install dp-accounting==0.6.0
  /tmp/dpvenv/bin/python scripts/make_dp_composed_vectors.py
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
# q, sigma, steps, sigma_m, delta
COMPOSED = [
    (0.0909, 4.145, 166, 26.9, 1 / 5634), (0.0909, 0.8746, 166, 5.0, 1 / 5634),
    (0.01, 1.1, 1000, 10.0, 1e-5), (0.2, 2.0, 100, 3.0, 1e-6), (1.0, 5.0, 10, 50.0, 1e-5)]
SPLIT = [
    (0.0909, 9.0, 166, 3.2, 1 / 5634), (0.0909, 1.5, 166, 1.0, 1 / 5634),
    (0.0909, 0.9, 166, 2.5, 1 / 5634), (0.01, 1.1, 1000, 10.0, 1e-5), (1.0, 5.0, 10, 0.7, 1e-6)]


def write(name, what, cases, releases):
  """releases(sigma_m) -> the Gaussian noise multipliers composed with DP-SGD."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = os.path.join(root, "tests", "data", "privacy", name)
  with open(out, "w", newline="") as f:
    f.write(f"# dp-accounting {version('dp-accounting')} RdpAccountant (add/remove one), DP-SGD"
            f" composed with {what}; written by scripts/make_dp_composed_vectors.py\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["q", "sigma", "steps", "sigma_m", "delta", "epsilon", "order"])
    for q, sigma, steps, sm, delta in cases:
      acc = dp_accounting.rdp.RdpAccountant(ORDERS)
      acc.compose(dp_accounting.ComposedDpEvent([
          dp_accounting.SelfComposedDpEvent(
              dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)]
          + [dp_accounting.GaussianDpEvent(s) for s in releases(sm)]))
      eps, order = acc.get_epsilon_and_optimal_order(delta)
      w.writerow([repr(q), repr(sigma), steps, repr(sm), repr(delta), repr(float(eps)),
                  repr(float(order))])
  print(f"wrote {len(cases)} vectors to {out}", file=sys.stderr)


def main():
  write("composed_vectors.csv", "one Gaussian", COMPOSED, lambda sm: [sm])
  write("split_vectors.csv", f"Gaussians sigma_m/sqrt({F}) and sigma_m/sqrt(1-{F})", SPLIT,
        lambda sm: [sm / math.sqrt(F), sm / math.sqrt(1 - F)])


if __name__ == "__main__":
  main()
