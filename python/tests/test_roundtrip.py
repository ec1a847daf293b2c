import pandas as pd
import pytest

import datasynth
from conftest import TELCO, TINY


def test_dataframe_round_trip(telco, telco_model):
    out = telco_model.generate(50, seed=3)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(telco.columns)
    assert out.dtypes.to_dict() == telco.dtypes.to_dict()
    assert len(out) == 50
    # A categorical column keeps values from its training set.
    assert set(out["contract"]) <= set(telco["contract"])


def test_same_seed_same_records(telco_model):
    a = telco_model.generate(30, seed=11, parallelism=1)
    b = telco_model.generate(30, seed=11, parallelism=2)
    c = telco_model.generate(30, seed=12)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


def test_load_and_info(telco_model):
    m = datasynth.Model.load(telco_model.model_dir)
    assert m.header == telco_model.header
    assert m.info["config"]["epochs"] == 1
    assert m.info["meta"]["records"] == 400
    assert not m.tabular and not m.is_text
    pd.testing.assert_frame_equal(m.generate(10, seed=5), telco_model.generate(10, seed=5))
    # The training data does not stay in the model directory.
    import os
    assert not any(f.startswith("python_input") for f in os.listdir(m.model_dir))
    assert "python_dtypes.json" in os.listdir(m.model_dir)


def test_seed_fields_leading_columns(telco_model):
    out = telco_model.generate(20, seed_fields={"churn": "Yes"}, seed=1)
    assert (out["churn"] == "Yes").all() and len(out) == 20
    per_row = pd.DataFrame({"churn": ["Yes", "No", "Yes"]})
    out = telco_model.generate(seed_fields=per_row, seed=1)
    assert list(out["churn"]) == ["Yes", "No", "Yes"]
    with pytest.raises(ValueError, match="leading columns"):
        telco_model.generate(5, seed_fields={"contract": "Two year"})


def test_text_lines_model(tmp_path):
    lines = [f"the {c} fox number {i}" for i in range(300) for c in ("red", "blue")]
    m = datasynth.train(lines, tmp_path / "t", progress=False, tokenizer="char", **TINY)
    assert m.is_text
    out = m.generate(20, seed=2)
    assert isinstance(out, list) and len(out) == 20 and all(isinstance(x, str) for x in out)


def test_csv_path_input(tmp_path):
    m = datasynth.train(str(TELCO), tmp_path / "p", progress=False, max_lines=300, **TINY)
    out = m.generate(10, seed=1)
    real = pd.read_csv(TELCO)
    assert list(out.columns) == list(real.columns)
    assert out.dtypes.to_dict() == real.dtypes.to_dict()


def test_semicolon_csv_path_input(telco, tmp_path):
    """A European export named .csv (';' between fields, ',' decimals) is read as the
    CLI reads it: the delimiter found in its first lines."""
    path = tmp_path / "eu.csv"
    telco.head(300).to_csv(path, sep=";", decimal=",", index=False)
    m = datasynth.train(str(path), tmp_path / "eu", progress=False, **TINY)
    assert m.info["config"]["field_delimiter"] == ";"
    out = m.generate(10, seed=1)
    assert list(out.columns) == list(telco.columns)


def test_tabular_model_with_seeds(telco, tmp_path):
    m = datasynth.train(telco, tmp_path / "tab", tabular=True, tabular_batch_size=10,
                        progress=False, **TINY)
    assert m.tabular
    out = m.generate(15, seed_fields={"churn": "No"}, seed=4)
    assert list(out.columns) == list(telco.columns)
    assert out.dtypes.to_dict() == telco.dtypes.to_dict()
    assert (out["churn"] == "No").all() and len(out) == 15


def test_progress_disabled_prints_nothing(telco, tmp_path, capfd):
    m = datasynth.train(telco.head(200), tmp_path / "q", progress=False, **TINY)
    m.generate(5, progress=False)
    assert capfd.readouterr().err == ""
