"""The benchmarks' token-vector disk cache writes only what is new: rewriting an unchanged
multi-gigabyte file just before a timed arm is what it must not do."""

import numpy as np

from benchmarks.harness import common
from meve.scoring.late_interaction import TokenVectorCache


def test_save_writes_only_when_the_cache_holds_new_texts(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "CACHE", tmp_path)
    cache = TokenVectorCache()
    cache.put("a", np.ones((3, 4), dtype=np.float32))
    disk = common.TokenDiskCache("t")
    assert disk.save(cache) is True and disk.path.exists()

    again = common.TokenDiskCache("t")
    loaded = TokenVectorCache()
    assert again.load_into(loaded) == 1
    assert again.save(loaded) is False  # nothing new: the file is left alone
    loaded.put("b", np.full((2, 4), 0.5, dtype=np.float32))
    assert again.save(loaded) is True
    third = TokenVectorCache()
    assert common.TokenDiskCache("t").load_into(third) == 2
    np.testing.assert_allclose(third.get("b"), loaded.get("b"))
