import json
import subprocess

import pandas as pd

import datasynth
from conftest import TELCO, TINY


def flags(cfg):
    out = []
    for k, v in cfg.items():
        out += [f"--{k}", str(v).lower() if isinstance(v, bool) else str(v)]
    return out


def weights(model_dir):
    # The weights file model_params.json names (a calibrated one ends in -cal.bin:
    # the field tokenizer's default calibration).
    params = json.loads((model_dir / "model_params.json").read_text())
    return (model_dir / params["datasynth"]["weights_file"]).read_bytes()


def test_python_and_cli_write_the_same_bytes(tmp_path, cli, telco_model):
    py_out, cli_out = tmp_path / "py.csv", tmp_path / "cli.csv"
    telco_model.generate_to_file(py_out, 200, seed=9, parallelism=2)
    subprocess.run([cli, "generate", "-m", telco_model.model_dir, "-n", "200", "--seed", "9",
                    "-p", "2", "-o", str(cli_out)], check=True, capture_output=True)
    assert py_out.read_bytes() == cli_out.read_bytes()
    # The DataFrame holds the same records (types restored).
    df = telco_model.generate(200, seed=9, parallelism=2)
    ref = pd.read_csv(cli_out, dtype=df.dtypes.to_dict())
    pd.testing.assert_frame_equal(df, ref)


def test_python_and_cli_train_the_same_model(tmp_path, cli):
    cfg = dict(TINY, max_lines=300)
    m = datasynth.train(str(TELCO), tmp_path / "py", progress=False, **cfg)
    subprocess.run([cli, "train", "-i", str(TELCO), "-m", str(tmp_path / "cli"), *flags(cfg)],
                   check=True, capture_output=True)
    assert weights(tmp_path / "py") == weights(tmp_path / "cli")
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    m.generate_to_file(a, 50, seed=3)
    datasynth.Model.load(tmp_path / "cli").generate_to_file(b, 50, seed=3)
    assert a.read_bytes() == b.read_bytes()
