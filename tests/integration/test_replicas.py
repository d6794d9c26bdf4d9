"""Several app replicas over one Chroma server: BM25 (and, for documents, titles and windows) follows the collection.

The embedder and verifier are fakes (named as such): this is about storage and the lexical
index, so the models only need to be deterministic in both processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from meve import MeVe, MeVeConfig
from tests.fakes import FakeEmbedder, FakeScorer

pytestmark = pytest.mark.integration

REPLICA_B = """
import sys
import chromadb
from chromadb.config import Settings
from meve import MeVe
from tests.fakes import FakeEmbedder, FakeScorer

client = chromadb.HttpClient(host="127.0.0.1", port=int(sys.argv[1]), settings=Settings(anonymized_telemetry=False))
b = MeVe.from_chroma(client.get_collection("corpus"), embedder=FakeEmbedder(), scorer=FakeScorer())
b.add_texts(["The zeppelin Hindenburg burned at Lakehurst in 1937.", "Quokkas live on Rottnest Island."], ids=["hindenburg", "quokka"])
print("ADDED", flush=True)
"""


def test_a_replica_finds_by_bm25_what_another_process_added(chroma_server, tmp_path):
    texts = ["Karl Drais built a running machine in 1817.", "Dunlop developed the pneumatic tyre.", "Sourdough rises with wild yeast."]
    MeVe.from_texts(texts, embedder=FakeEmbedder(), scorer=FakeScorer(), client=chroma_server, collection_name="corpus")
    a = MeVe.from_chroma(chroma_server.get_collection("corpus"), embedder=FakeEmbedder(), scorer=FakeScorer(), config=MeVeConfig(k_init=2, t_max=500))
    assert a.lexical.catch_up(a.store) == 0  # nothing new: one count()
    assert a.lexical.search("zeppelin Hindenburg", 1) == []

    script = tmp_path / "replica_b.py"
    script.write_text(REPLICA_B)
    port = chroma_server.get_settings().chroma_server_http_port
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(script), str(port)], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ADDED" in out.stdout, out.stderr[-2000:]

    r = a.run("zeppelin Hindenburg Lakehurst", candidates="hybrid")  # the hybrid path looks for new rows first
    assert "hindenburg" in r.phase("retrieve").kept
    assert a.lexical.search("zeppelin Hindenburg", 1)[0][0] == "hindenburg"
    assert sorted(a.lexical.ids) == sorted(["doc-0", "doc-1", "doc-2", "hindenburg", "quokka"])
    assert a.lexical.catch_up(a.store) == 0


REPLICA_B_DOCUMENTS = """
import sys
import chromadb
from chromadb.config import Settings
from meve import MeVe
from tests.fakes import FakeEmbedder, FakeScorer

client = chromadb.HttpClient(host="127.0.0.1", port=int(sys.argv[1]), settings=Settings(anonymized_telemetry=False))
doc = ("hindenburg", "Hindenburg disaster", "The zeppelin Hindenburg burned at Lakehurst in 1937. Thirty-six people died.")
MeVe.from_documents([doc], embedder=FakeEmbedder(), scorer=FakeScorer(), client=client, collection_name="library")
print("ADDED", flush=True)
"""

DOCS = [
    ("drais", "Karl Drais", "Karl Drais built a running machine in 1817. It had two wheels."),
    ("dunlop", "John Boyd Dunlop", "Dunlop developed the pneumatic tyre in 1888."),
    ("bread", "Sourdough", "Sourdough rises with wild yeast."),
]


def test_a_hierarchical_replica_finds_documents_another_process_added(chroma_server, tmp_path):
    a = MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer(), client=chroma_server, collection_name="library", config=MeVeConfig(k_init=2))
    assert a.hierarchy is not None and a.hierarchy.catch_up() == 0

    script = tmp_path / "replica_b_documents.py"
    script.write_text(REPLICA_B_DOCUMENTS)
    port = chroma_server.get_settings().chroma_server_http_port
    out = subprocess.run([sys.executable, str(script), str(port)], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ADDED" in out.stdout, out.stderr[-2000:]

    # Without the catch-up the document stage cannot pick it (its title, BM25 and position are
    # unknown here) even though Chroma's kNN returns its windows.
    r = a.run("zeppelin Hindenburg Lakehurst")
    assert r.phase("retrieve").info["documents"][0] == "hindenburg"
    assert r.documents[0].id.startswith("hindenburg@")
    assert a.hierarchy.catch_up() == 0 and a.hierarchy.ids.count("hindenburg") == 1


def test_a_document_stored_after_its_windows_is_caught_up_on_a_later_query():
    # A replica stores a document's windows, then the document: a query in between sees windows
    # of an unknown document, and must still pick the document up once it lands.
    from meve.retrieval.chroma import chroma_client

    client = chroma_client()
    a = MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer(), client=client, collection_name="library-order")
    assert a.hierarchy is not None
    wins, docs = (client.get_collection(n) for n in a.hierarchy.collection_names()[::-1])
    text = "The zeppelin Hindenburg burned at Lakehurst in 1937."
    vec = FakeEmbedder().encode([text])
    meta = {"doc_id": "hindenburg", "title": "Hindenburg", "start": 0, "end": len(text)}
    wins.add(ids=[f"hindenburg@0-{len(text)}"], documents=[text], embeddings=vec, metadatas=[meta])
    assert a.hierarchy.catch_up() == 1 and "hindenburg" not in a.hierarchy.ids
    docs.add(ids=["hindenburg"], documents=[text], embeddings=vec, metadatas=[{"title": "Hindenburg"}])
    assert a.hierarchy.catch_up() == 1 and "hindenburg" in a.hierarchy.ids
    assert a.run("zeppelin Hindenburg Lakehurst").phase("retrieve").info["documents"][0] == "hindenburg"
