"""A long passage is found by all its text: its later windows' vectors are kept beside the
collection (issue 63 #3), survive a restart, and an index built before them gets them on request.
Real MiniLM, real Chroma (embedded, persistent), a new process for the reopen."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from meve import MeVe
from meve.core.formats import FormatError
from meve.evaluate.arms import Rankings
from meve.retrieval.chroma import chroma_client
from meve.retrieval.passage_windows import windows_name
from meve.scoring.token_vectors import sentence_transformer_of

pytestmark = pytest.mark.integration

QUESTION = "Who painted the lighthouse tower red?"
# The answer sits past the first 256 word pieces: the head is about the weather.
WEATHER = " ".join(f"Entry {i} of the log records the wind, the rain and the tides on an ordinary autumn day." for i in range(24))
KEEPER = (
    "In 1897 the lighthouse keeper Marguerite Olsson painted the lighthouse tower red so that ships could see it in fog. "
    "She mixed the red paint herself from iron oxide and linseed oil. "
    "The red tower of the lighthouse became the emblem of the harbour. "
    "Olsson kept the lighthouse lamp burning for forty years and repainted the tower every spring."
)
DEEP = WEATHER + " " + KEEPER
FAIR = "The harvest fair number {j} sold apples, cheese and bread in the market square, stall {i}."
OTHERS = [f"Part {j}. " + " ".join(FAIR.format(i=i, j=j) for i in range(20)) for j in range(12)]
TEXTS = [DEEP, *OTHERS, "A short note about tea."]
IDS = ["deep", *[f"fair{j}" for j in range(12)], "tea"]

REOPEN = """
import json, sys
from meve import MeVe
from meve.retrieval.chroma import chroma_client
m = MeVe.from_chroma(chroma_client(sys.argv[1]).get_collection("log"))
hits = m.store.query(m.query_vector(sys.argv[2]), 3)
print(json.dumps({"windows": m.store.windows is not None, "hits": [p.id for p in hits], "score": hits[0].dense_score}))
"""


def _head_rank(minilm, query: str) -> int:
    vecs = minilm.encode(TEXTS)
    q = minilm.encode([query])[0]
    sims = vecs @ q / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q))
    return int(np.argsort(-sims).tolist().index(0))


def test_a_passage_is_found_by_text_past_its_first_window(minilm):
    # The passage's own (first-window) vector ranks it behind other passages; its last window does not.
    assert _head_rank(minilm, QUESTION) > 0
    with MeVe.from_texts(TEXTS, ids=IDS) as m:
        kept = m.store.windows
        assert kept is not None and kept.collection.count() >= 2 and kept.covered() >= {"deep"}
        hits = m.store.query(m.query_vector(QUESTION), 3)
        alone = minilm.encode([KEEPER])[0] @ m.query_vector(QUESTION) / np.linalg.norm(minilm.encode([KEEPER])[0])
        assert hits[0].id == "deep" and hits[0].dense_score > 0.5 * alone
        r = m.run(QUESTION, candidates="dense", k_init=2)
        assert r.documents and r.documents[0].id == "deep" and "Marguerite Olsson" in r.context
        assert r.phase("retrieve").info["windows"] is True
        # The dense baseline meve evaluate compares with ranks as a plain vector store does: by the
        # passage's own vector, so the deep passage is where its head puts it, not first.
        assert Rankings(m).dense(QUESTION, len(TEXTS)).index("deep") == _head_rank(minilm, QUESTION)
        # So does MeVe.baseline ("standard RAG for comparison", `meve query --baseline`).
        assert [p.id for p in m.baseline(QUESTION, k=len(TEXTS)).documents].index("deep") == _head_rank(minilm, QUESTION)
        name = kept.name
        assert name in {c.name for c in chroma_client().list_collections()}  # the in-memory client from_texts used
    # close() drops the windows collection it made along with the passages'.
    assert name not in {c.name for c in chroma_client().list_collections()}


def test_windows_are_kept_beside_a_persistent_collection_and_read_by_a_new_process(chroma_dir, tmp_path):
    MeVe.from_texts(TEXTS, ids=IDS, client=chroma_client(chroma_dir), collection_name="log")
    script = tmp_path / "reopen.py"
    script.write_text(REOPEN)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(script), chroma_dir, QUESTION], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["windows"] and seen["hits"][0] == "deep"


def test_an_index_built_before_windows_warns_then_gets_them(chroma_dir, caplog):
    client = chroma_client(chroma_dir)
    fresh = MeVe.from_texts(TEXTS, ids=IDS, client=client, collection_name="log")
    made = fresh.store.windows.collection.count()
    client.delete_collection(windows_name("log"))  # as meve 0.3.0 left it: passages, no windows
    with caplog.at_level(logging.WARNING, logger="meve"):
        old = MeVe.from_chroma(client.get_collection("log"))
    assert old.store.windows is None
    assert any("'log' has no window vectors" in r.getMessage() and "add_windows()" in r.getMessage() for r in caplog.records)
    assert "deep" not in [p.id for p in old.store.query(old.query_vector(QUESTION), 1)]
    # Adding to it does not make a windows collection that would pass for complete.
    old.add_texts(["Another short note, about coffee."], ids=["coffee"])
    assert old.store.windows is None
    assert old.add_windows() == made  # the long passages' windows, as a fresh build writes them
    assert old.add_windows() == 0  # nothing left to make
    assert [p.id for p in old.store.query(old.query_vector(QUESTION), 1)] == ["deep"]
    assert old.run(QUESTION).phase("retrieve").info["windows"] is True
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="meve"):
        again = MeVe.from_chroma(client.get_collection("log"))
    assert again.store.windows is not None and not any("no window vectors" in r.getMessage() for r in caplog.records)


@contextmanager
def sequences_through(model: Any) -> Iterator[list[int]]:
    """The real MiniLM, counting the sequences each of its forward passes reads (a hook on its
    transformer module, which both sentence-transformers' encode and meve's own passes go through)."""
    seen: list[int] = []
    hook = model[0].register_forward_pre_hook(lambda _module, args: seen.append(int(args[0]["input_ids"].shape[0])))
    try:
        yield seen
    finally:
        hook.remove()


def test_add_windows_runs_the_model_on_the_long_passages_alone_and_once(chroma_dir):
    # Issue 78: add_windows() embedded every passage still without windows on each call (the dense
    # vector it threw away, or the verifier's whole pass), and a passage that fits one window never has any.
    notes = [f"A short note number {i} about tea." for i in range(40)]
    client = chroma_client(chroma_dir)
    MeVe.from_texts([*TEXTS, *notes], client=client, collection_name="log").close()
    client.delete_collection(windows_name("log"))
    old = MeVe.from_chroma(client.get_collection("log"))
    model = sentence_transformer_of(old.embedder).model
    with sequences_through(model) as first:
        made = old.add_windows()
    long = len(TEXTS) - 1  # all but the tea note run past one window
    assert made > 0 and sum(first) == made + long  # each long passage's windows, its first one included: nothing else
    with sequences_through(model) as second:
        assert old.add_windows() == 0
    assert second == []  # the short passages are tokenized, not run through the model again


def test_windows_written_by_a_newer_meve_are_refused(chroma_dir):
    client = chroma_client(chroma_dir)
    MeVe.from_texts(TEXTS[-2:], ids=IDS[-2:], client=client, collection_name="log")
    client.get_collection(windows_name("log")).modify(metadata={"meve:format": 2})
    with pytest.raises(FormatError, match="newer meve"):
        MeVe.from_chroma(client.get_collection("log"))


def test_a_windows_collection_name_fits_chromas_limit():
    assert windows_name("log") == "log.windows"
    long = windows_name("a" * 510)
    assert len(long) <= 512 and long.endswith(".windows") and long != windows_name("a" * 509 + "b")


def _index_without_windows(tmp_path: Path) -> tuple[Path, str, int]:
    """A file indexed with `meve index` whose windows collection is then deleted, as meve 0.3.0 left an
    index: (the file, the Chroma directory, how many windows indexing had made)."""
    from meve.cli import main

    book = tmp_path / "log.md"
    book.write_text(DEEP + "\n\n" + OTHERS[0] + "\n")
    db = str(tmp_path / "db")
    assert main(["index", str(book), "--db", db, "--chunk-tokens", "1000"]) == 0
    client = chroma_client(db)
    made = client.get_collection(windows_name("meve")).count()
    assert made >= 1
    client.delete_collection(windows_name("meve"))
    return book, db, made


def test_meve_index_replace_gives_an_index_built_before_windows_its_windows(tmp_path, capsys, caplog):
    from meve.cli import main

    book, db, made = _index_without_windows(tmp_path)
    client = chroma_client(db)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="meve"):
        assert main(["index", str(book), "--db", db, "--chunk-tokens", "1000", "--replace"]) == 0
    out = capsys.readouterr().out
    assert "0 chunks" in out and f"made {made} window vector(s)" in out
    # The command that makes the windows does not first warn that they are missing and name itself.
    assert not [r for r in caplog.records if "no window vectors" in r.getMessage()]
    assert client.get_collection(windows_name("meve")).count() == made
    capsys.readouterr()
    assert main(["index", str(book), "--db", db, "--chunk-tokens", "1000", "--replace"]) == 0
    assert "window vector" not in capsys.readouterr().out  # it has them: nothing said, nothing made


def _window_rows(chroma_dir: str, name: str) -> dict[str, str]:
    got = chroma_client(chroma_dir).get_collection(windows_name(name)).get(include=["metadatas"])
    return {i: str(m["meve:passage"]) for i, m in zip(got["ids"], got["metadatas"], strict=True)}


def test_meve_index_replace_deletes_the_windows_of_the_chunks_it_deletes(tmp_path, capsys):
    # Issue 78 #3: after --replace, 7 of 10 window rows belonged to deleted chunks, and the k nearest windows were stale.
    from meve.cli import main

    notes, db = tmp_path / "log.md", tmp_path / "db"
    notes.write_text(DEEP)
    assert main(["index", str(notes), "--db", str(db), "--chunk-tokens", "2000"]) == 0
    before = _window_rows(str(db), "meve")
    assert before  # the long chunk has later windows
    notes.write_text(WEATHER + " The keeper retired and the lighthouse was automated in 1961.")
    assert main(["index", str(notes), "--db", str(db), "--chunk-tokens", "2000", "--replace"]) == 0, capsys.readouterr().err
    stored = set(chroma_client(str(db)).get_collection("meve").get(include=[])["ids"])
    after = _window_rows(str(db), "meve")
    assert after and set(after.values()) <= stored and not set(before) & set(after)


def test_a_collection_rebuilt_under_the_same_name_never_reads_the_old_ones_windows(chroma_dir):
    # Issue 78 #3: after delete_collection and a rebuild, the new doc-0 got the old doc-0's window score.
    client = chroma_client(chroma_dir)
    MeVe.from_texts([DEEP, "A short note about tea."], ids=["doc-0", "doc-1"], client=client, collection_name="log").close()
    client.delete_collection("log")
    fresh = ["A short note about coffee.", "Another note about biscuits."]
    with MeVe.from_texts(fresh, ids=["doc-0", "doc-1"], client=chroma_client(chroma_dir), collection_name="log") as m:
        hits = m.store.query(m.query_vector(QUESTION), 2)
        own = {p.id: p.dense_score for p in m.store.query_heads(m.query_vector(QUESTION), 2)}
    assert {p.id: p.dense_score for p in hits} == own  # scored by their own vectors: no window of the old doc-0
    assert _window_rows(chroma_dir, "log") == {}


def test_a_window_made_from_other_text_than_its_passages_is_ignored(chroma_dir):
    with MeVe.from_texts([DEEP, *OTHERS], ids=["deep", *[f"fair{j}" for j in range(12)]], client=chroma_client(chroma_dir), collection_name="log") as m:
        q = m.query_vector(QUESTION)
        found = {p.id: p.dense_score for p in m.store.query(q, 3)}
        assert "deep" in found  # its window finds it
        # Another writer replaces the passage's text under the same id, without meve (its windows are not remade).
        vec = m.store.collection.get(ids=["deep"], include=["embeddings"])["embeddings"]
        m.store.collection.update(ids=["deep"], documents=["A short note about tea."], embeddings=vec)
        again = {p.id: p.dense_score for p in m.store.query(q, 13)}
        head = {p.id: p.dense_score for p in m.store.query_heads(q, 13)}
    assert again.get("deep") == head.get("deep")  # its own vector's score, not the old text's window


def test_an_interrupted_upgrade_leaves_no_half_made_windows_and_the_next_run_finishes_it(tmp_path, capsys, monkeypatch):
    # Review of issue 78: the windows collection was made before filling; interrupted, it passed for complete.
    from meve.cli import main
    from meve.pipeline.meve import MeVe as Core

    book, db, made = _index_without_windows(tmp_path)

    def interrupted(self, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Core, "add_windows", interrupted)
    assert main(["index", str(book), "--db", db, "--chunk-tokens", "1000", "--replace"]) == 130  # "meve: interrupted"
    assert windows_name("meve") not in {c.name for c in chroma_client(db).list_collections()}
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["index", str(book), "--db", db, "--chunk-tokens", "1000", "--replace"]) == 0
    assert f"made {made} window vector(s)" in capsys.readouterr().out
