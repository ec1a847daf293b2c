import subprocess
import sys

import pytest

from conftest import ROOT, TELCO
from datasynth.gretel import TensorFlowConfig, generate_text, train


def test_gretel_example_runs(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "gretel_style.py"),
                        str(tmp_path / "work"), "1"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "100 valid lines" in r.stdout
    # A trained batch directory read back (the reference's mode="read").
    from datasynth.gretel import DataFrameBatch
    b = DataFrameBatch(mode="read", checkpoint_dir=str(tmp_path / "work" / "batch_checkpoints"))
    assert b.generate_all_batch_lines(num_lines=7, seed_fields=[{"churn": "No"}] * 7) == \
        {0: True, 1: True}
    out = b.batches_to_df()
    assert len(out) == 7 and (out["churn"] == "No").all()
    assert sorted(out.columns) == sorted(b.batches[0].headers + b.batches[1].headers)
    assert list(b.batches[1].synthetic_df.columns) == b.batches[1].headers


def test_config_keys():
    with pytest.raises(TypeError, match="unexpected keyword argument 'not_a_key'"):
        TensorFlowConfig(checkpoint_dir="x", not_a_key=1)
    with pytest.raises(ValueError, match="epochs"):
        TensorFlowConfig(checkpoint_dir="x", epochs=0)
    c = TensorFlowConfig(input_data_path="in.csv", checkpoint_dir="x", epochs=3)
    assert c.epochs == 3 and c.batch_size == 64 and c.gen_lines == 1000
    assert c.as_dict()["checkpoint_dir"] == "x"


def test_generate_text_validator(tmp_path):
    config = TensorFlowConfig(input_data_path=str(TELCO), checkpoint_dir=str(tmp_path / "m"),
                              field_delimiter=",", epochs=1, rnn_units=32, embedding_dim=16,
                              max_lines=300, seed=7, early_stopping=False)
    train(config)
    seen = []

    def every_other(line):
        seen.append(line)
        if len(seen) % 2 == 0:
            raise Exception("rejected")

    recs = list(generate_text(config, line_validator=every_other, num_lines=10, parallelism=1))
    valid = [r for r in recs if r.valid]
    bad = [r for r in recs if not r.valid]
    assert len(valid) == 10 and len(bad) >= 9
    assert all(r.explain == "rejected" for r in bad if r.text in seen)
    assert len(valid[0].values_as_list()) == 20
    # Without a validator: the library's own checks only.
    recs = list(generate_text(config, num_lines=5, start_string="Yes,"))
    assert sum(r.valid for r in recs) == 5
    assert all(r.text.startswith("Yes,") for r in recs if r.valid)
    with pytest.raises(Exception, match="too many invalid"):
        list(generate_text(config, line_validator=lambda line: False, num_lines=5, max_invalid=3))


def test_text_lines_without_a_delimiter(tmp_path):
    """No field_delimiter: text lines (the reference's rule), records without fields."""
    src = tmp_path / "lines.txt"
    src.write_text("".join(f"line number {i % 10} of the log\n" for i in range(400)))
    config = TensorFlowConfig(input_data_path=str(src), checkpoint_dir=str(tmp_path / "m"),
                              epochs=1, rnn_units=32, embedding_dim=16, seed=7,
                              tokenizer="char", early_stopping=False)
    train(config)
    recs = list(generate_text(config, num_lines=8))
    assert sum(r.valid for r in recs) == 8
    assert all(r.delimiter is None and r.values_as_list() is None for r in recs)
    assert all(isinstance(r.text, str) for r in recs)
