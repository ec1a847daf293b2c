"""DataFrames to and from the CSV text the library trains on and generates.

Each column is written as text the typed-field tokenizer reads back exactly
(integers as digits, floats with at most 9 decimals, booleans as True/False,
datetimes in one strftime format, missing values as empty fields), and its
pandas dtype is kept in a schema (python_dtypes.json in the model directory)
so that generated columns come back with the dtypes they went in with.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pandas as pd

SCHEMA_FILE = "python_dtypes.json"
SCHEMA_VERSION = 1


def _float_text(x: float) -> str:
    if x != x:  # NaN
        return ""
    if x == 0:
        return "0"
    return np.format_float_positional(x, precision=9, unique=True, trim="-")


def _datetime_format(s: pd.Series) -> str:
    v = s.dropna()
    if v.empty or ((v.dt.hour == 0) & (v.dt.minute == 0) & (v.dt.second == 0)
                   & (v.dt.microsecond == 0)).all():
        return "%Y-%m-%d"
    if (v.dt.microsecond == 0).all():
        return "%Y-%m-%d %H:%M:%S"
    return "%Y-%m-%d %H:%M:%S.%f"


def _kind(dtype) -> str:
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if isinstance(dtype, pd.StringDtype):
        return "string"
    return "object"


def _to_text(s: pd.Series, kind: str, spec: dict) -> list:
    na = s.isna().to_numpy()
    if kind == "float":
        out = [_float_text(float(x)) if not m else "" for x, m in zip(s.to_numpy(dtype=object), na)]
    elif kind == "datetime":
        v = s
        if getattr(s.dtype, "tz", None) is not None:
            v = s.dt.tz_convert("UTC").dt.tz_localize(None)
        spec["format"] = _datetime_format(v)
        out = v.dt.strftime(spec["format"]).fillna("").tolist()
    elif kind == "category":
        cats = s.cat.categories
        spec["categories"] = _column_schema(pd.Series(cats), "categories")
        spec["categories_text"] = _to_text(pd.Series(cats), _kind(cats.dtype), spec["categories"])
        spec["ordered"] = bool(s.cat.ordered)
        text = dict(zip(range(len(cats)), spec["categories_text"]))
        out = [text[c] if c >= 0 else "" for c in s.cat.codes.tolist()]
    else:  # int, bool, string, object
        out = ["" if m else str(x) for x, m in zip(s.tolist(), na)]
    return out


def _column_schema(s: pd.Series, name) -> dict:
    kind = _kind(s.dtype)
    spec = {"name": name if isinstance(name, (str, int, float, bool)) else str(name),
            "name_type": type(name).__name__, "dtype": str(s.dtype), "kind": kind,
            "has_na": bool(s.isna().any())}
    if kind == "datetime" and getattr(s.dtype, "tz", None) is not None:
        spec["tz"] = str(s.dtype.tz)
    if kind == "object":
        spec["na_value"] = "none" if any(x is None for x in s.tolist()) else "nan"
    return spec


def frame_to_text(df: pd.DataFrame) -> tuple[list[str], list[list[str]], dict]:
    """(header, columns of text, schema) of a DataFrame."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
    if df.shape[1] == 0:
        raise ValueError("the DataFrame has no columns")
    header = [str(c) for c in df.columns]
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise ValueError(f"duplicate column names: {', '.join(dup)}")
    columns, specs = [], []
    for i, name in enumerate(df.columns):
        s = df.iloc[:, i]
        spec = _column_schema(s, name)
        columns.append(_to_text(s, spec["kind"], spec))
        specs.append(spec)
    return header, columns, {"version": SCHEMA_VERSION, "columns": specs}


def write_csv(path: str, header: list[str], columns: list[list[str]]) -> None:
    """RFC 4180 CSV with ',' (pandas' quoting: minimal, lone empty field quoted)."""
    frame = pd.DataFrame(dict(zip(range(len(header)), columns)))
    frame.columns = header
    frame.to_csv(path, index=False, lineterminator="\n")


def _restore(values: list, spec: dict):
    kind, dtype = spec["kind"], spec["dtype"]
    s = pd.Series(values, dtype=object)
    empty = s == ""
    if kind in ("int", "float"):
        num = pd.to_numeric(s.where(~empty, None), errors="coerce")
        if kind == "int" and num.isna().any() and not dtype[0].isupper():
            warnings.warn(f"column {spec['name']!r}: missing or non-integer values; "
                          f"returned as Int64, not {dtype}", stacklevel=3)
            return num.astype("Float64").round().astype("Int64")
        return num.astype(dtype)
    if kind == "bool":
        b = s.map({"True": True, "False": False, "true": True, "false": False})
        if b.isna().any() or dtype == "boolean":
            return b.astype("boolean")
        return b.astype(bool)
    if kind == "datetime":
        t = pd.to_datetime(s.where(~empty, None), format=spec.get("format"), errors="coerce")
        if "tz" in spec:
            t = t.dt.tz_localize("UTC").dt.tz_convert(spec["tz"])
        try:
            return t.astype(dtype)
        except (TypeError, ValueError):
            return t
    if kind == "category":
        cats = _restore(spec["categories_text"], spec["categories"])
        lookup = dict(zip(spec["categories_text"], range(len(spec["categories_text"]))))
        codes = [lookup.get(v, -1) for v in values]
        return pd.Categorical.from_codes(codes, categories=pd.Index(cats), ordered=spec["ordered"])
    if kind == "string":
        out = s.astype(dtype)
        return out.mask(empty) if spec["has_na"] else out
    if spec.get("has_na"):
        return s.where(~empty, None if spec.get("na_value") == "none" else np.nan)
    return s


def text_to_frame(header: list[str], columns: list[list[str]], schema: dict | None) -> pd.DataFrame:
    """A DataFrame of generated columns, with the schema's dtypes and names (when given)."""
    if not schema:
        return pd.DataFrame(dict(zip(header, columns)), columns=header)
    specs = {str(c["name"]): c for c in schema["columns"]}
    data, names = {}, []
    for i, (h, col) in enumerate(zip(header, columns)):
        spec = specs.get(h)
        values = _restore(col, spec) if spec else pd.Series(col, dtype=object)
        name = spec["name"] if spec else h
        data[i] = values
        names.append(name)
    df = pd.DataFrame(data)
    df.columns = names
    return df


def save_schema(model_dir: str, schema: dict) -> None:
    tmp = os.path.join(model_dir, SCHEMA_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(schema, f, indent=1, default=str)
    os.replace(tmp, os.path.join(model_dir, SCHEMA_FILE))


def load_schema(model_dir: str) -> dict | None:
    path = os.path.join(model_dir, SCHEMA_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    if not isinstance(schema, dict) or schema.get("version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: not a datasynth dtype schema of version {SCHEMA_VERSION}")
    return schema


def seeds_to_text(seed_fields, schema: dict | None) -> tuple[list[str], list[list[str]], bool]:
    """(columns, rows of text, per_row) of seed fields: a dict (one set for every
    row), a list of dicts or a DataFrame (one set per generated row)."""
    if isinstance(seed_fields, dict):
        frame, per_row = pd.DataFrame([seed_fields]), False
    elif isinstance(seed_fields, pd.DataFrame):
        frame, per_row = seed_fields, True
    elif isinstance(seed_fields, (list, tuple)) and all(isinstance(x, dict) for x in seed_fields):
        frame, per_row = pd.DataFrame(list(seed_fields)), True
    else:
        raise TypeError("seed_fields: expected a dict, a list of dicts or a DataFrame, got "
                        f"{type(seed_fields).__name__}")
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise ValueError("seed_fields: no seed values given")
    specs = {str(c["name"]): c for c in (schema or {}).get("columns", [])}
    names, cols = [], []
    for i, name in enumerate(frame.columns):
        s = frame.iloc[:, i]
        spec = specs.get(str(name))
        if spec is not None and spec["kind"] != _kind(s.dtype):  # as the training column was written
            try:
                s = s.astype(spec["dtype"]) if spec["kind"] != "category" else s
            except (TypeError, ValueError):
                pass
        kind = spec["kind"] if spec is not None and spec["kind"] == _kind(s.dtype) else _kind(s.dtype)
        sub = dict(spec) if spec is not None else {}
        if kind == "category" and spec is not None:
            lookup = dict(zip(map(str, _restore(spec["categories_text"], spec["categories"])),
                              spec["categories_text"]))
            text = ["" if pd.isna(x) else lookup.get(str(x), str(x)) for x in s.tolist()]
        elif kind == "datetime" and spec is not None and "format" in spec:
            v = s.dt.tz_convert("UTC").dt.tz_localize(None) if "tz" in spec else s
            text = v.dt.strftime(spec["format"]).fillna("").tolist()
        else:
            text = _to_text(s, kind, sub)
        names.append(str(name))
        cols.append(text)
    rows = [list(r) for r in zip(*cols)]
    return names, rows, per_row
