"""A failed open leaves no path behind (issue 77 #5): folders meve creates for a Chroma directory,
a chat memory or a token store are removed again when the open then fails, and a directory that
existed before is never touched."""

from __future__ import annotations

import pytest

from meve import MomentaryMemory, StoreError
from meve.cli import main
from meve.retrieval.chroma import chroma_client
from meve.scoring.token_cache import DiskTokens
from meve.scoring.token_store import TokenStore

pytestmark = pytest.mark.integration

TOO_LONG = "x" * 300  # longer than a file name may be: creating it fails after its parents were made


def test_a_chroma_directory_under_a_mistyped_parent_is_not_left_behind(tmp_path):
    with pytest.raises(StoreError, match="cannot create the Chroma directory"):
        chroma_client(tmp_path / "typo" / TOO_LONG)
    assert list(tmp_path.iterdir()) == []


def test_a_memory_whose_collections_chroma_refuses_leaves_no_directory(tmp_path):
    # The prefix passes meve's check, but with the embedder's name the collection name is past Chroma's 512 characters.
    with pytest.raises(StoreError, match="Chroma could not open the turns collection"):
        MomentaryMemory("u1", path=str(tmp_path / "new" / "db"), collection_prefix="p" * 480)
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    with MomentaryMemory("u1", path=str(kept)) as mem:
        mem.add("My bike is a green Brompton.")
    with pytest.raises(StoreError):
        MomentaryMemory("u1", path=str(kept), collection_prefix="p" * 480)
    with MomentaryMemory("u1", path=str(kept), create=False) as mem:  # an existing directory is left as it was
        assert [t.text for t in mem.turns()] == ["My bike is a green Brompton."]


def test_token_vector_folders_that_cannot_be_made_are_not_left_behind(tmp_path):
    with pytest.raises(StoreError, match="cannot create the token-vector directory"):
        TokenStore(tmp_path / "a" / "b" / TOO_LONG)
    with pytest.raises(StoreError, match="cannot create the token-vector cache"):
        DiskTokens(tmp_path / "c" / TOO_LONG, identity="m", dimension=4)
    assert list(tmp_path.iterdir()) == []


def test_meve_index_leaves_no_directory_when_the_open_or_the_model_fails(tmp_path, capsys, monkeypatch):
    from meve.scoring.embedders import CachedEmbedder

    notes = tmp_path / "notes.md"
    notes.write_text("Tyres last about 5000 km.")
    assert main(["index", str(notes), "--db", str(tmp_path / "typo" / TOO_LONG)]) == 2
    assert "cannot create the Chroma directory" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()

    def interrupted(self, texts):
        raise KeyboardInterrupt  # the model is still loading when the user presses Ctrl-C

    monkeypatch.setattr(CachedEmbedder, "encode", interrupted)
    assert main(["index", str(notes), "--db", str(tmp_path / "db")]) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
