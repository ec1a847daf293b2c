import os
import signal

import pandas as pd
import pytest

import datasynth
from conftest import TINY


def test_ctrl_c_leaves_a_resumable_model(telco, tmp_path):
    d = tmp_path / "m"
    cfg = dict(TINY, epochs=50)

    def interrupt_after_first_epoch(e):
        if e["epoch"] == 1:
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would

    with pytest.raises(KeyboardInterrupt) as e:
        datasynth.train(telco, d, progress=False, epoch_callback=interrupt_after_first_epoch, **cfg)
    assert "resume" in str(e.value)
    files = os.listdir(d)
    assert "checkpoint.json" in files and any(f.startswith("python_input-") for f in files)
    with pytest.raises(FileExistsError):  # a resumable run is not replaced unasked
        datasynth.train(telco, d, progress=False, **cfg)
    m = datasynth.train(None, d, resume=True, progress=False, epochs=2)
    assert m.summary["epochs_run"] == 2
    assert not any(f.startswith("python_input") for f in os.listdir(d))
    out = m.generate(10, seed=1)
    assert out.dtypes.to_dict() == telco.dtypes.to_dict()


def test_interrupt_from_a_callback_exception(telco, tmp_path):
    class Stop(Exception):
        pass

    def stop(e):
        raise Stop()

    with pytest.raises(Stop):
        datasynth.train(telco, tmp_path / "s", progress=False, epoch_callback=stop,
                        **dict(TINY, epochs=50))
    assert isinstance(pd.DataFrame(), pd.DataFrame)
