"""Progress of long library calls: a tqdm bar when tqdm is installed and stderr
is a terminal (or progress=True), nothing otherwise (progress=False, not a
terminal, or DATASYNTH_PROGRESS=0)."""

from __future__ import annotations

import json
import math
import os
import sys


def _tqdm():
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm


def enabled(progress) -> bool:
    if progress is not None:
        return bool(progress) and _tqdm() is not None
    if os.environ.get("DATASYNTH_PROGRESS", "") in ("0", "false", "no", "off"):
        return False
    return _tqdm() is not None and sys.stderr is not None and sys.stderr.isatty()


class Events:
    """The callable the binding hands library events to (a JSON array), from the
    interpreter's thread. Keeps warnings and epoch results; renders progress."""

    def __init__(self, progress=None, unit="records", epoch_callback=None):
        self.show = enabled(progress)
        self.unit = unit
        self.bar = None
        self.epochs = []
        self.warnings = []
        self.infos = []
        self.epoch_callback = epoch_callback

    def __call__(self, text: str) -> None:
        for e in json.loads(text):
            kind = e.get("kind")
            if kind == "epoch":
                self.epochs.append(e)
                self._write(_epoch_line(e))
                if self.epoch_callback is not None:
                    self.epoch_callback(e)
            elif kind in ("warning", "info"):
                (self.warnings if kind == "warning" else self.infos).append(e["message"])
                prefix = f"[batch {e['batch']}] " if "batch" in e else ""
                self._write(prefix + ("warning: " if kind == "warning" else "") + e["message"])
            elif kind == "progress":
                self._bar(e["epochs"] * max(e["steps"], 1),
                          (e["epoch"] - 1) * e["steps"] + e["step"],
                          f"epoch {e['epoch']}/{e['epochs']}",
                          f"loss {e['loss']:.4f}, {e['tokens_per_s']:.0f} tokens/s")
            elif kind == "gen_progress":
                desc = (f"batch {e['batch'] + 1}/{e['batches']}" if "batch" in e else "generate")
                self._bar(e["wanted"], e["valid"], desc, f"{e['records_per_s']:.0f} {self.unit}/s")

    def _write(self, line: str) -> None:
        if not self.show:
            return
        tqdm = _tqdm()
        tqdm.write(line, file=sys.stderr)

    def _bar(self, total, n, desc, postfix) -> None:
        if not self.show:
            return
        if self.bar is None or self.bar.total != total or n < self.bar.n:
            self.close()
            self.bar = _tqdm()(total=total, desc=desc, unit="", leave=False, file=sys.stderr,
                               dynamic_ncols=True)
        self.bar.set_description(desc, refresh=False)
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.update(n - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _epoch_line(e: dict) -> str:
    val = e.get("val_loss")
    val = "" if val is None or (isinstance(val, float) and math.isnan(val)) else f"  val_loss {val:.4f}"
    batch = f"[batch {e['batch']}] " if "batch" in e else ""
    return (f"{batch}epoch {e['epoch']:>3}  loss {e['loss']:.4f}  accuracy {e['accuracy']:.4f}"
            f"{val}  {e['seconds']:.1f}s{'  *best' if e.get('best') else ''}")
