"""Each passage read once, at ingestion, in the framework paths (issue 75): the wait a user meets.

Corpus: the SQuAD test articles of the first ``n_queries`` test questions (real Wikipedia text),
each framework's defaults: LlamaIndex ``VectorStoreIndex.from_documents`` (``SentenceSplitter``,
1,024 tokens) persisted with ``storage_context.persist``; LangChain ``RecursiveCharacterTextSplitter``
(1,000 characters, overlap 200) into langchain-chroma with ``persist_directory``, chunks added
without ids (as LangChain's tutorial adds them). Both embed with meve's embeddings
(``MeVeEmbedding`` / ``MeVeEmbeddings``), so the verifier's token vectors are made in the same pass
and kept in the on-disk cache (``MEVE_CACHE_DIR``, a fresh folder per run).

Every step is a new process, as an app's start or restart is:
- ``build``: ingestion timed after the model's load, against the same model in a plain store
  (a LangChain/LlamaIndex embedding over sentence-transformers' ``encode``: it reads a node's first
  254 word pieces) and against the same work (meve's windowed pass over every node, nothing kept:
  the model reading all the text, as meve's ingestion does);
- ``query`` twice (``fresh``: the first start after indexing; ``restart``: another): the process's
  imports and the model's load timed apart, then per question, arms in turn (order rotated): the
  dense top-``k`` alone; a cross-encoder reranker over those ``k`` nodes (LlamaIndex
  ``SentenceTransformerRerank`` / LangChain ``CrossEncoderReranker``, top 3; its model's load timed
  apart); meve's postprocessor / compressor over the same ``k`` nodes (the "meve step"); meve's
  retriever over the whole index (``MeVeRetriever(index)`` / ``MeVeRetriever.from_vectorstore(store)``,
  no chunks passed). "first" is each arm's first question in the process; "p50" the median of the
  others. ``passages_read``: texts other than the question that any model read in the process.
  Loading the persisted index (the framework's own cost, which top-k alone pays too) and building
  meve's components (BM25 over every passage the retriever lists) are timed apart.
The rerankers' cross-encoder is MiniLM-L6 with a one-logit head (``benchmarks.speed.cross_encoder_path``;
timing only, no cross-encoder weights can be had offline); it reads up to 512 pieces of a pair.

    python -m benchmarks.run --full --only read_once
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("llamaindex", "langchain")


def _corpus(data: Path, n_queries: int) -> tuple[list[tuple[str, str]], list[str]]:
    from benchmarks.harness.data import load

    part = load("squad", data, n_queries).splits["test"]
    return list(part.documents), [q.text for q in part.questions[:n_queries]]


def _child(step: str, framework: str, work: Path, data: Path, n_queries: int, k: int) -> dict[str, Any]:
    env = {**os.environ, "MEVE_CACHE_DIR": str(work / "cache")}
    argv = [sys.executable, "-m", "benchmarks.read_once", step, framework, str(work), str(data), str(n_queries), str(k)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"read_once {step} {framework} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(data: Path, n_queries: int = 20, k: int = 10) -> dict[str, Any]:
    """Module docstring."""
    from benchmarks.speed import cross_encoder_path

    t0 = time.perf_counter()
    cross_encoder_path()  # made once, before any timed process
    out: dict[str, Any] = {"protocol": __doc__, "k": k}
    with tempfile.TemporaryDirectory(prefix="meve-read-once-") as tmp:
        for fw in FRAMEWORKS:
            work = Path(tmp) / fw
            work.mkdir()
            build = _child("build", fw, work, data, n_queries, k)
            fresh = _child("query", fw, work, data, n_queries, k)
            restart = _child("query", fw, work, data, n_queries, k)
            out[fw] = {"build": build, "fresh": fresh, "restart": restart, "targets": _targets(build, fresh, restart)}
            shutil.rmtree(work, ignore_errors=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def _targets(build: dict[str, Any], fresh: dict[str, Any], restart: dict[str, Any]) -> dict[str, Any]:
    step = "meve_postprocessor" if "meve_postprocessor" in fresh["arms"] else "meve_compressor"
    retr = fresh["arms"]["meve_retriever"]
    ratios = [round(p["arms"][step]["p50_ms"] / p["arms"]["rerank"]["p50_ms"], 3) for p in (fresh, restart)]
    return {
        "warm_step_ratio_to_rerank": ratios,  # <= 0.25
        "first_query_over_model_load_ms": [round(p["arms"]["meve_retriever"]["first_ms"], 1) for p in (fresh, restart)],  # <= 500
        "passages_read_at_query_time": [p["passages_read"] for p in (fresh, restart)],  # 0
        "ingestion_ratio_same_work": build["ratio_same_work"],  # <= 1.2
        "ingestion_ratio_plain_store": build["ratio_plain"],
        "retriever_first_ms": retr["first_ms"],
    }


# -- the child processes ---------------------------------------------------------------------
def record_model_reads() -> list[str]:
    """Every text any model reads from now on in this process (meve's windowed pass, sentence-transformers' encode)."""
    from sentence_transformers import SentenceTransformer

    import meve.scoring.late_interaction as li

    read: list[str] = []
    fwd, enc = li.forward, SentenceTransformer.encode

    def forward(model: Any, texts: Any, **kw: Any) -> Any:
        read.extend(texts)
        return fwd(model, texts, **kw)

    def encode(self: Any, sentences: Any, *a: Any, **kw: Any) -> Any:
        read.extend([sentences] if isinstance(sentences, str) else list(sentences))
        return enc(self, sentences, *a, **kw)

    li.forward = forward  # type: ignore[assignment]
    SentenceTransformer.encode = encode  # type: ignore[method-assign,assignment]
    return read


def _plain_st() -> Any:
    from meve import SentenceTransformerEmbedder

    st = SentenceTransformerEmbedder()
    st.encode(["load the model first"])
    return st


def _build(framework: str, work: Path, docs: list[tuple[str, str]]) -> dict[str, Any]:
    from meve.scoring.late_interaction import LateInteractionScorer, TokenVectorCache

    st = _plain_st()
    timings: dict[str, float] = {}
    texts = (_build_llamaindex if framework == "llamaindex" else _build_langchain)(st, work, docs, timings)
    # The same work: meve's windowed pass over every text, nothing kept (a private in-memory cache, no disk).
    scorer = LateInteractionScorer(st, cache=TokenVectorCache(0))
    start = time.perf_counter()
    for i in range(0, len(texts), 64):
        scorer._forward(texts[i : i + 64])
    timings["same_work_s"] = time.perf_counter() - start
    return {
        "passages": len(texts),
        **{key: round(v, 1) for key, v in timings.items()},
        "ratio_same_work": round(timings["meve_s"] / timings["same_work_s"], 2),
        "ratio_plain": round(timings["meve_s"] / timings["plain_s"], 2),
    }


def _build_llamaindex(st: Any, work: Path, docs: list[tuple[str, str]], timings: dict[str, float]) -> list[str]:
    """Index and persist with ``MeVeEmbedding``, timed beside a plain embedding; returns the nodes' texts."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.node_parser import SentenceSplitter

    from llamaindex_meve import MeVeEmbedding

    class Plain(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in st.encode([query])[0]]

        def _get_text_embedding(self, text: str) -> list[float]:
            return [float(x) for x in st.encode([text])[0]]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in st.encode(texts)]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    documents = [Document(text=t, metadata={"title": title}) for title, t in docs]
    start = time.perf_counter()
    VectorStoreIndex.from_documents(documents, embed_model=Plain())
    timings["plain_s"] = time.perf_counter() - start
    start = time.perf_counter()
    index = VectorStoreIndex.from_documents(documents, embed_model=MeVeEmbedding())
    timings["meve_s"] = time.perf_counter() - start
    index.storage_context.persist(str(work / "storage"))
    from llama_index.core.schema import MetadataMode

    return [n.get_content(metadata_mode=MetadataMode.EMBED) for n in SentenceSplitter()(documents)]


def _build_langchain(st: Any, work: Path, docs: list[tuple[str, str]], timings: dict[str, float]) -> list[str]:
    """Chunk, add to a persisted langchain-chroma store with ``MeVeEmbeddings``, timed beside a plain embedding; returns the chunks' texts."""
    from langchain_chroma import Chroma
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from langchain_meve import MeVeEmbeddings

    class PlainLC(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return st.encode(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return st.encode([text])[0].tolist()

    chunks = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_documents(
        [Document(page_content=t, metadata={"title": title}) for title, t in docs]
    )
    start = time.perf_counter()
    Chroma.from_documents(chunks, PlainLC(), collection_name="plain")
    timings["plain_s"] = time.perf_counter() - start
    start = time.perf_counter()
    Chroma(collection_name="notes", embedding_function=MeVeEmbeddings(), persist_directory=str(work / "chroma")).add_documents(chunks)
    timings["meve_s"] = time.perf_counter() - start
    return [c.page_content for c in chunks]


def _arms(framework: str, work: Path, k: int, ce_path: str) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """(top-k search: question -> the k nodes or documents, the other arms: (question, top-k) -> output, load times)."""
    return (_arms_llamaindex if framework == "llamaindex" else _arms_langchain)(work, k, ce_path)


def _arms_llamaindex(work: Path, k: int, ce_path: str) -> tuple[Any, dict[str, Any], dict[str, float]]:
    loads: dict[str, float] = {}
    from llama_index.core import StorageContext, load_index_from_storage
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import QueryBundle

    from llamaindex_meve import MeVeEmbedding, MeVePostprocessor, MeVeRetriever

    start = time.perf_counter()
    index = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(work / "storage")), embed_model=MeVeEmbedding())
    loads["index_load_ms"] = (time.perf_counter() - start) * 1000
    dense = index.as_retriever(similarity_top_k=k)
    start = time.perf_counter()
    rerank = SentenceTransformerRerank(model=ce_path, top_n=3, device="cpu")
    loads["cross_encoder_load_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    post, retriever = MeVePostprocessor(), MeVeRetriever(index)
    loads["meve_components_ms"] = (time.perf_counter() - start) * 1000
    arms = {
        "rerank": lambda q, hits: rerank.postprocess_nodes(hits, QueryBundle(q)),
        "meve_postprocessor": lambda q, hits: post.postprocess_nodes(hits, QueryBundle(q)),
        "meve_retriever": lambda q, hits: retriever.retrieve(q),
    }
    return dense.retrieve, arms, loads


def _arms_langchain(work: Path, k: int, ce_path: str) -> tuple[Any, dict[str, Any], dict[str, float]]:
    loads: dict[str, float] = {}
    from langchain_chroma import Chroma
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_classic.retrievers.document_compressors.cross_encoder import BaseCrossEncoder

    from langchain_meve import MeVeCompressor, MeVeEmbeddings, MeVeRetriever

    class STCrossEncoder(BaseCrossEncoder):
        def __init__(self) -> None:
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(ce_path, device="cpu")

        def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
            return [float(x) for x in self.model.predict(text_pairs, show_progress_bar=False)]

    start = time.perf_counter()
    store = Chroma(collection_name="notes", embedding_function=MeVeEmbeddings(), persist_directory=str(work / "chroma"))
    loads["index_load_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    reranker = CrossEncoderReranker(model=STCrossEncoder(), top_n=3)
    loads["cross_encoder_load_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    comp, retriever = MeVeCompressor(), MeVeRetriever.from_vectorstore(store)
    loads["meve_components_ms"] = (time.perf_counter() - start) * 1000
    arms = {
        "rerank": lambda q, hits: reranker.compress_documents(hits, q),
        "meve_compressor": lambda q, hits: comp.compress_documents(hits, q),
        "meve_retriever": lambda q, hits: retriever.invoke(q),
    }
    return store.as_retriever(search_kwargs={"k": k}).invoke, arms, loads


def _query(framework: str, work: Path, questions: list[str], k: int) -> dict[str, Any]:
    from benchmarks.speed import cross_encoder_path

    started = time.perf_counter()
    read = record_model_reads()
    from meve.integration import default_embedder

    imported = time.perf_counter()
    default_embedder().encode(["load"])  # the model's load, timed apart (an app pays it once per process)
    loaded = time.perf_counter()
    read.clear()
    search, arms, loads = _arms(framework, work, k, cross_encoder_path())
    built = time.perf_counter()
    ms: dict[str, list[float]] = {"top_k": [], **{a: [] for a in arms}}
    names = list(arms)
    for j, q in enumerate(questions):
        start = time.perf_counter()
        hits = search(q)
        ms["top_k"].append((time.perf_counter() - start) * 1000)
        for arm in names[j % len(names) :] + names[: j % len(names)]:
            start = time.perf_counter()
            arms[arm](q, hits)
            ms[arm].append((time.perf_counter() - start) * 1000)
    asked = set(questions)
    return {
        "imports_ms": round((imported - started) * 1000, 1),
        "model_load_ms": round((loaded - imported) * 1000, 1),
        "components_ms": round((built - loaded) * 1000, 1),
        **{key: round(v, 1) for key, v in loads.items()},
        "arms": {a: {"first_ms": round(v[0], 1), "p50_ms": round(statistics.median(v[1:]), 1)} for a, v in ms.items()},
        "passages_read": len([t for t in read if t not in asked]),
        "questions": len(questions),
    }


def _main(argv: list[str]) -> None:
    step, framework, work, data, n_queries, k = argv[0], argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]), int(argv[5])
    docs, questions = _corpus(data, n_queries)
    result = _build(framework, work, docs) if step == "build" else _query(framework, work, questions, k)
    print(json.dumps(result))


if __name__ == "__main__":
    _main(sys.argv[1:])
