"""The learned turn reranker: deterministic training, an artifact that round-trips, loads
offline, and search without it keeps the unlearned ranking."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memory_pipeline.core.retrieval import rerank as R


def _data(seed: int = 0):
    """Candidates whose label follows feature ``speaker`` (column 7), not their rank."""
    rng = np.random.default_rng(seed)
    x = rng.random((400, len(R.FEATURES)))
    x[:, 7] = rng.integers(0, 2, 400)
    y = (x[:, 7] + 0.2 * rng.standard_normal(400) > 0.5).astype(float)
    groups = [f"q{i // 20}" for i in range(400)]
    return x, y, groups


def test_training_is_deterministic_and_learns_the_signal():
    x, y, g = _data()
    a, b = R.train(x, y, g), R.train(x, y, g)
    assert np.array_equal(a.weights, b.weights) and a.bias == b.bias
    speaker = R.FEATURES.index("speaker")
    assert int(np.argmax(np.abs(a.weights))) == speaker and a.weights[speaker] > 0
    # held-out candidates: the model puts the labelled ones first
    xt, yt, _ = _data(seed=1)
    order = np.argsort(-a.score(xt))
    assert yt[order[:50]].mean() > 0.9 > yt.mean()


def test_rerank_moves_the_predicted_turns_up_and_none_keeps_the_order():
    x, y, g = _data()
    model = R.train(x, y, g)
    turns = [(f"m{i}", float(-i)) for i in range(6)]
    feats = np.zeros((4, len(R.FEATURES)))
    feats[3, R.FEATURES.index("speaker")] = 1.0  # the 4th turn is the speaker's
    out = R.rerank(turns, feats, model)
    assert out[0][0] == "m3"
    assert [m for m, _ in out[4:]] == ["m4", "m5"]  # beyond the candidates: unchanged
    assert R.rerank(turns, feats, None) == turns


def test_artifact_round_trip_and_version_check():
    x, y, g = _data()
    model = R.train(x, y, g, provenance={"data": "synthetic"})
    d = json.loads(json.dumps(model.to_dict()))
    back = R.Reranker.from_dict(d)
    assert back.provenance == {"data": "synthetic"}
    np.testing.assert_allclose(back.score(x), model.score(x), atol=1e-3)
    with pytest.raises(ValueError):
        R.Reranker.from_dict({**d, "version": 99})
    with pytest.raises(ValueError):
        R.Reranker.from_dict({**d, "features": ["own"]})


def test_packaged_artifact_loads_offline_or_is_absent(monkeypatch):
    model = R.load_packaged()
    if model is not None:  # shipped: it names what it was trained on
        assert model.features == R.FEATURES and "trained_on" in model.provenance
    monkeypatch.setattr(R, "ARTIFACT", "no-such-reranker.json")
    assert R.load_packaged() is None


def test_bad_training_input_is_refused():
    with pytest.raises(ValueError):
        R.train(np.zeros((3, 2)), np.zeros(3))
