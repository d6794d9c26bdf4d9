"""The benchmarks' token-vector disk cache writes only what is new: rewriting an unchanged
multi-gigabyte file just before a timed arm is what it must not do."""

from pathlib import Path

import numpy as np
import pytest

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


def test_a_save_that_dies_mid_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "CACHE", tmp_path)
    cache = TokenVectorCache()
    cache.put("a", np.ones((3, 4), dtype=np.float32))
    common.TokenDiskCache("t").save(cache)
    cache.put("b", np.ones((2, 4), dtype=np.float32))

    def dies(file, **arrays):  # writes half a file, to a path or an open file, then dies
        if hasattr(file, "write"):
            file.write(b"PK\x03\x04 half a zip")
        else:
            Path(file).write_bytes(b"PK\x03\x04 half a zip")
        raise RuntimeError("killed mid-write")

    with monkeypatch.context() as m, pytest.raises(RuntimeError, match="killed mid-write"):
        m.setattr(common.np, "savez", dies)
        common.TokenDiskCache("t").save(cache)
    loaded = TokenVectorCache()
    assert common.TokenDiskCache("t").load_into(loaded) == 1 and "a" in loaded


def test_entries_a_truncating_verifier_wrote_are_left_out_so_they_are_encoded_again(tmp_path, monkeypatch):
    # Before issue 52 a text past MiniLM's window kept its first 254 token vectors only.
    monkeypatch.setattr(common, "CACHE", tmp_path)
    cache = TokenVectorCache()
    cache.put("short", np.ones((3, 4), dtype=np.float32))
    cache.put("truncated", np.ones((common.TRUNCATED_ROWS, 4), dtype=np.float32))
    common.TokenDiskCache("t").save(cache)
    disk, loaded = common.TokenDiskCache("t"), TokenVectorCache()
    assert disk.load_into(loaded, stale_rows=common.TRUNCATED_ROWS) == 1
    assert "short" in loaded and "truncated" not in loaded
    loaded.put("truncated", np.ones((300, 4), dtype=np.float32))  # encoded again, in windows
    assert disk.save(loaded) is True
    again = TokenVectorCache()
    common.TokenDiskCache("t").load_into(again, stale_rows=common.TRUNCATED_ROWS)
    assert len(again.get("truncated")) == 300


def test_the_embedding_cache_reads_its_side_files_and_its_own_file_wins(tmp_path, monkeypatch):
    # Vectors computed elsewhere (a lent GPU) sit beside the cache as emb-<tag>+<what>.npz.
    monkeypatch.setattr(common, "CACHE", tmp_path)
    import hashlib

    k1, k2, k3 = (hashlib.sha1(t.encode()).hexdigest() for t in ("one", "two", "three"))
    own, side = np.full((1, 4), 0.1, np.float32), np.full((2, 4), 0.9, np.float32)
    np.savez(tmp_path / "emb-m.npz", keys=np.array([k1]), vecs=own)
    np.savez(tmp_path / "emb-m+gpu.npz", keys=np.array([k1, k2]), vecs=side)
    np.savez(tmp_path / "emb-m-int8.npz", keys=np.array([k3]), vecs=own)  # another model's file: not read

    class Encodes:
        name = "m"

        def __init__(self):
            self.texts = []

        def encode(self, texts):
            self.texts += texts
            return np.zeros((len(texts), 4), np.float32)

    inner = Encodes()
    cache = common.DiskCachedEmbedder(inner, "m")
    got = cache.encode(["one", "two", "three"])
    assert inner.texts == ["three"]  # the other two were on disk
    np.testing.assert_allclose(got, [own[0], side[1], np.zeros(4)])
