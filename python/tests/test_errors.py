import json
import subprocess

import pytest

import datasynth
from conftest import TELCO, TINY


def cli_error(cli, *args):
    r = subprocess.run([cli, *args], capture_output=True, text=True)
    assert r.returncode != 0
    line = [x for x in r.stderr.splitlines() if x.startswith("datasynth: error: ")][0]
    return line[len("datasynth: error: "):]


def test_config_errors_match_the_cli(telco, tmp_path, cli):
    with pytest.raises(ValueError) as e:
        datasynth.train(telco, tmp_path / "m", epochs=-3)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"epochs": -3}))
    msg = cli_error(cli, "train", "-i", str(TELCO), "-m", str(tmp_path / "cli"), "-c", str(cfg))
    assert msg == f"{cfg}: {e.value}"
    assert "epochs" in str(e.value)
    with pytest.raises(ValueError, match="unknown config key 'no_such_key'"):
        datasynth.train(telco, tmp_path / "m", no_such_key=1)
    with pytest.raises(ValueError, match="tokenizer"):
        datasynth.train(telco, tmp_path / "m", tokenizer="nope")
    # A failed run leaves nothing behind.
    assert not (tmp_path / "m").exists()


def test_file_errors(tmp_path, telco_model, telco):
    with pytest.raises(FileNotFoundError):
        datasynth.train(str(tmp_path / "missing.csv"), tmp_path / "x")
    with pytest.raises(FileNotFoundError):
        datasynth.Model.load(tmp_path / "no_model")
    with pytest.raises(FileExistsError, match="overwrite"):
        datasynth.train(telco, telco_model.model_dir, progress=False, **TINY)
    assert not any(f.startswith("python_input") for f in __import__("os").listdir(telco_model.model_dir))


def test_bad_data(tmp_path):
    with pytest.raises(ValueError, match="too few records"):
        datasynth.train(["a", "b"], tmp_path / "t", progress=False, **TINY)
    with pytest.raises(ValueError, match="line break"):
        datasynth.train(["a\nb"], tmp_path / "t2")
    with pytest.raises(TypeError):
        datasynth.train(42, tmp_path / "t3")
    with pytest.raises(ValueError, match="tabular"):
        datasynth.train(["a"], tmp_path / "t4", tabular_batch_size=3)


def test_generation_errors(telco_model):
    with pytest.raises(ValueError, match="gen_lines"):
        telco_model.generate(-1)
    with pytest.raises(ValueError, match="gen_temp"):
        telco_model.generate(5, temperature=-1.0)
    with pytest.raises(ValueError):
        telco_model.generate(5, parallelism=2.5)
    with pytest.raises(TypeError):
        telco_model.generate(5, seed_fields="churn=Yes")
