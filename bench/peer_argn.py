#!/usr/bin/env python3
"""The TabularARGN peer (PyPI mostlyai-engine) for bench/quality_suite.sh.

usage: peer_argn.py TRAIN.csv SYNTH.csv --workspace DIR [--minutes 10] [--seed 0]

Its stronger setting: fixed column order (enable_flexible_generation=False)
and typed dates. Reads every field as text, then gives each column the type
the values allow, so that nothing is lost on the way in or out:
  * numbers: every non-empty value a decimal number (exponent allowed) without a redundant
    leading zero ("02134" stays text) -> numeric (integers kept integers);
  * dates: every non-empty value parses under one format of DATE_FORMATS ->
    datetime, encoded TABULAR_DATETIME, written back in that format;
  * anything else: text, AUTO encoding (categorical or character).
Empty fields are missing values. One torch thread, CPU. Runs the engine's
local API (split / analyze / encode / train / generate on a workspace dir)
and writes as many rows as TRAIN has. Prints one JSON line with the train and
generate wall and CPU seconds.
"""
import argparse
import json
import os
import re
import shutil
import sys
import time

NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
DATE_FORMATS = ["%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
                "%Y/%m/%d", "%m/%d/%Y", "%d/%m/%Y", "%m/%d/%Y %H:%M", "%d.%m.%Y"]


def column_kinds(df):
    """Returns {column: ("int"|"num"|"date"|"text", date format or None)}."""
    import pandas as pd
    kinds = {}
    for c in df.columns:
        v = df[c][df[c] != ""]
        if len(v) == 0:
            kinds[c] = ("text", None)
        elif v.map(lambda s: INTEGER.fullmatch(s) is not None and len(s) <= 17).all():
            kinds[c] = ("int", None)
        elif v.map(lambda s: NUMBER.fullmatch(s) is not None).all():
            kinds[c] = ("num", None)
        else:
            kinds[c] = ("text", None)
            if v.str.contains(r"[0-9]").all() and v.str.contains(r"[-/.]").all():
                for f in DATE_FORMATS:
                    parsed = pd.to_datetime(v, format=f, errors="coerce")
                    if parsed.notna().all():
                        kinds[c] = ("date", f)
                        break
    return kinds


def to_typed(df, kinds):
    import pandas as pd
    out = pd.DataFrame(index=df.index)
    for c, (k, f) in kinds.items():
        s = df[c].where(df[c] != "", None)
        if k == "int":
            out[c] = pd.to_numeric(s).astype("Int64")
        elif k == "num":
            out[c] = pd.to_numeric(s).astype("float64")
        elif k == "date":
            out[c] = pd.to_datetime(s, format=f)
        else:
            out[c] = s.astype("object")
    return out


def to_text(df, kinds, columns):
    import pandas as pd
    out = pd.DataFrame(index=df.index)
    for c in columns:
        k, f = kinds[c]
        s = df[c]
        if k == "int":
            s = pd.to_numeric(s, errors="coerce").round().astype("Int64").astype("string")
        elif k == "num":
            s = pd.to_numeric(s, errors="coerce").map(lambda x: "" if pd.isna(x) else repr(float(x)))
        elif k == "date":
            s = pd.to_datetime(s, errors="coerce").dt.strftime(f)
        out[c] = s.astype("string").fillna("").astype(str)
    return out


def cpu_seconds():
    t = os.times()  # this process and its waited-for children (the engine's workers)
    return t.user + t.system + t.children_user + t.children_system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("synth")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    import pandas as pd
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    from mostlyai import engine
    engine.init_logging()
    engine.set_random_state(a.seed)

    raw = pd.read_csv(a.train, dtype=str, keep_default_na=False, na_filter=False)
    kinds = column_kinds(raw)
    data = to_typed(raw, kinds)
    enc = {c: "TABULAR_DATETIME" for c, (k, _) in kinds.items() if k == "date"}
    shutil.rmtree(a.workspace, ignore_errors=True)
    ws = a.workspace

    w0, c0 = time.time(), cpu_seconds()
    engine.split(tgt_data=data, tgt_encoding_types=enc or None, workspace_dir=ws)
    engine.analyze(workspace_dir=ws)
    engine.encode(workspace_dir=ws)
    engine.train(workspace_dir=ws, max_training_time=a.minutes, enable_flexible_generation=False,
                 device="cpu")
    w1, c1 = time.time(), cpu_seconds()
    engine.generate(workspace_dir=ws, sample_size=len(raw), device="cpu")
    w2, c2 = time.time(), cpu_seconds()

    synth = pd.read_parquet(os.path.join(ws, "SyntheticData"))
    to_text(synth, kinds, list(raw.columns)).to_csv(a.synth, index=False)
    print(json.dumps({"train_wall_s": round(w1 - w0, 2), "train_cpu_s": round(c1 - c0, 2),
                      "gen_wall_s": round(w2 - w1, 2), "gen_cpu_s": round(c2 - c1, 2),
                      "rows": int(len(synth)),
                      "dates": [c for c, (k, _) in kinds.items() if k == "date"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
