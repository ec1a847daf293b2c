#!/usr/bin/env python3
"""dpmm peer for bench/dp_suite.sh: MST or PrivBayes (PyPI dpmm) on a CSV, given the
same public schema as datasynth (bench/schemas/*.json: categories and numeric bounds),
with dpmm's own DP binning (proc_epsilon 0.1 of the budget, as its defaults).

  /work/venvs/dpmm/bin/python bench/dp_peer_dpmm.py mst|privbayes train.csv schema.json \
      EPSILON DELTA out.csv ROWS SEED
"""
import json
import sys

import numpy as np
import pandas as pd
from dpmm.pipelines import MSTPipeline, PrivBayesPipeline


def main():
  method, train, schema, eps, delta, out, rows, seed = sys.argv[1:9]
  eps, delta, rows, seed = float(eps), float(delta), int(rows), int(seed)
  cols = json.load(open(schema))["columns"]
  df = pd.read_csv(train, keep_default_na=True)
  domain = {}
  for c in cols:
    if c["type"] == "categorical":
      df[c["name"]] = df[c["name"]].fillna("").astype(str)
      domain[c["name"]] = {"categories": [str(v) for v in c["values"]]}
    elif c["type"] in ("integer", "decimal"):
      df[c["name"]] = pd.to_numeric(df[c["name"]], errors="coerce").clip(c["min"], c["max"])
      domain[c["name"]] = {"lower": c["min"], "upper": c["max"]}
    else:
      sys.exit(f"dp_peer_dpmm: column {c['name']}: type {c['type']} not supported here")
  pipe = {"mst": MSTPipeline, "privbayes": PrivBayesPipeline}[method](
      epsilon=eps, delta=delta, proc_epsilon=0.1 * eps)
  pipe.fit(df, domain=domain, random_state=seed)
  syn = pipe.generate(n_records=rows, random_state=seed)
  for c in cols:
    if c["type"] in ("integer", "decimal"):
      v = pd.to_numeric(syn[c["name"]], errors="coerce").round(c.get("decimals", 0))
      if c["type"] == "integer":
        syn[c["name"]] = v.map(lambda x: "" if pd.isna(x) else str(int(x)))
      else:
        syn[c["name"]] = v.map(lambda x: "" if pd.isna(x) else f"{x:.{c['decimals']}f}".rstrip("0").rstrip("."))
  syn[[c["name"] for c in cols]].to_csv(out, index=False)


if __name__ == "__main__":
  main()
