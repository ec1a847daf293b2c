"""evaluate(): the quality and privacy report of a synthetic table."""

from __future__ import annotations

import html
import json
import os

import pandas as pd

from . import _core
from ._frames import frame_to_text


def _table(x, what: str):
    if isinstance(x, (str, os.PathLike)):  # read as `datasynth evaluate` reads it
        header, columns = _core.read_csv_columns(os.fspath(x), ",")
        return list(header), [list(c) for c in columns]
    if not isinstance(x, pd.DataFrame):
        raise TypeError(f"{what}: expected a DataFrame or a CSV path, got {type(x).__name__}")
    header, columns, _ = frame_to_text(x)
    return header, columns


class Report:
    """The report of datasynth.evaluate(): .score (0-100), .grade, .to_dict(),
    .save_html(path), and inline display in Jupyter (_repr_html_)."""

    def __init__(self, report):
        self._report = report
        self._dict = None

    @property
    def score(self) -> float:
        return self._report.overall

    @property
    def grade(self) -> str:
        return self._report.grade

    def to_dict(self) -> dict:
        if self._dict is None:
            self._dict = json.loads(self._report.to_json())
        return self._dict

    def to_json(self) -> str:
        return self._report.to_json()

    def to_html(self) -> str:
        return self._report.to_html()

    def save_html(self, path) -> None:
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(self._report.to_html())

    def _repr_html_(self) -> str:
        # The report is a whole page: in an iframe, its styles stay out of the notebook's.
        page = html.escape(self._report.to_html(), quote=True)
        return (f'<iframe srcdoc="{page}" style="width:100%;height:720px;border:0" '
                f'title="datasynth report"></iframe>')

    def __str__(self) -> str:
        return self._report.to_text()

    def __repr__(self) -> str:
        return f"<datasynth.Report score {self.score:.1f} ({self.grade})>"


def evaluate(real, synthetic, holdout=None, *, threads: int = 2, seed: int = 1) -> Report:
    """Scores `synthetic` against `real` (DataFrames or CSV paths), with an optional
    `holdout` of real rows not trained on (the ceiling and privacy baseline)."""
    rn, rc = _table(real, "real")
    sn, sc = _table(synthetic, "synthetic")
    hn, hc = _table(holdout, "holdout") if holdout is not None else (None, None)
    return Report(_core.evaluate(rn, rc, sn, sc, hn, hc, threads, seed))
