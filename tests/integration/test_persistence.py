"""A persistent corpus reopened by a new process (a replica): the BM25 snapshot and the verifier's
compressed token vectors are read from beside the collection, nothing is re-encoded, and the
answer is the one the first process gave. Real MiniLM, real persistent Chroma."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from meve import MeVe
from meve.cli.commands import demo_corpus
from meve.core.formats import FORMATS
from meve.retrieval.chroma import chroma_client

pytestmark = pytest.mark.integration

QUESTION = "What does the derailleur do?"

REPLICA = """
import json, sys
from meve import MeVe
from meve.retrieval.chroma import chroma_client
m = MeVe.from_chroma(chroma_client(sys.argv[1]).get_collection("bikes"))
r = m.run(sys.argv[2])
hits = m.lexical.search("zeppelin Hindenburg Lakehurst", 1)
print(json.dumps({"kept": [d.id for d in r.documents], "scores": [d.score for d in r.documents], "candidates": r.phase("retrieve").kept,
                  "encoded": m.scorer.encoded_at_query_time, "bm25": hits[0][0] if hits else None, "rows": len(m.lexical.ids)}))
"""


def _replica(tmp_path: Path, chroma_dir: str) -> dict:
    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(script), chroma_dir, QUESTION], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_reads_what_the_first_one_derived(minilm, chroma_dir, tmp_path):
    corpus = demo_corpus()["passages"]
    first = MeVe.from_texts([p["text"] for p in corpus], ids=[p["id"] for p in corpus], client=chroma_client(chroma_dir), collection_name="bikes")
    derived = Path(chroma_dir) / "meve" / "bikes"
    assert (derived / "bm25" / "CURRENT").exists() and (derived / "tokens" / "codes.bin").stat().st_size > 0
    r = first.run(QUESTION)
    assert r.documents and r.documents[0].id == "derailleur"

    # Rows another writer stored after the snapshot (not through meve): the replica's BM25 catches up on them.
    text = "The zeppelin Hindenburg burned at Lakehurst in 1937."
    chroma_client(chroma_dir).get_collection("bikes").add(ids=["hindenburg"], documents=[text], embeddings=minilm.encode([text]))

    seen = _replica(tmp_path, chroma_dir)
    # Every candidate's token vectors came from the store, but the row written without meve's pass.
    assert seen["encoded"] == int("hindenburg" in seen["candidates"]) and len(seen["candidates"]) > 3
    assert seen["kept"] == [d.id for d in r.documents]
    np.testing.assert_allclose(seen["scores"], [d.score for d in r.documents], rtol=1e-6)
    assert seen["bm25"] == "hindenburg" and seen["rows"] == len(corpus) + 1


def test_an_in_memory_corpus_keeps_nothing_on_disk_unless_asked(minilm, tmp_path):
    texts = [p["text"] for p in demo_corpus()["passages"]]
    plain = MeVe.from_texts(texts, embedder=minilm)
    assert plain.scorer.store is None and plain._snapshots.path is None
    kept = MeVe.from_texts(texts, embedder=minilm, index_dir=tmp_path / "idx")
    kept.warm_up()  # loads the models; keeps nothing in the store that is not a passage
    assert len(kept.scorer.store) == len(texts)
    kept.run(QUESTION)
    assert kept.scorer.store is not None and (tmp_path / "idx" / "bm25" / "CURRENT").exists()
    assert kept.scorer.encoded_at_query_time == 0


def test_a_bad_index_dir_is_refused_before_any_model_loads(tmp_path):
    from meve.core.errors import ConfigError

    with pytest.raises(ConfigError, match="index_dir"):
        MeVe.from_texts(["a"], index_dir=3.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("part", "damage"),
    [("tokens/meta.json", b""), ("tokens/meta.json", b'{"format": 1, "m'), ("bm25/CURRENT", b""), ("bm25/<snapshot>/ids.json", b'["chain", "der')],
    ids=["meta-emptied", "meta-cut", "CURRENT-emptied", "ids-cut"],
)
def test_a_damaged_derived_file_is_rebuilt_and_the_corpus_answers(minilm, chroma_dir, caplog, part, damage):
    from meve.retrieval.lexical import LexicalIndex

    corpus = demo_corpus()["passages"]
    first = MeVe.from_texts([p["text"] for p in corpus], ids=[p["id"] for p in corpus], client=chroma_client(chroma_dir), collection_name="bikes")
    expected = [(d.id, round(d.score, 5)) for d in first.run(QUESTION).documents]
    derived = Path(chroma_dir) / "meve" / "bikes"
    (derived / part.replace("<snapshot>", (derived / "bm25" / "CURRENT").read_text())).write_bytes(damage)
    with caplog.at_level("WARNING", logger="meve"):
        again = MeVe.from_chroma(chroma_client(chroma_dir).get_collection("bikes"))
        answer = again.run(QUESTION)
    assert "cannot be read" in caplog.text
    assert [(d.id, round(d.score, 5)) for d in answer.documents] == expected
    assert json.loads((derived / "tokens" / "meta.json").read_text())["format"] == FORMATS["token_store"]  # whole again
    rebuilt = LexicalIndex.load(derived / "bm25")
    assert rebuilt is not None and sorted(rebuilt.ids) == sorted(p["id"] for p in corpus)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root bypasses file permissions, so a read-only corpus cannot be made")
def test_meve_query_answers_on_a_corpus_this_user_cannot_write(minilm, chroma_dir, capsys):
    from meve.cli import main

    corpus = demo_corpus()["passages"]
    MeVe.from_texts([p["text"] for p in corpus], ids=[p["id"] for p in corpus], client=chroma_client(chroma_dir), collection_name="bikes")
    paths = [Path(chroma_dir), *Path(chroma_dir).rglob("*")]
    for p in paths:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        assert main(["query", QUESTION, "--db", chroma_dir, "--collection", "bikes", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["documents"][0]["id"] == "derailleur"
        assert main(["query", QUESTION, "--db", chroma_dir, "--collection", "cars"]) == 2
        err = capsys.readouterr().err
        assert chroma_dir in err and "meve-read-" not in err
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | 0o200)


def test_the_langchain_retriever_passes_index_dir_to_the_corpus(minilm, tmp_path):
    # docs/langchain.md: MeVeRetriever.from_texts takes MeVe.from_texts' keyword arguments, and
    # docs/scaling.md tells users to pass index_dir.
    from langchain_meve import MeVeRetriever

    texts = [p["text"] for p in demo_corpus()["passages"]]
    retriever = MeVeRetriever.from_texts(texts, embedder=minilm, index_dir=tmp_path / "idx")
    retriever.invoke(QUESTION)
    assert retriever.meve.scorer.store is not None and (tmp_path / "idx" / "bm25" / "CURRENT").exists()
