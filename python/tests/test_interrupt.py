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
    # The signal lands a few tiny epochs after the callback sent it (the
    # library checks its cancel flag per step, Python its signals every 50 ms).
    done = len((d / "model_history.csv").read_text().splitlines()) - 1
    assert 1 <= done < 50
    m = datasynth.train(None, d, resume=True, progress=False, epochs=done + 1)
    assert m.summary["epochs_run"] == done + 1
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


CHILD = r"""
import signal, sys, datasynth, pandas as pd
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (see conftest)
df = pd.read_csv(sys.argv[1]).head(400)
def said(e):
    print("epoch", e["epoch"], flush=True)
datasynth.train(df, sys.argv[2], progress=False, epoch_callback=said, epochs=500, rnn_units=32,
                embedding_dim=16, seed=7, threads=2, batch_size=32, early_stopping=False)
"""


def test_ctrl_c_from_outside(tmp_path):
    """SIGINT from another process (a terminal's Ctrl-C) while the library trains."""
    import subprocess
    import sys
    import time
    from conftest import TELCO
    d = tmp_path / "m"
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(TELCO), str(d)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().startswith("epoch 1")
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 10
    assert p.returncode != 0 and "KeyboardInterrupt" in err and "resume" in err
    m = datasynth.train(None, d, resume=True, progress=False, epochs=2)
    assert m.summary["epochs_run"] >= 2


def test_ctrl_c_stops_generation(telco_model):
    import threading
    import time
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        telco_model.generate(10_000_000, seed=1)
    timer.join()
    assert time.monotonic() - t0 < 15


def test_generation_releases_the_gil(telco_model):
    import threading
    import time
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.01)

    t = threading.Thread(target=count)
    t.start()
    t0 = time.monotonic()
    telco_model.generate(50_000, seed=1)
    elapsed = time.monotonic() - t0
    stop.set()
    t.join()
    # The other thread ran while the library generated: with the GIL held it
    # would tick once or twice; released, about every 10 ms (a loaded machine
    # gives it less, hence a quarter).
    assert len(ticks) > max(5, 0.25 * elapsed / 0.01), (len(ticks), elapsed)
