"""The BM25 index saved beside a collection: a loaded snapshot scores as the index it was saved
from, keeps growing like a fresh one, and a half-written or missing snapshot is never read."""

from __future__ import annotations

import numpy as np
import pytest

from meve.core.errors import ConfigError, StoreError
from meve.retrieval.bm25 import IncrementalBM25
from meve.retrieval.lexical import LexicalIndex

TEXTS = [
    "Karl Drais built a running machine in 1817.",
    "Dunlop developed the pneumatic tyre for bicycles.",
    "Sourdough rises with wild yeast and lactic bacteria.",
    "The safety bicycle had two wheels of equal size.",
]
MORE = ["Quokkas live on Rottnest Island.", "The bicycle tyre of Dunlop was pneumatic and made of rubber."]
QUERIES = ["pneumatic bicycle tyre", "wild yeast", "quokka island", "machine 1817 Drais"]


def test_a_loaded_snapshot_scores_and_grows_like_a_fresh_index(tmp_path):
    index = LexicalIndex([f"d{i}" for i in range(len(TEXTS))], TEXTS)
    index.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded is not None and loaded.ids == index.ids
    for q in QUERIES:
        np.testing.assert_allclose(loaded.backend.get_scores(q), index.backend.get_scores(q))
    loaded.add(["m0", "m1"], MORE)
    fresh = IncrementalBM25(TEXTS + MORE)
    for q in QUERIES:
        np.testing.assert_allclose(loaded.backend.get_scores(q), fresh.get_scores(q))
    assert loaded.search("pneumatic tyre", 2)[0][0] in {"d1", "m1"}
    assert "m1" in loaded


def test_saving_again_replaces_the_snapshot(tmp_path):
    index = LexicalIndex(["a"], TEXTS[:1])
    first = index.save(tmp_path / "bm25")
    index.add(["b"], TEXTS[1:2])
    second = index.save(tmp_path / "bm25")
    assert not first.exists() and second.exists()
    assert LexicalIndex.load(tmp_path / "bm25").ids == ["a", "b"]


def test_no_snapshot_reads_as_none_and_a_broken_one_as_an_error(tmp_path):
    assert LexicalIndex.load(tmp_path / "nothing") is None
    folder = LexicalIndex(["a"], TEXTS[:1]).save(tmp_path / "bm25")
    (folder / "docs.npy").write_bytes(b"not numpy")
    with pytest.raises(StoreError, match="delete"):
        LexicalIndex.load(tmp_path / "bm25")


def test_a_half_written_snapshot_is_not_read(tmp_path):
    index = LexicalIndex(["a"], TEXTS[:1])
    index.save(tmp_path / "bm25")
    (tmp_path / "bm25" / "snapshot-99-deadbeef").mkdir()  # a saver that died before naming it CURRENT
    assert LexicalIndex.load(tmp_path / "bm25").ids == ["a"]


def test_only_the_incremental_backend_saves(tmp_path):
    with pytest.raises(ConfigError, match="incremental"):
        LexicalIndex(["a"], TEXTS[:1], backend="bm25s").save(tmp_path / "bm25")
