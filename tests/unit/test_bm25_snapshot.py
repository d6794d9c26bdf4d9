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


def test_a_snapshot_whose_parts_do_not_fit_together_is_an_error(tmp_path):
    folder = LexicalIndex(["a", "b"], TEXTS[:2]).save(tmp_path / "bm25")
    (folder / "ids.json").write_text('["a"]')  # one id for two documents: the ids would name the wrong rows
    with pytest.raises(StoreError, match="do not describe one index"):
        LexicalIndex.load(tmp_path / "bm25")


def test_a_save_removes_what_a_killed_save_left(tmp_path):
    root = tmp_path / "bm25"
    LexicalIndex(["a"], TEXTS[:1]).save(root)
    strays = [root / "snapshot-99-deadbeef", root / "CURRENT.tmp-0badf00d", root / "CURRENT.1a2b3c4d"]
    strays[0].mkdir()
    (strays[0] / "docs.npy.tmp-12345678").write_bytes(b"half")
    for p in strays[1:]:
        p.write_text("snapshot-99-deadbeef")
    folder = LexicalIndex(["a", "b"], TEXTS[:2]).save(root)
    assert sorted(p.name for p in root.iterdir()) == sorted(["lock", "CURRENT", folder.name])
    assert LexicalIndex.load(root).ids == ["a", "b"]


def test_every_snapshot_file_reaches_the_disk_before_current_names_it(tmp_path, monkeypatch):
    import os

    events: list[tuple[str, int]] = []  # ("fsync", inode) and ("rename", inode of the file renamed)
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", os.stat(a).st_ino)), real_replace(a, b))[1])
    root = tmp_path / "bm25"
    folder = LexicalIndex(["a", "b"], TEXTS[:2]).save(root)
    synced = [ino for what, ino in events if what == "fsync"]
    files = [p.stat().st_ino for p in folder.iterdir()]
    assert set(files) <= set(synced)  # every file of the snapshot
    assert folder.stat().st_ino in synced and root.stat().st_ino in synced  # the folder's entries, and CURRENT's rename
    named = events.index(("rename", (root / "CURRENT").stat().st_ino))
    assert all(events.index(("fsync", ino)) < named for ino in files)
    assert ("fsync", (root / "CURRENT").stat().st_ino) in events[:named]  # CURRENT's own text, before its rename


def _corpus(db: str, ids: list[str], texts: list[str]):
    from meve import MeVe
    from meve.retrieval.chroma import chroma_client
    from tests.fakes import FakeEmbedder, FakeScorer

    m = MeVe.from_texts(texts, ids=ids, embedder=FakeEmbedder(), scorer=FakeScorer(), client=chroma_client(db), collection_name="bikes")
    return m, lambda: MeVe.from_chroma(chroma_client(db).get_collection("bikes"), embedder=FakeEmbedder(), scorer=FakeScorer())


@pytest.mark.parametrize(
    ("part", "damage"),
    [("CURRENT", b""), ("ids.json", b""), ("terms.json", b'["dr'), ("docs.npy", b"\x93NUMPY"), ("lengths.npy", b"")],
    ids=["CURRENT-emptied", "ids-emptied", "terms-cut", "docs-cut", "lengths-emptied"],
)
def test_an_unreadable_snapshot_is_rebuilt_from_the_collection_with_a_warning(tmp_path, caplog, part, damage):
    _, reopen = _corpus(str(tmp_path / "db"), [f"d{i}" for i in range(len(TEXTS))], TEXTS)
    root = tmp_path / "db" / "meve" / "bikes" / "bm25"
    target = root / part if part == "CURRENT" else root / (root / "CURRENT").read_text() / part
    target.write_bytes(damage)
    with caplog.at_level("WARNING", logger="meve"):
        m = reopen()
    assert "cannot be read" in caplog.text and "rebuilding it from the collection" in caplog.text
    assert m.lexical.search("pneumatic tyre", 1)[0][0] == "d1" and len(m.lexical) == len(TEXTS)
    assert LexicalIndex.load(root).ids == m.lexical.ids  # a whole snapshot replaced the damaged one


def test_a_snapshot_that_lags_the_collection_is_corrected_on_open(tmp_path):
    from meve.retrieval.chroma import chroma_client
    from tests.fakes import FakeEmbedder

    ids = [f"d{i}" for i in range(len(TEXTS))]
    _, reopen = _corpus(str(tmp_path / "db"), ids, TEXTS)
    # Another client deletes a row and adds one after the snapshot: the count is the same as the snapshot's.
    raw = chroma_client(str(tmp_path / "db")).get_collection("bikes")
    raw.delete(ids=["d2"])
    raw.add(ids=["m0"], documents=[MORE[0]], embeddings=FakeEmbedder().encode([MORE[0]]))
    m = reopen()
    assert sorted(m.lexical.ids) == sorted(["d0", "d1", "d3", "m0"])
    assert m.lexical.search("quokka island", 1)[0][0] == "m0"
    assert m.lexical.search("sourdough wild yeast", 1) == []  # the deleted row is not found
    raw.add(ids=["m1"], documents=[MORE[1]], embeddings=FakeEmbedder().encode([MORE[1]]))  # rows added only
    assert "m1" in reopen().lexical


def test_a_snapshot_carries_its_format_and_one_from_before_the_marker_reads_the_same(tmp_path):
    import json

    folder = LexicalIndex(["a", "b"], TEXTS[:2]).save(tmp_path / "bm25")
    assert json.loads((folder / "format.json").read_text()) == {"format": 1}
    (folder / "format.json").unlink()  # what meve wrote before 0.2.0: the same files, no marker
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded is not None and loaded.search("pneumatic tyre", 1)[0][0] == "b"


def test_a_snapshot_of_a_newer_meve_is_refused_and_left_in_place(tmp_path):
    import json

    from meve.core.formats import FormatError

    _, reopen = _corpus(str(tmp_path / "db"), [f"d{i}" for i in range(len(TEXTS))], TEXTS)
    root = tmp_path / "db" / "meve" / "bikes" / "bm25"
    marker = root / (root / "CURRENT").read_text() / "format.json"
    marker.write_text(json.dumps({"format": 7}))
    with pytest.raises(FormatError, match="newer meve"):
        reopen()
    assert json.loads(marker.read_text()) == {"format": 7}  # not rebuilt over


@pytest.mark.parametrize("said", [[1], "1", {"format": "one"}, {"format": 0}, {"format": True}])
def test_a_damaged_format_marker_is_a_clear_store_error_not_read_as_current(tmp_path, said):
    # Issue 78 (smaller): an invalid value was accepted as format 1, and a non-object raised AttributeError.
    import json

    from meve.core.errors import StoreError

    folder = LexicalIndex(["a", "b"], TEXTS[:2]).save(tmp_path / "bm25")
    (folder / "format.json").write_text(json.dumps(said))
    with pytest.raises(StoreError, match=r"BM25 snapshot|format\.json"):
        LexicalIndex.load(tmp_path / "bm25")
