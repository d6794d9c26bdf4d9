"""Where things are stored: a path or a collection name Chroma would refuse (or misread) is refused
by the API before any model loads or any file is written, as the CLI does; a read-only copy of a
directory is usable and its errors name the user's directory. Real Chroma; fake models."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from meve import ConfigError, MeVe, MomentaryMemory, StoreError
from meve.cli.checks import collection_name as cli_collection_name
from meve.retrieval.chroma import chroma_client, read_only_copy
from tests.fakes import FakeEmbedder, FakeScorer

# The names the issue found accepted, and the other ways Chroma refuses one.
BAD_NAMES = ["c", "a/b", "../x", "日本語", "ab", "a..b", "1.2.3.4", "-abc", "abc-", "abc\n", "", "x" * 513]


class _MustNotLoad:
    """A fake embedder whose model "loads" when its dimension or vectors are asked for: touching it fails the test."""

    name = "must-not-load"

    @property
    def dimension(self) -> int:
        raise AssertionError("the embedder's model was loaded before the arguments were checked")

    def encode(self, texts):
        raise AssertionError("the embedder's model was loaded before the arguments were checked")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_memory_path_is_refused_and_nothing_is_written(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)  # an empty path used to mean the working directory (or, for Chroma, "/")
    root_db_existed = Path("/chroma.sqlite3").exists()
    with pytest.raises(ConfigError, match=re.escape(f"path={path!r} is not allowed: expected a directory path")):
        MomentaryMemory("u", path=path, embedders=[_MustNotLoad()])  # type: ignore[list-item]
    assert _files(tmp_path) == [] and Path("/chroma.sqlite3").exists() == root_db_existed
    with pytest.raises(ConfigError, match="path=''"):
        chroma_client("")
    assert _files(tmp_path) == []


def test_a_memory_path_that_is_a_file_is_refused_before_anything_is_written(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    with pytest.raises(StoreError, match="is a file, not a directory"):
        MomentaryMemory("u", path=str(a_file), embedders=[_MustNotLoad()])  # type: ignore[list-item]
    assert _files(tmp_path) == ["notes.txt"]


def test_a_memory_path_under_a_read_only_folder_is_refused_before_anything_is_written(read_only_dir):
    with pytest.raises(StoreError, match="not a directory this user can write to"):
        MomentaryMemory("u", path=str(read_only_dir / "db"), embedders=[_MustNotLoad()])  # type: ignore[list-item]
    assert _files(read_only_dir) == []


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_collection_name_chroma_refuses_is_refused_before_any_model_loads(tmp_path, name):
    client = chroma_client(str(tmp_path / "db"))
    before = _files(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(f"collection_name={name!r} is not allowed")):
        MeVe.from_texts(["A passage."], client=client, collection_name=name, embedder=_MustNotLoad(), scorer=FakeScorer())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(f"collection_name={name!r} is not allowed")):
        MeVe.from_documents([("d", "T", "A text.")], client=client, collection_name=name, embedder=_MustNotLoad(), scorer=FakeScorer())  # type: ignore[arg-type]
    assert _files(tmp_path) == before and client.list_collections() == []
    with pytest.raises(Exception, match="is not allowed: expected 3-512 letters"):  # the CLI checks the same rule
        cli_collection_name(name)


@pytest.mark.parametrize("prefix", ["a/b", "../x", "日本語", "", "-x"])
def test_a_memory_collection_prefix_chroma_refuses_is_refused_before_anything_is_written(tmp_path, prefix):
    with pytest.raises(ConfigError, match=re.escape(f"collection_prefix={prefix!r} is not allowed")):
        MomentaryMemory("u", path=str(tmp_path / "db"), collection_prefix=prefix, embedders=[_MustNotLoad()])  # type: ignore[list-item]
    assert _files(tmp_path) == []


def test_good_names_still_work(tmp_path):
    client = chroma_client(str(tmp_path / "db"))
    m = MeVe.from_texts(["Chains need oil."], client=client, collection_name="my.bikes_2-x", embedder=FakeEmbedder(), scorer=FakeScorer())
    assert m.store is not None and m.store.count() == 1
    assert MomentaryMemory("u", path=str(tmp_path / "mem"), collection_prefix="app.v2", embedders=[FakeEmbedder()]).add("hi").text == "hi"


def _corpus(db: Path) -> None:
    texts, ids = ["Chains need oil to stay quiet.", "Tyres hold air at a set pressure."], ["chain", "tyre"]
    MeVe.from_texts(texts, ids=ids, client=chroma_client(str(db)), collection_name="bikes", embedder=FakeEmbedder(), scorer=FakeScorer())


def test_a_read_only_copy_of_a_read_only_corpus_can_be_written_and_read(tmp_path):
    db = tmp_path / "db"
    _corpus(db)
    for p in [db, *db.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        with read_only_copy(str(db)) as copy:
            # Chroma and the derived indexes write even to read; the copy kept the source's modes before.
            assert all(os.stat(p).st_mode & stat.S_IWUSR for p in [Path(copy), *Path(copy).rglob("*")])
            m = MeVe.from_chroma(chroma_client(copy, create=False).get_collection("bikes"), embedder=FakeEmbedder(), scorer=FakeScorer())
            assert m.run("chain oil").documents[0].id == "chain"
        assert not Path(copy).exists()
    finally:
        for p in [db, *db.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


def test_a_read_only_copy_names_the_users_directory_in_its_errors(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "chroma.sqlite3").write_bytes(b"not a database")
    with pytest.raises(StoreError) as caught, read_only_copy(str(broken)):
        pass
    assert str(broken) in str(caught.value) and "meve-read-" not in str(caught.value)
