#!/usr/bin/env python3
"""Seeded train/holdout split of a CSV file (header kept in both parts).

usage: split_csv.py INPUT TRAIN_OUT HOLDOUT_OUT [--train-share 0.8] [--seed 1]

Rows are shuffled with random.Random(seed) and the first round(share * n)
go to TRAIN_OUT. Fields are re-written RFC 4180 (minimal quoting).
"""
import argparse
import csv
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("train_out")
    ap.add_argument("holdout_out")
    ap.add_argument("--train-share", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with open(a.input, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    random.Random(a.seed).shuffle(body)
    k = round(a.train_share * len(body))
    for path, part in ((a.train_out, body[:k]), (a.holdout_out, body[k:])):
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(part)
    print(f"{a.input}: {len(body)} rows -> {k} train, {len(body) - k} holdout")


if __name__ == "__main__":
    main()
