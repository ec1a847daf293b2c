#!/usr/bin/env python3
"""Summarises bench/structure_eval.sh runs as a markdown table.

Per dataset, marker setting and constraint level: the valid share of the
sampled records (valid / (valid + invalid), from the generate log), the
quality score of `datasynth evaluate` (train split as the real table, the 20%
holdout as the baseline), and category shares: the largest and the mean total
variation distance between the real (train) and synthetic distributions of
the category columns (column_rules.json), in points. For telco_churn also the
share of rows without internet service ('No internet service' in
online_security) and of fully consistent such rows (internet_service 'No' and
all six service columns 'No internet service').
"""
import argparse
import csv
import json
import os
import re
from collections import Counter

GEN_RE = re.compile(
    r"(?:generated|stopped after) (\d+) valid records \((\d+) invalid, [\d.]+% valid\) in (\S+)"
    r" with \d+ workers?, ([\d.]+) records/s")
SIX = ["online_security", "online_backup", "device_protection", "tech_support", "streaming_tv",
       "streaming_movies"]


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def shares(header, rows, col):
    i = header.index(col)
    c = Counter(r[i] for r in rows if len(r) == len(header))
    n = sum(c.values()) or 1
    return {k: v / n for k, v in c.items()}


def tvd(a, b):
    return 0.5 * sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def no_internet(header, rows):
    rows = [r for r in rows if len(r) == len(header)]
    if not rows or "online_security" not in header:
        return None, None
    i = header.index("online_security")
    six = [header.index(c) for c in SIX]
    inet = header.index("internet_service")
    any_ = sum(r[i] == "No internet service" for r in rows)
    full = sum(r[inet] == "No" and all(r[k] == "No internet service" for k in six) for r in rows)
    return 100 * any_ / len(rows), 100 * full / len(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--datasets", nargs="+", required=True)
    ap.add_argument("--tokenizer", default="char")
    ap.add_argument("--markers", nargs="+", default=["on", "off"])
    ap.add_argument("--levels", nargs="+", default=["none", "structure", "values"])
    a = ap.parse_args()
    w = a.work
    for d in a.datasets:
        train = os.path.join(w, f"{d}_train.csv")
        if not os.path.exists(train):
            continue
        rh, rrows = read_csv(train)
        base = os.path.join(w, f"baseline_{d}.json")
        bq = json.load(open(base))["quality"]["overall"] if os.path.exists(base) else None
        ni_real = no_internet(rh, rrows)
        print(f"\n### {d}  (holdout rows score {bq if bq is not None else '?'})\n")
        extra = " | no-internet rows % (consistent %)" if ni_real[0] is not None else ""
        print("| markers | constrain | valid share % | records/s | quality | category TVD max / mean (pts)"
              + extra + " |")
        print("|---|---|---|---|---|---" + ("|---" if extra else "") + "|")
        if ni_real[0] is not None:
            print(f"| real (train) | | | | {bq if bq is not None else ''} (holdout) | |"
                  f" {ni_real[0]:.1f} ({ni_real[1]:.1f}) |")
        for m in a.markers:
            rules_path = os.path.join(w, f"model_{d}_{a.tokenizer}_{m}", "column_rules.json")
            cats = []
            if os.path.exists(rules_path):
                cats = [c["name"] for c in json.load(open(rules_path))["columns"]
                        if c["type"] == "category"]
            for l in a.levels:
                stem = os.path.join(w, f"synth_{d}_{a.tokenizer}_{m}_{l}")
                log = os.path.join(w, f"gen_{d}_{a.tokenizer}_{m}_{l}.log")
                if not os.path.exists(log):
                    continue
                g = GEN_RE.search(open(log, errors="replace").read())
                valid = invalid = None
                rps = ""
                if g:
                    valid, invalid = int(g.group(1)), int(g.group(2))
                    rps = g.group(4)
                vs = f"{100 * valid / max(1, valid + invalid):.1f}" if g else "?"
                q = "?"
                if os.path.exists(stem + ".json"):
                    q = json.load(open(stem + ".json"))["quality"]["overall"]
                tv = ""
                ni = ""
                if os.path.exists(stem + ".csv"):
                    sh, srows = read_csv(stem + ".csv")
                    if srows and cats:
                        ds = [100 * tvd(shares(rh, rrows, c), shares(sh, srows, c)) for c in cats]
                        tv = f"{max(ds):.1f} / {sum(ds) / len(ds):.1f}"
                    if extra and srows:
                        s = no_internet(sh, srows)
                        ni = f" {s[0]:.1f} ({s[1]:.1f}) |"
                    elif extra:
                        ni = " |"
                print(f"| {m} | {l} | {vs} | {rps} | {q} | {tv} |{ni}")


if __name__ == "__main__":
    main()
