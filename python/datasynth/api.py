"""train() and Model: the pandas-facing API over the library (in-process)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable

import pandas as pd

from . import _core
from ._frames import (frame_to_text, load_schema, save_schema, seeds_to_text, text_to_frame,
                      write_csv)
from ._progress import Events

TABULAR_KEYS = ("tabular_batch_size", "tabular_grouping", "tabular_header_groups",
                "tabular_condition_columns", "tabular_min_condition_gain",
                "tabular_parallel_batches", "tabular_association_rows", "tabular_seed_columns")
INPUT_PREFIX = "python_input"  # the training data while a run is resumable


def _plain(v):
    """numpy scalars and paths as JSON values."""
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict, str)):
        return v.item()
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return v


def _delimiter_from_name(path: str, config: dict) -> None:
    """A .csv / .tsv (.gz) file without field_delimiter is a table (as the CLI reads it):
    the name suggests ',' or tab, and the first lines can say ';' or '|' instead."""
    if "field_delimiter" in config:
        return
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".csv"):
        config["field_delimiter"] = _core.sniff_delimiter(path, ",")
    elif name.endswith(".tsv"):
        config["field_delimiter"] = _core.sniff_delimiter(path, "\t")


def _path_schema(path: str, delimiter: str):
    """The dtypes pandas reads a CSV file with (from its first rows), or None."""
    try:
        sample = pd.read_csv(path, sep=delimiter, nrows=10000)
    except Exception:  # not readable by pandas: columns come back as str
        return None
    return frame_to_text(sample)[2]


def _input_name(model_dir: str, ext: str) -> str:
    """A new file for the training data in model_dir (an interrupted run's input,
    which its resume reads, is never replaced)."""
    fd, path = tempfile.mkstemp(prefix=INPUT_PREFIX + "-", suffix=ext, dir=model_dir)
    os.close(fd)
    return path


def _prepare_input(data, model_dir: str, config: dict):
    """(input path, schema, file we wrote or None)."""
    if data is None:
        return "", None, None
    if isinstance(data, pd.DataFrame):
        header, columns, schema = frame_to_text(data)
        delim = config.setdefault("field_delimiter", ",")
        if delim != ",":
            raise ValueError("field_delimiter: a DataFrame is written with ',' (leave the key out)")
        path = _input_name(model_dir, ".csv")
        write_csv(path, header, columns)
        return path, schema, path
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        _delimiter_from_name(path, config)
        delim = config.get("field_delimiter") or ""
        schema = _path_schema(path, delim) if delim else {"version": 1, "text": True}
        return path, schema, None
    if isinstance(data, Iterable):
        path = _input_name(model_dir, ".txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for i, line in enumerate(data):
                if not isinstance(line, str):
                    raise TypeError(f"text line {i}: expected str, got {type(line).__name__}")
                if "\n" in line or "\r" in line:
                    raise ValueError(f"text line {i}: holds a line break (one record per line)")
                f.write(line + "\n")
        config["field_delimiter"] = ""
        return path, {"version": 1, "text": True}, path
    raise TypeError(f"data: expected a DataFrame, a CSV path or text lines, got {type(data).__name__}")


def train(data=None, model_dir=None, *, resume: bool = False, tabular: bool = False,
          progress=None, epoch_callback=None, **config) -> "Model":
    """Trains a model on `data` (a DataFrame, a CSV / text file path, or an iterable
    of text lines) into `model_dir` (None: a temporary directory that lives as long
    as the returned Model). `config` takes the library's keys (epochs, batch_size,
    rnn_units, field_delimiter, ...; tabular=True also the tabular_* keys), checked
    by its key table. Ctrl-C stops at the next step and raises KeyboardInterrupt;
    the last saved epoch stays, and train(None, model_dir, resume=True) continues."""
    config = {k: _plain(v) for k, v in config.items()}
    tab = {k: config.pop(k) for k in TABULAR_KEYS if k in config}
    if tab and not tabular:
        raise ValueError(f"{', '.join(tab)}: tabular keys need tabular=True")
    temporary = model_dir is None
    model_dir = tempfile.mkdtemp(prefix="datasynth-") if temporary else os.fspath(model_dir)
    created = not os.path.exists(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    if resume and data is None:
        schema = load_schema(model_dir)
        path = ""
        ours = None
    else:
        path, schema, ours = _prepare_input(data, model_dir, config)
    events = Events(progress, epoch_callback=epoch_callback)
    try:
        if tabular:
            summary = _core.train_tabular(path, model_dir, json.dumps(config), json.dumps(tab),
                                          resume, events)
        else:
            summary = _core.train(path, model_dir, json.dumps(config), resume, events)
    except KeyboardInterrupt as e:
        events.close()
        if os.path.exists(os.path.join(model_dir, "checkpoint.json")) or \
                os.path.exists(os.path.join(model_dir, "tabular_checkpoint.json")):
            if schema is not None:
                save_schema(model_dir, schema)  # a resumable run: its input and dtypes stay
            raise KeyboardInterrupt(f"{e}; from Python: datasynth.train(None, {model_dir!r}, "
                                    f"resume=True{', tabular=True' if tabular else ''})") from None
        _cleanup(model_dir, ours, created or temporary)
        raise
    except BaseException:
        events.close()
        _cleanup(model_dir, ours, created or temporary)
        raise
    events.close()
    if schema is not None:
        save_schema(model_dir, schema)
    for name in os.listdir(model_dir):  # no copy of the training data stays behind
        if name.startswith(INPUT_PREFIX + "-"):
            os.remove(os.path.join(model_dir, name))
    model = Model(model_dir, _temporary=temporary)
    model.summary = json.loads(summary)
    model.warnings = events.warnings
    return model


def _cleanup(model_dir: str, ours, remove_dir: bool) -> None:
    if ours is not None and os.path.exists(ours):
        os.remove(ours)
    if remove_dir and os.path.isdir(model_dir) and not os.listdir(model_dir):
        os.rmdir(model_dir)


class Model:
    """A trained model directory (ordinary or tabular), loaded with every check
    `datasynth generate` makes."""

    def __init__(self, model_dir, _temporary: bool = False):
        self.model_dir = os.fspath(model_dir)
        self.info = json.loads(_core.model_info(self.model_dir))
        self.schema = load_schema(self.model_dir)
        self.summary = None
        self.warnings = []
        if _temporary:
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.model_dir, True)

    @classmethod
    def load(cls, model_dir) -> "Model":
        return cls(model_dir)

    @property
    def tabular(self) -> bool:
        return bool(self.info["tabular"])

    @property
    def header(self) -> list:
        return self.info["spec" if self.tabular else "meta"]["header"]

    @property
    def is_text(self) -> bool:
        return not self.tabular and not self.header

    @property
    def delimiter(self) -> str:
        if self.tabular:
            return self.info["spec"]["delimiter"]
        return self.info["config"]["field_delimiter"] or ""

    def __repr__(self) -> str:
        kind = "tabular" if self.tabular else "text" if self.is_text else "table"
        return f"datasynth.Model({self.model_dir!r}, {kind}, {len(self.header)} columns)"

    def _options(self, num_rows, temperature, parallelism, seed, extra) -> dict:
        o = {k: _plain(v) for k, v in extra.items() if v is not None}
        for k, v in (("num_rows", num_rows), ("temperature", temperature),
                     ("parallelism", parallelism), ("seed", seed)):
            if v is not None:
                o[k] = _plain(v)
        return o

    def _seed_options(self, seed_fields, o: dict) -> None:
        columns, rows, per_row = seeds_to_text(seed_fields, self.schema)
        if self.tabular:
            o["seeds"] = {"columns": columns, "rows": rows, "per_row": per_row}
            return
        if self.is_text:
            raise ValueError("seed_fields: a text-line model has no fields (use start_string)")
        lead = self.header[:len(columns)]
        if sorted(columns) != sorted(lead):
            raise ValueError(f"seed_fields {columns}: a model trained without tabular=True takes "
                             f"seeds for leading columns only ({', '.join(self.header[:3])}, ...); "
                             "train with tabular=True and tabular_seed_columns for others")
        order = [columns.index(c) for c in lead]
        d = self.delimiter
        prefixes = [d.join(r[i] for i in order) + d for r in rows]
        if per_row:
            o["prefixes"] = prefixes
        else:
            o["start_string"] = prefixes[0]

    def generate_to_file(self, output, num_rows=None, *, seed_fields=None, temperature=None,
                         parallelism=None, seed=None, progress=None, **options) -> dict:
        """What `datasynth generate -o output` does (the same library call, the
        same bytes for the same settings); returns the run's summary."""
        o = self._options(num_rows, temperature, parallelism, seed, options)
        if seed_fields is not None:
            self._seed_options(seed_fields, o)
        events = Events(progress)
        try:
            if self.tabular:
                out = _core.generate_tabular(self.model_dir, os.fspath(output), json.dumps(o), events)
            else:
                out = _core.generate(self.model_dir, os.fspath(output), json.dumps(o), events)
        finally:
            events.close()
        summary = json.loads(out)
        summary["warnings"] = events.warnings
        return summary

    def generate(self, num_rows=None, seed_fields=None, temperature=None, parallelism=None,
                 seed=None, *, progress=None, **options):
        """Synthetic records: a DataFrame with the training columns and dtypes (a list
        of str for text-line models). num_rows None = the model's gen_lines; seed_fields
        a dict (every row) or a DataFrame / list of dicts (one row per seed row); seed
        None = 0, the CLI's default (the same seed gives the same records)."""
        tmp = tempfile.mkdtemp(prefix="datasynth-gen-")
        try:
            path = os.path.join(tmp, "synthetic.txt" if self.is_text else "synthetic.csv")
            if self.is_text:
                options.setdefault("format", "text")
            self.generate_to_file(path, num_rows, seed_fields=seed_fields, temperature=temperature,
                                  parallelism=parallelism, seed=seed, progress=progress, **options)
            if self.is_text:
                with open(path, encoding="utf-8", newline="\n") as f:
                    return f.read().split("\n")[:-1]
            header, columns = _core.read_csv_columns(path, self.delimiter or ",")
            return text_to_frame(header, columns, self.schema)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
