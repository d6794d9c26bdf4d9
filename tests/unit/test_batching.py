"""Length-aware batching: which texts go through a transformer together."""

from __future__ import annotations

import pytest

from meve import ConfigError
from meve.scoring.batching import check_batch_tokens, default_batch_tokens, token_batches


def test_batches_are_length_sorted_and_padded_size_stays_within_the_cap():
    lengths = [300, 20, 90, 25, 100, 22, 700, 95]
    batches = token_batches(lengths, max_items=32, max_tokens=300)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths)
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 300
    # Short texts batch wide, long ones narrow, and one over the cap goes alone.
    assert [len(b) for b in batches] == [3, 3, 1, 1]


def test_the_item_cap_binds_when_the_token_cap_does_not():
    assert [len(b) for b in token_batches([10] * 10, max_items=4, max_tokens=None)] == [4, 4, 2]
    assert [len(b) for b in token_batches([10] * 10, max_items=4, max_tokens=10_000)] == [4, 4, 2]
    assert token_batches([], max_items=4, max_tokens=100) == []


def test_caps_are_checked():
    assert default_batch_tokens("cpu") == 1024 and default_batch_tokens("cuda:0") is None
    with pytest.raises(ConfigError, match="batch_tokens"):
        check_batch_tokens(8)
    with pytest.raises(ConfigError, match="batch_tokens"):
        check_batch_tokens(True)
    with pytest.raises(ValueError, match="max_items"):
        token_batches([1], max_items=0, max_tokens=None)
