#!/usr/bin/env python3
"""Scoring helper of bench/quality_suite.sh (standard library only).

  quality_score.py record --train T --synth S --eval E.json --time TIME.txt
                          [--gen-time GTIME.txt] [--peer-json P.json] --method M -o R.json
      one result: SQS and its ceiling and the exact-copy shares (from
      `datasynth evaluate --json`), train wall / CPU seconds (GNU time
      "%e %U %S" files), generation rows/s and the type-valid share.
  quality_score.py table WORK [WORK2 ...] [--tables a,b] [--methods field,char,peer]
      the markdown table of every WORK/<table>/<method>/result.json (the first
      WORK holding a result wins), with the issue's bars for each non-peer row.

Type-valid (the same check for every method, types read off the train split):
a column whose train values are all numbers (no redundant leading zero) takes
numbers inside the train range (integers when the train values are); a column
whose values all parse under one date format takes real dates in that format;
a column evaluate scores as categorical (at most 50 distinct values, or at most
half of the values distinct) takes only values seen in train; other (text)
columns take anything. An empty field is valid where train has one.
"""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import sys

csv.field_size_limit(1 << 30)
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
                "%Y/%m/%d", "%m/%d/%Y", "%d/%m/%Y", "%m/%d/%Y %H:%M", "%d.%m.%Y"]


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def is_date(s, fmt):
    if not re.search(r"[0-9]", s):
        return False
    try:
        datetime.datetime.strptime(s, fmt)
        return True
    except ValueError:
        return False


def column_checker(values):
    """A predicate value -> valid, from one train column."""
    seen = set(values)
    present = [v for v in values if v != ""]
    allow_empty = len(present) < len(values)
    if not present:
        return lambda v: v == ""
    if all(NUMBER.fullmatch(v) for v in present):
        ints = all(INTEGER.fullmatch(v) for v in present)
        lo, hi = min(float(v) for v in present), max(float(v) for v in present)
        # Float noise: a train value written 6.542000000000001 is 6.542 (the field
        # tokenizer drops digits that change a value by less than 1e-12 of itself).
        lo, hi = lo - 1e-12 * abs(lo), hi + 1e-12 * abs(hi)
        pat = INTEGER if ints else NUMBER

        def number(v):
            if v == "":
                return allow_empty
            return pat.fullmatch(v) is not None and lo <= float(v) <= hi
        return number
    for fmt in DATE_FORMATS:
        if all(is_date(v, fmt) for v in present):
            return lambda v, fmt=fmt: (v == "" and allow_empty) or is_date(v, fmt)
    distinct = len(set(present))
    if distinct <= 50 or distinct * 2 <= len(present):
        return lambda v: v in seen
    return lambda v: v != "" or allow_empty


def type_valid_share(train_path, synth_path):
    header, rows = read_csv(train_path)
    sheader, srows = read_csv(synth_path)
    if not srows:
        return 0.0
    index = {c: i for i, c in enumerate(sheader)}
    checks = [(index.get(c), column_checker([r[j] for r in rows])) for j, c in enumerate(header)]
    ok = 0
    for r in srows:
        ok += all(i is not None and i < len(r) and check(r[i]) for i, check in checks)
    return ok / len(srows)


def read_time(path):
    """GNU time -f "%e %U %S" -> (wall, cpu)."""
    with open(path) as f:
        last = [ln for ln in f.read().split("\n") if ln.strip()][-1].split()
    return float(last[0]), float(last[1]) + float(last[2])


def record(a):
    with open(a.eval) as f:
        ev = json.load(f)
    q, base, priv = ev["quality"], ev.get("holdout_baseline") or {}, ev["privacy"]
    rows = ev["inputs"]["synthetic_rows"]
    r = {"method": a.method, "sqs": q["overall"], "ceiling": base.get("overall"),
         "parts": [q[k]["score"] if q.get(k) else None for k in
                   ("field_distribution_stability", "field_correlation_stability",
                    "deep_structure_stability")],
         "rows": rows, "train_rows": ev["inputs"]["real_rows"],
         "exact_copy_share": priv["exact_copy_share"],
         "holdout_exact_copy_share": priv.get("holdout_exact_copy_share"),
         "type_valid_share": type_valid_share(a.train, a.synth)}
    if a.peer_json:
        with open(a.peer_json) as f:
            p = json.loads([ln for ln in f.read().split("\n") if ln.startswith("{")][-1])
        r.update(train_wall_s=p["train_wall_s"], train_cpu_s=p["train_cpu_s"],
                 gen_rows_per_s=rows / max(p["gen_wall_s"], 1e-3))
    else:
        r["train_wall_s"], r["train_cpu_s"] = read_time(a.time)
        gw, gc = read_time(a.gen_time)
        r["gen_wall_s"], r["gen_cpu_s"] = gw, gc
        r["gen_rows_per_s"] = rows / max(gw, 1e-3)  # the whole process, model loading included
        if a.gen_log:  # generate's own figure: records/s of sampling, and its valid share
            with open(a.gen_log) as f:
                done = [ln for ln in f if ln.startswith("generated ")]
            m = re.search(r"([0-9][0-9,]*) records/s", done[-1]) if done else None
            if m:
                r["gen_rows_per_s"] = float(m.group(1).replace(",", ""))
            m = re.search(r"([0-9.]+)% valid", done[-1]) if done else None
            if m:
                r["reported_valid_share"] = float(m.group(1)) / 100
    if a.train_log:
        with open(a.train_log) as f:
            done = [ln.strip() for ln in f if ln.startswith("trained ")]
        if done:
            r["train_summary"] = done[-1]
    if a.note:
        r["note"] = a.note
    with open(a.output, "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r))


def fmt_pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


def find_result(works, t, m):
    """The first WORK dir (in order) holding t/m/result.json: (result, None), else (None, error)."""
    err = None
    for w in works:
        p = os.path.join(w, t, m, "result.json")
        if os.path.exists(p):
            with open(p) as f:
                return json.load(f), None
        e = os.path.join(w, t, m, "error.txt")
        if err is None and os.path.exists(e):
            with open(e) as f:
                err = (f.read().strip().split("\n") or [""])[-1][:80].replace("|", "/")
            err = f"failed: {err}" if err else "no result (running, or interrupted: run the suite again)"
    return None, err


def bars(r, peer):
    """The issue's bars for one result: within 5 of the ceiling, at most 1 below the peer,
    100% type-valid, exact copies no more frequent than the holdout's."""
    miss = []
    if r.get("ceiling") is not None and r["sqs"] < r["ceiling"] - 5:
        miss.append("ceiling")
    if peer is not None and r["sqs"] < peer["sqs"] - 1:
        miss.append("peer")
    if r["type_valid_share"] < 1:
        miss.append("valid")
    if r["exact_copy_share"] > (r.get("holdout_exact_copy_share") or 0):
        miss.append("copies")
    return "met" if not miss else "missed: " + ", ".join(miss)


def table(a):
    works = a.work
    tables = a.tables.split(",") if a.tables else sorted({
        os.path.basename(os.path.dirname(d)) for w in works
        for d in glob.glob(os.path.join(w, "*", "split"))})
    methods = a.methods.split(",")
    out = ["| table (train rows x cols) | method | SQS | ceiling | vs ceiling | vs peer "
           "| train wall (CPU) s | generate rows/s | type-valid | exact copies (holdout) | bars |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in tables:
        shape = ""
        for w in works:
            train = os.path.join(w, t, "split", "train.csv")
            if os.path.exists(train):
                header, rows = read_csv(train)
                shape = f" ({len(rows)} x {len(header)})"
                break
        peer, _ = find_result(works, t, "peer")
        for m in methods:
            r, err = find_result(works, t, m)
            if r is None:
                if err is not None:
                    out.append(f"| {t}{shape} | {m} | {err} | | | | | | | | |")
                    shape = ""
                continue
            ceil = r.get("ceiling")
            gap = "-" if ceil is None else f"{r['sqs'] - ceil:+.1f}"
            vs_peer = "-" if peer is None or m == "peer" else f"{r['sqs'] - peer['sqs']:+.1f}"
            sqs = f"**{r['sqs']:.1f}**" if m == "field" else f"{r['sqs']:.1f}"
            met = "" if m == "peer" else bars(r, peer)
            out.append(f"| {t}{shape} | {m} | {sqs} | {ceil:.1f} | {gap} | {vs_peer} "
                       f"| {r['train_wall_s']:.0f} ({r['train_cpu_s']:.0f}) "
                       f"| {r['gen_rows_per_s']:,.0f} | {fmt_pct(r['type_valid_share'])} "
                       f"| {fmt_pct(r['exact_copy_share'])} ({fmt_pct(r['holdout_exact_copy_share'])}) "
                       f"| {met} |")
            shape = ""
    print("\n".join(out))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    for k in ("--train", "--synth", "--eval", "--method"):
        r.add_argument(k, required=True)
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--time")
    r.add_argument("--gen-time")
    r.add_argument("--gen-log")
    r.add_argument("--train-log")
    r.add_argument("--peer-json")
    r.add_argument("--note")
    t = sub.add_parser("table")
    t.add_argument("work", nargs="+", help="WORK dirs, first match wins per table and method")
    t.add_argument("--tables")
    t.add_argument("--methods", default="field,char,peer")
    a = ap.parse_args()
    return record(a) if a.cmd == "record" else table(a)


if __name__ == "__main__":
    sys.exit(main())
