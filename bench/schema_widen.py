#!/usr/bin/env python3
# Generous public bounds for a `datasynth schema` template of an unseen table (the DP
# benchmark of docs/privacy.md, session 10): min -> 0 when the data min is >= 0 (else a
# round number below -1.5 x min), max -> the round number (1, 2, 5 x 10^k) >= 1.5 x max,
# a column named year -> 1900-2030. Both datasynth and the dpmm peers get the result.
#   bench/schema_widen.py template.json out.json
import json, math, sys
# generous public bounds: min -> 0 (if >= 0) or a round number below, max -> round number >= 1.5 x max
def up(x):
    if x <= 0: return 0.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x: return float(m * e)
s = json.load(open(sys.argv[1]))
for c in s["columns"]:
    if c.get("type") in ("decimal", "integer") and "max" in c and c["name"] != "year":
        c["min"] = 0.0 if c["min"] >= 0 else -up(-c["min"] * 1.5)
        c["max"] = up(c["max"] * 1.5)
    elif c["name"] == "year" and "max" in c:
        c["min"], c["max"] = 1900.0, 2030.0
json.dump(s, open(sys.argv[2], "w"), indent=1)
for c in s["columns"]: print(c["name"], c["type"], c.get("min"), c.get("max"), len(c.get("values", [])))
