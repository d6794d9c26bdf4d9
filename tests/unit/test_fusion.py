import pytest

from meve.retrieval.fusion import minmax, rrf, weighted_sum


def test_minmax_edges():
    assert minmax({}) == {}
    assert minmax({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    assert minmax({"a": 0.0}) == {"a": 0.0}
    assert minmax({"a": 1.0, "b": 3.0, "c": 2.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_weighted_sum_missing_signal_counts_zero():
    fused = weighted_sum({"bm25": {"a": 10.0, "b": 0.0}, "dense": {"b": 0.9, "c": 0.1}}, {"bm25": 0.3, "dense": 0.7})
    assert fused == pytest.approx({"a": 0.3, "b": 0.7, "c": 0.0})


def test_rrf_honours_weights():
    rankings = {"bm25": ["a", "b"], "dense": ["b", "a"]}
    even = rrf(rankings, {"bm25": 1.0, "dense": 1.0}, k=60)
    assert even["a"] == pytest.approx(even["b"])
    tilted = rrf(rankings, {"bm25": 0.1, "dense": 0.9}, k=60)
    assert tilted["b"] > tilted["a"]
    assert tilted["b"] == pytest.approx(0.1 / 62 + 0.9 / 61)
