import numpy as np
import pandas as pd

import datasynth
from datasynth._frames import frame_to_text, text_to_frame
from conftest import TINY


def frame(n=240):
    rng = np.random.default_rng(1)
    ints = rng.integers(0, 50, n)
    return pd.DataFrame({
        "i": ints.astype("int64"),
        "i32": ints.astype("int32"),
        "f": np.round(rng.normal(10, 2, n), 2),
        "b": rng.integers(0, 2, n).astype(bool),
        "s": pd.array(rng.choice(["x", "y", "z"], n), dtype="string"),
        "c": pd.Categorical(rng.choice(["lo", "mid", "hi"], n), categories=["lo", "mid", "hi"],
                            ordered=True),
        "d": pd.to_datetime("2021-01-01") + pd.to_timedelta(rng.integers(0, 300, n), unit="D"),
        "ni": pd.array([None if k % 7 == 0 else int(k % 5) for k in range(n)], dtype="Int64"),
        "nb": pd.array([None if k % 9 == 0 else bool(k % 2) for k in range(n)], dtype="boolean"),
        "ns": pd.array([pd.NA if k % 5 == 0 else f"v{k % 4}" for k in range(n)], dtype="string"),
        "o": [None if k % 6 == 0 else f"o{k % 3}" for k in range(n)],
        "ci": pd.Categorical(rng.choice([1, 2, 3], n)),
    })


def test_text_round_trip_exact():
    df = frame()
    header, columns, schema = frame_to_text(df)
    back = text_to_frame(header, columns, schema)
    assert back.dtypes.to_dict() == df.dtypes.to_dict()
    pd.testing.assert_frame_equal(back, df)


def test_float_and_tz_text():
    df = pd.DataFrame({"f": [0.1 + 0.2, -0.0, 1e-3, 2.0, np.nan],
                       "t": pd.to_datetime(["2020-01-01 10:00:00"] * 4 + [None]).tz_localize(
                           "Europe/Berlin")})
    header, columns, schema = frame_to_text(df)
    assert columns[0] == ["0.3", "0", "0.001", "2", ""]
    back = text_to_frame(header, columns, schema)
    assert back.dtypes.to_dict() == df.dtypes.to_dict()
    assert back["t"].equals(df["t"])


def test_generated_dtypes(tmp_path):
    df = frame()
    m = datasynth.train(df, tmp_path / "m", progress=False, **TINY)
    out = m.generate(40, seed=1)
    assert list(out.columns) == list(df.columns)
    assert out.dtypes.to_dict() == df.dtypes.to_dict()
    assert set(out["c"].dropna()) <= {"lo", "mid", "hi"} and out["c"].cat.ordered
    assert out["ni"].isna().any() or out["ni"].notna().all()  # nullable stays nullable
    # Loaded back later: the dtypes come from python_dtypes.json.
    again = datasynth.Model.load(tmp_path / "m").generate(40, seed=1)
    pd.testing.assert_frame_equal(out, again)
