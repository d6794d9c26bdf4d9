"""Where things are stored: a path or a collection name Chroma would refuse (or misread) is refused
by the API before any model loads or any file is written, as the CLI does. Real Chroma; fake models."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from meve import ConfigError, MeVe, MomentaryMemory, StoreError
from meve.cli.checks import collection_name as cli_collection_name
from meve.retrieval.chroma import chroma_client
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


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root bypasses file permissions, so a read-only directory cannot be made")
def test_a_memory_path_under_a_read_only_folder_is_refused_before_anything_is_written(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="not a directory this user can write to"):
            MomentaryMemory("u", path=str(ro / "db"), embedders=[_MustNotLoad()])  # type: ignore[list-item]
        assert _files(ro) == []
    finally:
        ro.chmod(0o755)


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
