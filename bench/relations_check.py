#!/usr/bin/env python3
"""Share of synthetic rows that break an order relation of the train split.

A relation lo <= hi: two numeric columns (more than 10 distinct values) with lo <= hi on
every train row where both are present, at least 50 such rows, and lo < hi on more than 5%
of them. Prints the share of rows of each synthetic file that break at least one, and the
five relations broken most often (share per file).

usage: bench/relations_check.py TRAIN.csv SYNTH.csv [SYNTH2.csv ...]   (needs pandas)
"""
import itertools
import sys

import numpy as np
import pandas as pd


def relations(train):
    num = [c for c in train.columns
           if pd.api.types.is_numeric_dtype(train[c]) and train[c].nunique() > 10]
    out = []
    for a, b in itertools.permutations(num, 2):
        m = train[[a, b]].dropna()
        if len(m) >= 50 and (m[a] <= m[b]).all() and (m[a] < m[b]).mean() > 0.05:
            out.append((a, b))
    return out


def broken(df, a, b):
    x = pd.to_numeric(df[a], errors="coerce")
    y = pd.to_numeric(df[b], errors="coerce")
    return ((x > y) & x.notna() & y.notna()).values


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    train = pd.read_csv(sys.argv[1])
    synth = [pd.read_csv(p) for p in sys.argv[2:]]
    rel = relations(train)
    any_broken = []
    for s in synth:
        bad = np.zeros(len(s), bool)
        for a, b in rel:
            bad |= broken(s, a, b)
        any_broken.append(bad.mean() if len(s) else 0.0)
    print(f"relations {len(rel)}; rows breaking any:", " ".join(f"{v:.4f}" for v in any_broken))
    worst = sorted(rel, key=lambda r: -broken(synth[-1], *r).mean())[:5]
    for a, b in worst:
        print(f"  {a} <= {b}:", " ".join(f"{broken(s, a, b).mean():.4f}" for s in synth))


if __name__ == "__main__":
    main()
