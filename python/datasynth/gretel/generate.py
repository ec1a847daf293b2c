"""gretel_synthetics.generate: generate_text(config, ...) yielding gen_text records."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import NamedTuple, Optional

from .. import api
from ..api import Model
from .errors import TooManyInvalidError


class gen_text(NamedTuple):  # noqa: N801 (the reference's name)
    valid: Optional[bool] = None
    text: Optional[str] = None
    explain: Optional[str] = None
    delimiter: Optional[str] = None
    fields: Optional[tuple] = None

    def values_as_list(self):
        if self.fields is not None:
            return list(self.fields)
        if self.delimiter and self.text is not None:
            return self.text.split(self.delimiter)
        return None


def _records(model: Model, num: int, options: dict):
    """Every record (valid and invalid) of a library run of `num` valid records."""
    tmp = tempfile.mkdtemp(prefix="datasynth-gen-")
    try:
        path = os.path.join(tmp, "records.jsonl")
        model.generate_to_file(path, num, format="jsonl", **options)
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check(validator, text):
    """(valid, explain) of the reference's validator rule: False or an exception
    (its text is the explanation) makes a record invalid."""
    try:
        ok = validator(text)
    except Exception as err:  # the reference catches everything a validator raises
        return False, str(err)
    return (False, "line_validator returned False") if ok is False else (True, None)


def generate_text(config, start_string=None, line_validator=None, max_invalid=1000,
                  num_lines=None, parallelism=0, seed=None):
    """Yields gen_text(valid, text, explain, delimiter) records, valid and invalid,
    until num_lines (default config.gen_lines) are valid; more than max_invalid
    invalid ones raise TooManyInvalidError. Records from the library's own checks
    (field count, column rules) and from line_validator both count as invalid.
    start_string: a prefix of every record, or a list (one valid record each)."""
    model = Model.load(config.checkpoint_dir)
    want = int(num_lines if num_lines is not None else config.gen_lines)
    # The config's generation keys as they are now (the reference reads them at
    # generation time), the rest from the model.
    options = {"parallelism": parallelism, "max_invalid": max_invalid, "seed": seed,
               "temperature": config.gen_temp, "gen_chars": config.gen_chars,
               "predict_batch_size": config.predict_batch_size}
    if isinstance(start_string, (list, tuple)):
        options["prefixes"] = list(start_string)
        want = len(start_string)
    elif start_string is not None:
        options["start_string"] = start_string
    delim = model.delimiter or None
    valid = invalid = done = 0
    run = want
    while valid < want:
        records = _records(model, run, options)
        for r in records[done:]:
            done += 1
            ok, explain = bool(r["valid"]), r.get("explain") or None
            if ok and line_validator is not None:
                ok, explain = _check(line_validator, r["text"])
            fields = tuple(r["fields"]) if "fields" in r else None
            yield gen_text(ok, r["text"], explain, delim, fields)
            if ok:
                valid += 1
                if valid == want:
                    return
            else:
                invalid += 1
                if invalid > max_invalid:
                    raise TooManyInvalidError(f"too many invalid records: more than "
                                              f"max_invalid = {max_invalid}")
        if "prefixes" in options:
            return  # one record per start string: a rejected one is not retried
        # The same seed replays the records seen so far: ask for the ones missing.
        run += max(want - valid, 1) * 2
