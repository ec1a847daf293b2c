import pytest

import datasynth
from datasynth import _progress
from conftest import TINY


def test_no_progress_without_a_terminal(monkeypatch):
    monkeypatch.delenv("DATASYNTH_PROGRESS", raising=False)
    assert not _progress.enabled(None)  # pytest's stderr is not a terminal
    assert not _progress.enabled(False)


def test_tqdm_bar_when_asked(telco, tmp_path, capfd):
    pytest.importorskip("tqdm")
    m = datasynth.train(telco.head(200), tmp_path / "m", progress=True, **dict(TINY, epochs=2))
    m.generate(500, progress=True, seed=1)
    err = capfd.readouterr().err
    assert "epoch   1  loss" in err and "epoch   2  loss" in err  # the epoch lines
    assert "generate" in err  # the generation bar


def test_epoch_callback(telco, tmp_path):
    seen = []
    datasynth.train(telco.head(200), tmp_path / "m", progress=False, epoch_callback=seen.append,
                    **dict(TINY, epochs=3))
    assert [e["epoch"] for e in seen] == [1, 2, 3]
    assert all(e["loss"] > 0 for e in seen)
