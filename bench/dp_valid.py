#!/usr/bin/env python3
# Rows of a synthetic CSV that break a public schema (field count, a category outside
# its list, a number outside [min, max] or an integer with a fraction; missing
# spellings allowed): bench/dp_valid.py synth.csv schema.json
import csv, json, sys
def check(synth, schema):
    cols = json.load(open(schema))["columns"]
    bad = n = 0
    with open(synth, newline="") as f:
        r = csv.reader(f); hdr = next(r)
        for row in r:
            n += 1
            ok = len(row) == len(cols)
            for c, v in zip(cols, row):
                if not ok: break
                if v in c.get("missing", []): continue
                t = c["type"]
                if t == "categorical": ok = v in c["values"]
                elif t in ("integer", "decimal"):
                    try: x = float(v); ok = c["min"] <= x <= c["max"] and (t != "integer" or x == int(x))
                    except ValueError: ok = False
                else: ok = v != ""
            bad += not ok
    return n, bad
if __name__ == "__main__":
    n, bad = check(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[1]}: {n} rows, {bad} invalid")
    sys.exit(1 if bad else 0)
