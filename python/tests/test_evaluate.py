import datasynth


def test_report(telco, telco_model, tmp_path):
    synth = telco_model.generate(200, seed=1)
    r = datasynth.evaluate(telco, synth, holdout=telco.tail(100))
    assert 0 <= r.score <= 100
    d = r.to_dict()
    assert abs(d["quality"]["overall"] - r.score) < 1e-9
    assert "privacy" in d
    r.save_html(tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert html.startswith("<!DOCTYPE html>") or "<html" in html[:200]
    import html as h
    assert h.escape(html, quote=True) in r._repr_html_()
    # The same tables from CSV files give the same score.
    telco.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "s.csv", index=False)
    assert datasynth.evaluate(tmp_path / "real.csv", synth).score == \
        datasynth.evaluate(telco, synth).score


def test_same_scores_as_the_cli(telco, telco_model, tmp_path, cli):
    import json
    import subprocess
    telco.to_csv(tmp_path / "real.csv", index=False)
    telco_model.generate_to_file(tmp_path / "s.csv", 200, seed=2)
    subprocess.run([cli, "evaluate", "--real", str(tmp_path / "real.csv"), "--synthetic",
                    str(tmp_path / "s.csv"), "--json", str(tmp_path / "r.json")], check=True,
                   capture_output=True)
    cli_report = json.loads((tmp_path / "r.json").read_text())
    py = datasynth.evaluate(tmp_path / "real.csv", tmp_path / "s.csv").to_dict()
    assert py["quality"] == cli_report["quality"]
