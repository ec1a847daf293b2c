#!/usr/bin/env python3
"""dpmm peer for bench/dp_suite.sh: MST or PrivBayes (PyPI dpmm) on a CSV, given the
same public schema as datasynth (bench/schemas/*.json: categories and numeric bounds),
with dpmm's own DP binning (proc_epsilon 0.1 of the budget, as its defaults). A datetime
column is given to dpmm as a number (days since 1970-01-01, or seconds when its format
has a time of day) bounded by the schema's min_year .. max_year, and written back in
the schema's format.

  /work/venvs/dpmm/bin/python bench/dp_peer_dpmm.py mst|privbayes train.csv schema.json \
      EPSILON DELTA out.csv ROWS SEED
"""
import datetime as dt
import json
import sys

import numpy as np
import pandas as pd
from dpmm.pipelines import MSTPipeline, PrivBayesPipeline


def _unit(c):  # seconds per step of a datetime column's number
  return 1 if any(k in c.get("format", "") for k in ("%H", "%M", "%S", "%T")) else 86400


def _date_bounds(c):
  lo = dt.datetime(int(c["min_year"]), 1, 1, tzinfo=dt.timezone.utc)
  hi = dt.datetime(int(c["max_year"]), 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
  return lo.timestamp() // _unit(c), hi.timestamp() // _unit(c)


def main():
  method, train, schema, eps, delta, out, rows, seed = sys.argv[1:9]
  eps, delta, rows, seed = float(eps), float(delta), int(rows), int(seed)
  cols = json.load(open(schema))["columns"]
  df = pd.read_csv(train, keep_default_na=True)
  domain = {}
  for c in cols:
    if c["type"] == "categorical":
      df[c["name"]] = df[c["name"]].fillna("").astype(str)
      # The empty spelling (a missing value) is a category of every column, as in
      # datasynth's field tokenizer: data-independent, so the domain stays public.
      cats = [str(v) for v in c["values"]]
      domain[c["name"]] = {"categories": cats + ([""] if "" not in cats else [])}
    elif c["type"] in ("integer", "decimal"):
      df[c["name"]] = pd.to_numeric(df[c["name"]], errors="coerce").clip(c["min"], c["max"])
      domain[c["name"]] = {"lower": c["min"], "upper": c["max"]}
    elif c["type"] == "datetime":
      t = pd.to_datetime(df[c["name"]], format=c["format"], errors="coerce", utc=True)
      lo, hi = _date_bounds(c)
      df[c["name"]] = (t.map(lambda x: np.nan if pd.isna(x) else x.timestamp() // _unit(c))
                       .clip(lo, hi))
      domain[c["name"]] = {"lower": lo, "upper": hi}
    else:
      sys.exit(f"dp_peer_dpmm: column {c['name']}: type {c['type']} not supported here")
  pipe = {"mst": MSTPipeline, "privbayes": PrivBayesPipeline}[method](
      epsilon=eps, delta=delta, proc_epsilon=0.1 * eps)
  pipe.fit(df, domain=domain, random_state=seed)
  syn = pipe.generate(n_records=rows, random_state=seed)
  for c in cols:
    if c["type"] == "datetime":
      v = pd.to_numeric(syn[c["name"]], errors="coerce").round()
      syn[c["name"]] = v.map(lambda x: "" if pd.isna(x) else dt.datetime.fromtimestamp(
          x * _unit(c), tz=dt.timezone.utc).strftime(c["format"]))
    if c["type"] in ("integer", "decimal"):
      v = pd.to_numeric(syn[c["name"]], errors="coerce").round(c.get("decimals", 0))
      if c["type"] == "integer":
        syn[c["name"]] = v.map(lambda x: "" if pd.isna(x) else str(int(x)))
      else:
        syn[c["name"]] = v.map(lambda x: "" if pd.isna(x) else f"{x:.{c['decimals']}f}".rstrip("0").rstrip("."))
  syn[[c["name"] for c in cols]].to_csv(out, index=False)


if __name__ == "__main__":
  main()
