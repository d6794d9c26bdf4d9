"""The verifier's pure parts: MaxSim, int8 storage, the bounded cache, Platt fitting."""

from __future__ import annotations

import numpy as np
import pytest

from meve.core.errors import ConfigError
from meve.scoring.calibration import Calibration, fit_platt
from meve.scoring.late_interaction import TokenVectorCache, dequantize, maxsim, quantize


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def test_maxsim_is_the_mean_of_each_query_tokens_best_match():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    p = _unit(np.array([[1.0, 0.0], [1.0, 1.0]]))
    # token 1 matches p[0] exactly (1.0); token 2's best is p[1] (cos 45° = 0.7071)
    assert maxsim(q, p) == pytest.approx((1.0 + np.sqrt(0.5)) / 2)
    assert maxsim(q, p[:0]) == 0.0


def test_int8_round_trip_keeps_cosines_within_a_hundredth():
    rng = np.random.default_rng(0)
    t = _unit(rng.normal(size=(50, 384)).astype(np.float32))
    back = dequantize(*quantize(t))
    assert np.abs((back * t).sum(1) / np.linalg.norm(back, axis=1) - 1.0).max() < 1e-2
    assert quantize(t)[0].dtype == np.int8


def test_cache_evicts_least_recently_used_past_its_byte_bound():
    rows = [np.ones((10, 8), np.float32) * (i + 1) for i in range(3)]
    size = 10 * 8 + 10 * 2  # int8 values + one fp16 scale per token
    cache = TokenVectorCache(max_bytes=2 * size)
    cache.put("a", rows[0])
    cache.put("b", rows[1])
    assert cache.get("a") is not None  # "a" is now the most recent
    cache.put("c", rows[2])
    assert cache.get("b") is None and cache.get("a") is not None and cache.get("c") is not None
    assert cache.bytes == 2 * size and len(cache) == 2
    cache.put("a", rows[2])  # replacing a key does not double-count it
    assert cache.bytes == 2 * size


def test_cache_rejects_a_negative_bound():
    with pytest.raises(ConfigError, match="cache_bytes"):
        TokenVectorCache(-1)


def test_fit_platt_recovers_the_logistic_that_made_the_labels():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, 20_000)
    y = (rng.uniform(0, 1, x.size) < Calibration(12.0, -6.0)(x)).astype(int)
    cal = fit_platt(x, y)
    assert cal.a == pytest.approx(12.0, rel=0.1) and cal.b == pytest.approx(-6.0, rel=0.1)
    with pytest.raises(ValueError, match="both classes"):
        fit_platt(x, np.zeros_like(y))


def test_calibration_round_trips_through_safetensors(tmp_path):
    path = tmp_path / "cal.safetensors"
    Calibration(2.5, -1.25).save(path, {"seed": "0"})
    assert Calibration.load(path) == Calibration(2.5, -1.25)
    with pytest.raises(ConfigError, match="calibration"):
        Calibration.load(tmp_path / "missing.safetensors")


def test_cached_embedder_is_bounded_by_bytes_and_never_embeds_a_cached_text_twice():
    from meve.scoring.embedders import CachedEmbedder
    from tests.fakes import FakeEmbedder

    inner = FakeEmbedder(dimension=16)  # 64 bytes per vector
    per_entry = 64 + CachedEmbedder._ENTRY_OVERHEAD
    cache = CachedEmbedder(inner, max_bytes=10 * per_entry)
    first = cache.encode([f"text {i}" for i in range(25)])
    assert len(cache) == 10 and cache.bytes <= cache.max_bytes and cache.encoded == 25
    again = cache.encode([f"text {i}" for i in range(15, 25)])  # the 10 most recent are cached
    assert cache.encoded == 25 and np.allclose(again, first[15:])
    cache.encode(["x" * 1_000_000])  # a long text costs one digest key, not a megabyte
    assert cache.bytes <= cache.max_bytes
    with pytest.raises(ValueError, match="max_bytes=-1"):
        CachedEmbedder(inner, max_bytes=-1)
