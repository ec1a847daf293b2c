"""gretel_synthetics.batch: DataFrameBatch, a table trained as column batches.

The batches are datasynth's tabular mode: one model per batch of columns
(batch_size columns in header order, or batch_headers), later batches
conditioned on columns of earlier ones, joined back in the original order with
the original dtypes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import pandas as pd

from .. import api
from ..api import Model
from .config import TensorFlowConfig
from .errors import TooManyInvalidError

READ, WRITE = "read", "write"


@dataclass
class Batch:
    checkpoint_dir: str
    input_data_path: str
    headers: list
    config: Optional[TensorFlowConfig] = None
    synthetic_df: Optional[pd.DataFrame] = None
    validator: Optional[object] = field(default=None, repr=False)


class DataFrameBatch:
    def __init__(self, *, df: pd.DataFrame = None, batch_size: int = 15, batch_headers=None,
                 config=None, tokenizer=None, mode: str = WRITE, checkpoint_dir=None):
        if mode not in (READ, WRITE):
            raise ValueError("mode must be 'read' or 'write'")
        self.mode = mode
        self._tokenizer = tokenizer
        self._model = None
        self._synthetic = None
        if mode == READ:
            if checkpoint_dir is None:
                raise ValueError("checkpoint_dir is required in read mode")
            self.master_config = {"checkpoint_dir": os.fspath(checkpoint_dir)}
            self._model = Model.load(checkpoint_dir)
            groups = [b["columns"] for b in self._model.info["spec"]["batches"]]
            self._df = None
        else:
            if not isinstance(df, pd.DataFrame):
                raise ValueError("df must be a DataFrame in write mode")
            if not isinstance(config, dict) or "checkpoint_dir" not in config:
                raise ValueError("config must be a dict with a checkpoint_dir")
            self._df = df
            self.master_config = dict(config)
            self.master_config.setdefault("field_delimiter", ",")
            cols = [str(c) for c in df.columns]
            if batch_headers is not None:
                groups = [list(map(str, g)) for g in batch_headers]
            else:
                groups = [cols[i:i + batch_size] for i in range(0, len(cols), batch_size)]
        self.checkpoint_dir = self.master_config["checkpoint_dir"]
        self.batch_headers = groups
        self.batches = {
            i: Batch(checkpoint_dir=os.path.join(self.checkpoint_dir, f"batch_{i}"),
                     input_data_path=os.path.join(self.checkpoint_dir, f"batch_{i}", "train.csv"),
                     headers=g)
            for i, g in enumerate(groups)}

    def _keys(self) -> dict:
        keys = {k: v for k, v in self.master_config.items()
                if k not in ("checkpoint_dir", "input_data_path")}
        TensorFlowConfig(checkpoint_dir=self.checkpoint_dir, **keys)  # the reference's key check
        keys.pop("epoch_callback", None)
        if self._tokenizer is not None:
            keys.update(self._tokenizer.library_keys())
        return keys

    def create_training_data(self):
        """Checks the batches against the DataFrame (every column in exactly one
        batch); the training CSV is written by train_all_batches."""
        if self.mode == READ:
            raise RuntimeError("create_training_data needs write mode")
        cols = [str(c) for c in self._df.columns]
        flat = [c for g in self.batch_headers for c in g]
        missing = [c for c in cols if c not in flat]
        unknown = [c for c in flat if c not in cols]
        if missing or unknown or len(flat) != len(set(flat)):
            raise ValueError(f"batch_headers: every column exactly once (missing {missing}, "
                             f"unknown {unknown})")

    def train_all_batches(self):
        if self.mode == READ:
            raise RuntimeError("train_all_batches needs write mode")
        self.create_training_data()
        keys = self._keys()
        self._model = api.train(self._df, self.checkpoint_dir, tabular=True,
                                tabular_header_groups=self.batch_headers, **keys)

    def generate_all_batch_lines(self, max_invalid=1000, raise_on_exceed_invalid=False,
                                 num_lines=None, seed_fields=None, parallelism=0, seed=None):
        """Generates every batch (batch 0 seeded by seed_fields: a dict for every row,
        or a list of dicts / DataFrame, one row each). Returns {batch: done}."""
        if self._model is None:
            self._model = Model.load(self.checkpoint_dir)
        try:
            self._synthetic = self._model.generate(num_lines, seed_fields=seed_fields,
                                                   parallelism=parallelism, seed=seed,
                                                   max_invalid=max_invalid)
        except TooManyInvalidError:
            if raise_on_exceed_invalid:
                raise
            return {i: False for i in self.batches}
        names = {str(c): c for c in self._synthetic.columns}
        for b in self.batches.values():
            b.synthetic_df = self._synthetic[[names[h] for h in b.headers]]
        return {i: True for i in self.batches}

    def batches_to_df(self) -> pd.DataFrame:
        if self._synthetic is None:
            raise RuntimeError("no generated lines: run generate_all_batch_lines first")
        return self._synthetic.copy()
