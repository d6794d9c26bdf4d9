"""Issue 75: each passage is read by the model once, at ingestion, and never again by a later
process. Apps index with meve's embeddings the way each framework's tutorial does (default
splitters, the framework's own persistence), then a new process (a restart) loads the index and
queries; every text the model reads there is recorded. Real MiniLM, real Chroma, real frameworks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LONG = ROOT / "tests" / "data" / "long_document.txt"
QUESTION = "What does the derailleur do?"

# Records every text any model reads in this process (the benchmark's recorder: the verifier's pass, sentence-transformers' encode).
RECORD = """
import json, sys
from benchmarks.read_once import record_model_reads
read = record_model_reads()
"""

LLAMAINDEX_BUILD = """
import sys
from llama_index.core import Document, VectorStoreIndex
from llamaindex_meve import MeVeEmbedding
from meve.cli.commands import demo_corpus
docs = [Document(text=p["text"], metadata={"title": p["title"]}) for p in demo_corpus()["passages"]]
docs.append(Document(text=open(sys.argv[2]).read(), metadata={"title": "long"}))
index = VectorStoreIndex.from_documents(docs, embed_model=MeVeEmbedding())
index.storage_context.persist(sys.argv[1])
print(len(index.docstore.docs))
"""

LLAMAINDEX_QUERY = """
from llama_index.core import StorageContext, load_index_from_storage
from llamaindex_meve import MeVeEmbedding, MeVeRetriever
index = load_index_from_storage(StorageContext.from_defaults(persist_dir=sys.argv[1]), embed_model=MeVeEmbedding())
retriever = MeVeRetriever(index)
nodes = retriever.retrieve(sys.argv[2])
print(json.dumps({"read": read, "kept": [n.node.get_content() for n in nodes], "encoded": retriever.core.scorer.encoded_at_query_time}))
"""

LANGCHAIN_BUILD = """
import sys
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter
from langchain_meve import MeVeEmbeddings
from meve.cli.commands import demo_corpus
docs = [Document(page_content=p["text"], metadata={"title": p["title"]}) for p in demo_corpus()["passages"]]
docs.append(Document(page_content=open(sys.argv[2]).read(), metadata={"title": "long"}))
chunks = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_documents(docs)
store = Chroma(collection_name="notes", embedding_function=MeVeEmbeddings(), persist_directory=sys.argv[1])
store.add_documents(chunks)  # no ids, as LangChain's tutorial adds them
print(len(chunks))
"""

LANGCHAIN_QUERY = """
from langchain_chroma import Chroma
from langchain_meve import MeVeEmbeddings, MeVeRetriever
store = Chroma(collection_name="notes", embedding_function=MeVeEmbeddings(), persist_directory=sys.argv[1])
retriever = MeVeRetriever.from_vectorstore(store)  # no chunks passed: meve lists the store's
docs = retriever.invoke(sys.argv[2])
s = retriever.meve.store
print(json.dumps({"read": read, "kept": [d.page_content for d in docs], "encoded": retriever.meve.scorer.encoded_at_query_time,
                  "vectors_embedded": s.vectors_embedded, "rows": len(s.documents()[0])}))
"""


def _run(script: str, *args: str, cache: Path) -> str:
    env = {**os.environ, "MEVE_CACHE_DIR": str(cache)}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_reloaded_llamaindex_index_answers_its_first_query_reading_only_the_query(tmp_path):
    cache, persist = tmp_path / "cache", tmp_path / "storage"
    assert int(_run(LLAMAINDEX_BUILD, str(persist), str(LONG), cache=cache)) > 8
    seen = json.loads(_run(RECORD + LLAMAINDEX_QUERY, str(persist), QUESTION, cache=cache))
    assert set(seen["read"]) == {QUESTION}  # the model read the query, and no passage
    assert seen["encoded"] == 0 and any("derailleur" in t.lower() for t in seen["kept"])
    # The same process without the on-disk cache reads the passages at query time (what this removes).
    cold = json.loads(_run(RECORD + LLAMAINDEX_QUERY, str(persist), QUESTION, cache=Path("off")))
    assert cold["encoded"] > 0 and set(cold["read"]) - {QUESTION}
    assert cold["kept"] == seen["kept"]  # the same context, read at ingestion or at query time


def test_a_reloaded_langchain_chroma_store_needs_no_chunks_and_reads_only_the_query(tmp_path):
    cache, persist = tmp_path / "cache", tmp_path / "chroma"
    chunks = int(_run(LANGCHAIN_BUILD, str(persist), str(LONG), cache=cache))
    seen = json.loads(_run(RECORD + LANGCHAIN_QUERY, str(persist), QUESTION, cache=cache))
    assert seen["rows"] == chunks  # every chunk listed from the store, none passed in
    assert set(seen["read"]) == {QUESTION} and seen["encoded"] == 0
    assert seen["vectors_embedded"] == 0  # chunks added without ids: the store's own vectors are read
    assert any("derailleur" in t.lower() for t in seen["kept"])
    cold = json.loads(_run(RECORD + LANGCHAIN_QUERY, str(persist), QUESTION, cache=Path("off")))
    assert cold["encoded"] > 0 and cold["kept"] == seen["kept"]


def _fresh_nodes(n: int) -> list:
    import uuid

    from llama_index.core.schema import TextNode

    tag = uuid.uuid4().hex[:8]  # texts no earlier test kept, in memory or on disk
    return [TextNode(text=f"Note {tag}-{i}: the derailleur moves the chain between sprockets, gear {i}.") for i in range(n)]


def test_nodes_embedded_by_another_model_are_read_at_query_time_with_one_warning_or_ahead_by_warm_up(minilm, monkeypatch, caplog):
    import logging

    from llama_index.core.schema import NodeWithScore, QueryBundle

    import meve.scoring.token_vectors as tv
    from llamaindex_meve import MeVePostprocessor

    monkeypatch.setattr(tv, "_WARNED", set())
    cold = [NodeWithScore(node=n, score=1.0) for n in _fresh_nodes(4)]
    post = MeVePostprocessor()
    with caplog.at_level(logging.WARNING, logger="meve"):
        post.postprocess_nodes(cold, QueryBundle(QUESTION))
        post.postprocess_nodes([NodeWithScore(node=n, score=1.0) for n in _fresh_nodes(3)], QueryBundle(QUESTION))
    said = [r.getMessage() for r in caplog.records if "at query time" in r.getMessage()]
    assert len(said) == 1 and "warm_up" in said[0] and "MeVeEmbedding" in said[0]  # once, naming both fixes

    ahead = _fresh_nodes(5)
    scorer = post._models.scorer
    assert post.warm_up(ahead, show_progress=False) == 5
    before = scorer.encoded_at_query_time
    kept = post.postprocess_nodes([NodeWithScore(node=n, score=1.0) for n in ahead], QueryBundle(QUESTION))
    assert kept and scorer.encoded_at_query_time == before  # read ahead: the query read none of them
    assert post.warm_up(ahead, show_progress=False) == 0  # kept already: not read again


def test_meves_own_ingestion_keeps_its_vectors_itself_and_the_disk_cache_serves_the_framework_paths(minilm):
    import uuid

    from meve import MeVe
    from meve.scoring.token_vectors import shared_cache, text_key

    disk = shared_cache(minilm).disk
    assert disk is not None  # the suite's MEVE_CACHE_DIR, as a user's ~/.cache/meve
    tag = uuid.uuid4().hex[:8]
    texts = [f"Corpus {tag}: the derailleur moves the chain, part {i}." for i in range(3)]
    m = MeVe.from_texts(texts, embedder=minilm)
    assert disk.get_many([text_key(t) for t in texts]) == [None] * 3  # its corpus keeps them: no copy on disk
    m.run(QUESTION)
    assert m.scorer.encoded_at_query_time == 0
    from langchain_meve import MeVeEmbeddings

    other = [f"Chunk {tag}: a chain wears out after {i} thousand km." for i in range(2)]
    MeVeEmbeddings().embed_documents(other)
    assert all(hit is not None for hit in disk.get_many([text_key(t) for t in other]))  # indexing through the framework path: kept
