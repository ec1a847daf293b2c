import os
import signal
import shutil
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TELCO = ROOT / "examples" / "telco_churn_2k.csv"
# Tiny networks and one epoch: every training run takes seconds.
TINY = dict(epochs=1, rnn_units=32, embedding_dim=16, seed=7, threads=1, batch_size=32,
            early_stopping=False)


def cli_path():
    p = os.environ.get("DATASYNTH_CLI") or str(ROOT / "build" / "datasynth")
    return p if os.path.exists(p) else shutil.which("datasynth")


@pytest.fixture(scope="session")
def cli():
    p = cli_path()
    if p is None:
        pytest.fail("the datasynth CLI is not built (set DATASYNTH_CLI or build build/datasynth)")
    return p


@pytest.fixture(scope="session")
def telco():
    return pd.read_csv(TELCO).head(400)


@pytest.fixture(scope="session")
def telco_model(telco, tmp_path_factory):
    import datasynth
    return datasynth.train(telco, tmp_path_factory.mktemp("telco") / "m", progress=False, **TINY)


@pytest.fixture(autouse=True)
def _sigint_raises():
    """Ctrl-C as in a terminal: a shell starts background jobs (CI runners,
    nohup) with SIGINT ignored, and Python then keeps it ignored. The tests
    that send SIGINT need Python's own handler, as an interactive user has."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)
