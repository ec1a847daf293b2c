#!/usr/bin/env python3
"""Cross-checks datasynth's per-column scores against SDMetrics (PyPI `sdmetrics`).

  sdmetrics_crosscheck.py --real R.csv --synthetic S.csv --json scores.json [--tolerance 1e-6]
                         [--real R2.csv --synthetic S2.csv --json scores2.json ...]

`scores.json` is datasynth's evaluation JSON (ReportToJson / `datasynth evaluate
--json`) for the same two files. For every evaluated column:
  * numeric columns:     datasynth's ks_complement must equal SDMetrics'
                         KSComplement within --tolerance (default 1e-6);
  * categorical columns: datasynth's tv_complement must equal SDMetrics'
                         TVComplement within --tolerance. (SDMetrics adds 1e-6 to
                         the real count of a value seen only in the synthetic
                         data; the effect on the score is far below 1e-6.)
Both drop missing values, as SDMetrics does. Then, over the columns of all
cases pooled, datasynth's Jensen-Shannon column scores must rank the columns
like SDMetrics' complements: Spearman correlation >= --min-rank-correlation
(default 0.7) when there are at least 5 columns and the complements differ.

With --write-golden FILE, also writes SDMetrics' values per case and column,
with an FNV-1a 64 fingerprint of each input file, as JSON: the committed
tests/data/golden/sdmetrics.json that tests/evaluate_test.cc compares against
where sdmetrics is not installed (scripts/make_golden.sh reruns this).

Exit status: 0 all checks pass, 1 a check failed, 77 sdmetrics/pandas missing.
Prints one line per column and a closing 'N passed, N failed' line.
"""
import argparse
import json
import sys


def fnv64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        for byte in f.read():
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", required=True, action="append")
    ap.add_argument("--synthetic", required=True, action="append")
    ap.add_argument("--json", required=True, action="append")
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--min-rank-correlation", type=float, default=0.7)
    ap.add_argument("--write-golden", metavar="FILE")
    args = ap.parse_args()
    try:
        import pandas as pd
        import sdmetrics
        from sdmetrics.single_column import KSComplement, TVComplement
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77

    if not len(args.real) == len(args.synthetic) == len(args.json):
        ap.error("give --real, --synthetic and --json the same number of times")

    def load(path):
        # Every field as text, empty field = missing, as datasynth reads it.
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])

    passed = failed = 0
    ours, theirs = [], []  # per-column JS scores and SDMetrics complements, all cases
    golden = []
    for real_path, synth_path, json_path in zip(args.real, args.synthetic, args.json):
        print(f"{real_path} vs {synth_path}:")
        golden.append({"real_fnv64": fnv64(real_path), "synthetic_fnv64": fnv64(synth_path),
                       "columns": []})
        with open(json_path) as f:
            report = json.load(f)
        real, synth = load(real_path), load(synth_path)
        for col in report["column_scores"]:
            name, kind = col["name"], col["type"]
            if kind == "numeric":
                r = pd.to_numeric(real[name])
                s = pd.to_numeric(synth[name], errors="coerce")
                ref = float(KSComplement.compute(r, s))
                mine = col["ks_complement"]
                metric = "KSComplement"
            elif kind == "categorical":
                ref = float(TVComplement.compute(real[name], synth[name]))
                mine = col["tv_complement"]
                metric = "TVComplement"
            else:
                print(f"  {name:32s} {kind:12s} (text: no SDMetrics counterpart)")
                continue
            golden[-1]["columns"].append({"name": name, "metric": metric, "value": ref})
            ok = mine is not None and abs(mine - ref) <= args.tolerance
            passed += ok
            failed += not ok
            ours.append(col["score"])
            theirs.append(ref)
            print(f"  {name:32s} {metric:13s} datasynth {mine!s:>22} sdmetrics {ref:.12f} "
                  f"{'ok' if ok else 'MISMATCH'}")
    # Pooled over every case: near-identical data alone ranks columns by noise.
    if len(ours) >= 5 and len(set(theirs)) > 1:
        rho = spearman(ours, theirs)
        ok = rho >= args.min_rank_correlation
        passed += ok
        failed += not ok
        print(f"rank agreement of JS column scores with the complements over {len(ours)} "
              f"columns: Spearman {rho:.3f} (>= {args.min_rank_correlation}) "
              f"{'ok' if ok else 'FAILED'}")
    print(f"{passed} passed, {failed} failed")
    if args.write_golden and failed == 0:
        doc = {"source": f"SDMetrics {sdmetrics.__version__} (scripts/make_golden.sh)",
               "tolerance": args.tolerance, "min_rank_correlation": args.min_rank_correlation,
               "cases": golden}
        with open(args.write_golden, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {args.write_golden}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
