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
    assert r._repr_html_() == html
    # The same tables from CSV files give the same score.
    telco.to_csv(tmp_path / "real.csv", index=False)
    synth.to_csv(tmp_path / "s.csv", index=False)
    assert datasynth.evaluate(tmp_path / "real.csv", synth).score == \
        datasynth.evaluate(telco, synth).score
