"""bench/gpu/predict.py: which CPU acceptance record a run predicts from, and a record of
per-prompt totals (no per-iteration profiles) predicting HF assisted only."""

import json

import pytest

from bench.gpu import predict


def test_default_record_is_the_newest_per_iteration_one(tmp_path):
    assert predict.default_record(tmp_path) == predict.RECORD
    (tmp_path / "methods.json").write_text(json.dumps({"bench": "methods"}))
    (tmp_path / "broken.json").write_text("{")
    for name, when in (("a.json", "2026-11-24 10:00:00"), ("b.json", "2026-11-25 09:00:00")):
        (tmp_path / name).write_text(json.dumps({"bench": "cost_model", "time": when}))
    assert predict.default_record(tmp_path) == tmp_path / "b.json"
    synthetic = {"bench": "cost_model", "time": "2026-12-07 10:00:00", "aligns": [0.75, 0.9]}
    (tmp_path / "c.json").write_text(json.dumps(synthetic))  # newer, but its knob sets tau
    assert predict.default_record(tmp_path) == tmp_path / "b.json"


def test_predict_from_totals_only_record_is_not_available():
    record = json.loads(predict.RECORD.read_text())  # bench/methods.py format: per-prompt totals
    text, k, tau = predict.linear_tau(record)
    assert text == "linear" and k == 4 and tau > 1
    curve = {
        "model": "m",
        "device_name": "d",
        "dtype": "float32",
        "engine": "fast",
        "points": [[0, 1, 0.01]],
    }
    pred = predict.predict_pair(record, curve, curve, {}, 0.0, {"k": 4, "ms_per_iteration": 20.0})
    assert pred["available"] is False and "per-iteration" in pred["reason"]
    assert pred["hf_assisted"]["ms_per_token"] == pytest.approx(20.0 / tau)
