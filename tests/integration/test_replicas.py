"""Several app replicas over one Chroma server: BM25 follows the collection.

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
