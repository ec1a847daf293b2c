#!/usr/bin/env python3
"""Quality and privacy figures of a synthetic table (docs/reference.md §8).

  tabular_quality.py TRAIN.csv HOLDOUT.csv SYNTH.csv [TABULAR.json] > metrics.json

Field distribution: per column, the Jensen-Shannon distance (base 2, in [0, 1])
between the training and the synthetic distribution. Numeric columns (every
non-missing training value parses as a number) are binned into 20 bins at the
training quantiles; other columns use their values (at most the 100 most frequent
training values, the rest pooled as "other"). A missing value (empty field) is a
bin of its own.

Field correlation: the mixed association matrix of each table: |Pearson r| for
numeric pairs, Theil's U (uncertainty coefficient U(row | column)) for category
pairs, correlation ratio for category / numeric pairs; columns with more than 100
distinct values that are not numeric are left out. The figure is the mean
absolute difference between the real and the synthetic matrix over all ordered
pairs (i != j). With TABULAR.json, the pairs are also split into pairs within one
batch and pairs across batches (the relationships that independent batches lose).

Privacy: the share of synthetic rows that equal a training row exactly, next to
the share of holdout rows (real rows not trained on) that equal a training row.
"""
import csv
import json
import math
import sys
from collections import Counter

import numpy as np

csv.field_size_limit(1 << 30)
MAX_LEVELS = 100
BINS = 20


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        header = next(r)
        rows = [row for row in r]
    return header, rows


def to_float(v):
    try:
        x = float(v)
        return x if math.isfinite(x) else None
    except ValueError:
        return None


def column_kinds(header, rows):
    kinds = []
    for c in range(len(header)):
        vals = [r[c] for r in rows if r[c] != ""]
        if vals and all(to_float(v) is not None for v in vals):
            kinds.append("num")
        elif len(set(vals)) <= MAX_LEVELS:
            kinds.append("cat")
        else:
            kinds.append("text")
    return kinds


def js_distance(p, q):
    p = np.asarray(p, float)
    q = np.asarray(q, float)
    p = p / p.sum() if p.sum() > 0 else p
    q = q / q.sum() if q.sum() > 0 else q
    m = 0.5 * (p + q)

    def kl(a, b):
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / b[mask])))

    d = 0.5 * kl(p, m) + 0.5 * kl(q, m)
    return math.sqrt(max(d, 0.0))


def distribution_distance(kind, real, synth):
    # Numbers with few distinct values (flags, counts, years) are compared value
    # by value; binning would merge them.
    if kind == "num" and len(set(v for v in real if v != "")) > BINS:
        rv = np.array([to_float(v) for v in real if v != ""], float)
        edges = np.unique(np.quantile(rv, np.linspace(0, 1, BINS + 1))) if len(rv) else np.array([0.0])

        def hist(vals):
            nums = [to_float(v) for v in vals if v != ""]
            miss = sum(1 for v in vals if v == "")
            bad = sum(1 for x in nums if x is None)
            nums = np.array([x for x in nums if x is not None], float)
            idx = np.clip(np.searchsorted(edges, nums, side="right") - 1, 0, max(len(edges) - 2, 0))
            h = np.bincount(idx, minlength=max(len(edges) - 1, 1)).astype(float)
            return np.concatenate([h, [miss, bad]])

        return js_distance(hist(real), hist(synth))
    top = [v for v, _ in Counter(real).most_common(MAX_LEVELS)]
    pos = {v: i for i, v in enumerate(top)}

    def counts(vals):
        h = np.zeros(len(top) + 1)
        for v in vals:
            h[pos.get(v, len(top))] += 1
        return h

    return js_distance(counts(real), counts(synth))


def codes(vals):
    ids = {}
    return np.array([ids.setdefault(v, len(ids)) for v in vals]), len(ids)


def entropy(counts):
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def theils_u(x, y):
    """U(x | y): the share of x's entropy explained by y."""
    cx, nx = codes(x)
    cy, ny = codes(y)
    hx = entropy(np.bincount(cx).astype(float))
    if hx == 0:
        return 1.0
    joint = np.zeros((ny, nx))
    np.add.at(joint, (cy, cx), 1)
    n = len(x)
    h_x_given_y = 0.0
    for row in joint:
        s = row.sum()
        if s > 0:
            h_x_given_y += s / n * entropy(row)
    return (hx - h_x_given_y) / hx


def corr_ratio(cats, nums):
    mask = ~np.isnan(nums)
    cats = [c for c, m in zip(cats, mask) if m]
    nums = nums[mask]
    if len(nums) < 3 or nums.var() == 0:
        return 0.0
    cc, n = codes(cats)
    sums = np.bincount(cc, weights=nums, minlength=n)
    cnts = np.bincount(cc, minlength=n)
    means = sums / np.maximum(cnts, 1)
    between = float((cnts * (means - nums.mean()) ** 2).sum())
    total = float(((nums - nums.mean()) ** 2).sum())
    return math.sqrt(between / total) if total > 0 else 0.0


def pearson(a, b):
    mask = ~np.isnan(a) & ~np.isnan(b)
    if mask.sum() < 3:
        return 0.0
    a, b = a[mask], b[mask]
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return abs(float(np.corrcoef(a, b)[0, 1]))


def assoc_matrix(kinds, cols):
    k = len(kinds)
    m = np.full((k, k), np.nan)
    nums = {}
    for c in range(k):
        if kinds[c] == "num":
            nums[c] = np.array([to_float(v) if v != "" else np.nan for v in cols[c]], float)
            nums[c] = np.where(np.isfinite(nums[c]), nums[c], np.nan)
    for i in range(k):
        for j in range(k):
            if i == j or kinds[i] == "text" or kinds[j] == "text":
                continue
            if kinds[i] == "num" and kinds[j] == "num":
                m[i, j] = pearson(nums[i], nums[j]) if i < j else m[j, i]
            elif kinds[i] == "cat" and kinds[j] == "cat":
                m[i, j] = theils_u(cols[i], cols[j])
            elif kinds[i] == "cat":
                m[i, j] = corr_ratio(cols[i], nums[j])
            else:
                m[i, j] = corr_ratio(cols[j], nums[i])
    return m


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    header, train = read(sys.argv[1])
    h2, holdout = read(sys.argv[2])
    h3, synth = read(sys.argv[3])
    assert header == h2, "holdout header differs"
    if h3 != header:
        sys.exit("synthetic header differs from the training header: %s" % h3[:5])
    batch_of = {}
    if len(sys.argv) > 4:
        spec = json.load(open(sys.argv[4]))
        for b, batch in enumerate(spec["batches"]):
            for c in batch["columns"]:
                batch_of[c] = b
    kinds = column_kinds(header, train)
    k = len(header)
    tcols = [[r[c] for r in train] for c in range(k)]
    scols = [[r[c] for r in synth] for c in range(k)]
    js = {header[c]: distribution_distance(kinds[c], tcols[c], scols[c]) for c in range(k)}
    mr = assoc_matrix(kinds, tcols)
    ms = assoc_matrix(kinds, scols)
    diff = np.abs(mr - ms)
    within, across = [], []
    for i in range(k):
        for j in range(k):
            if i == j or np.isnan(diff[i, j]):
                continue
            if batch_of:
                (within if batch_of[header[i]] == batch_of[header[j]] else across).append(diff[i, j])
    valid = diff[~np.isnan(diff)]
    train_set = set(tuple(r) for r in train)
    copies = sum(1 for r in synth if tuple(r) in train_set)
    hold_copies = sum(1 for r in holdout if tuple(r) in train_set)
    # Strong real relationships (association >= 0.3) across batches: how much of
    # each survives, on average.
    strong = []
    for i in range(k):
        for j in range(k):
            if i != j and not np.isnan(mr[i, j]) and mr[i, j] >= 0.3 and batch_of and \
                    batch_of[header[i]] != batch_of[header[j]]:
                strong.append(diff[i, j])
    out = {
        "rows_train": len(train),
        "rows_synth": len(synth),
        "columns": k,
        "js_distance_mean": float(np.mean(list(js.values()))),
        "js_distance_max": float(np.max(list(js.values()))),
        "js_distance": js,
        "correlation_diff_mean": float(valid.mean()) if valid.size else 0.0,
        "correlation_diff_within_batches": float(np.mean(within)) if within else None,
        "correlation_diff_across_batches": float(np.mean(across)) if across else None,
        "correlation_diff_strong_across": float(np.mean(strong)) if strong else None,
        "strong_across_pairs": len(strong),
        "exact_copy_share": copies / max(len(synth), 1),
        "holdout_copy_share": hold_copies / max(len(holdout), 1),
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
