"""Speed, side by side in one process on the same models: MeVe vs the LangChain and LlamaIndex
compositions a user would build today; BM25 backends; verification cost; meve's own overhead.

The cross-encoder for every system is all-MiniLM-L6-v2's encoder with a fresh (random) 1-logit
head, saved once under benchmarks/.cache: exactly the architecture and cost of
cross-encoder/ms-marco-MiniLM-L-6-v2 (which cannot be downloaded here). Its scores mean nothing,
so these runs measure time, not quality.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.harness.common import CACHE, MEVE_KNOBS, acting, default_verifier, embedder, li_verifier, pct, prime
from meve import CrossEncoderScorer, MeVe, MeVeConfig, SentenceTransformerEmbedder
from meve.core.text import split_sentences
from meve.retrieval.bm25 import Bm25sBackend, IncrementalBM25, RankBM25Backend, top_k
from meve.scoring.cosine import sigmoid
from meve.scoring.late_interaction import LateInteractionScorer, TokenVectorCache, dequantize, text_key
from meve.scoring.protocols import Scoring


def cross_encoder_path() -> str:
    path = CACHE / "minilm-l6-cross-encoder-random-head"
    if not (path / "config.json").exists():
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from meve.scoring.registry import default_model_path

        model = AutoModelForSequenceClassification.from_pretrained(default_model_path(), num_labels=1)
        model.save_pretrained(path)
        AutoTokenizer.from_pretrained(default_model_path()).save_pretrained(path)
    return str(path)


def _draws(data: Path, n: int) -> tuple[list[str], list[str], list[list[tuple[int, int, int]]]]:
    """The HotpotQA paragraphs, n passages (the paragraphs, then 3-sentence combinations of their
    sentences, deterministic), and for each drawn passage its sentences as (paragraph, start, end)."""
    q500 = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    paras = list(dict.fromkeys(f"{t}: {' '.join(s)}" for q in q500 for t, s in q["context"]))
    if n <= len(paras):
        return paras, paras[:n], []
    sents = []
    for i, p in enumerate(paras):
        title, body = p.split(": ", 1)
        at = 0
        for s in split_sentences(body):
            start = body.index(s, at)
            at = start + len(s)
            sents.append((i, len(title) + 2 + start, len(title) + 2 + at))
    rng = np.random.default_rng(0)
    picks = [[sents[i] for i in rng.integers(len(sents), size=3)] for _ in range(n - len(paras))]
    return paras, paras + [" ".join(paras[p][a:b] for p, a, b in pick) for pick in picks], picks


def drawn_vectors(pick: Sequence[tuple[int, int, int]], paras: Sequence[str], vecs: np.ndarray, rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A drawn passage's vectors from its sentences' paragraphs (``pick``: paragraph, start, end):
    the normalised sum of the paragraphs' dense vectors, and the slices of their per-token rows
    (token vectors or their codes) that the sentences cover, by character position."""
    v = np.sum([vecs[p] for p, _, _ in pick], axis=0)
    rows_of = [rows[p][len(rows[p]) * a // len(paras[p]) : len(rows[p]) * b // len(paras[p])] for p, a, b in pick]
    return (v / (np.linalg.norm(v) or 1.0)).astype(np.float32), np.concatenate(rows_of)


def corpus(data: Path, n: int) -> list[str]:
    """n passages: HotpotQA paragraphs, then 3-sentence combinations of their sentences (deterministic)."""
    return _draws(data, n)[1]


def queries(data: Path, n: int) -> list[str]:
    q500 = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    return [q["question"] for q in q500[:n]]


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


class _TimedScorer:
    """A scorer proxy that adds up the seconds spent in model scoring, so overhead = wall - model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def score(self, query: str, passages: Any, query_vec: Any = None) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.score(query, passages, query_vec)
        finally:
            self.seconds += time.perf_counter() - t0

    def timing(self, verifier: Scoring) -> Scoring:
        """``verifier`` (the inner scorer's, as a MeVe would run it) with its sentence scoring
        timed on this clock too. No shared pass: the race serves dense vectors from its cache."""

        def spans(query: str, texts: Any, spans: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return verifier.spans(query, texts, spans)
            finally:
                self.seconds += time.perf_counter() - t0

        return Scoring(self, spans)


class _PeakRSS:
    """Peak resident memory above the starting point while the block runs (sampled every 5 ms),
    and what is still held when it ends: a build's transient peak can be far above what it keeps."""

    def start(self) -> _PeakRSS:
        self.base = self.peak = _rss_mb()
        self._stop = threading.Event()

        def sample() -> None:
            while not self._stop.wait(0.005):
                self.peak = max(self.peak, _rss_mb())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> _PeakRSS:
        self._stop.set()
        self._thread.join()
        self.held_mb = round(_rss_mb() - self.base, 1)
        self.peak_mb = round(max(self.peak, _rss_mb()) - self.base, 1)
        return self


class _TimedStore:
    """The vector store with its query (the ANN search and the fetch of the hits) timed, so
    meve's overhead can exclude it as the target says."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def query(self, vector: Any, k: int) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.query(vector, k)
        finally:
            self.seconds += time.perf_counter() - t0


class _RaceEmbedder:
    """The benchmarks' cached MiniLM, except for drawn passages, whose vectors are derived (see
    :func:`race_corpus`); queries are always encoded for real (and cached)."""

    def __init__(self, inner: Any, derived: dict[str, np.ndarray]) -> None:
        self.inner, self.derived, self.name = inner, derived, inner.name

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        real = [t for t in texts if t not in self.derived]
        found = dict(zip(real, self.inner.encode(real), strict=True)) if real else {}
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        return np.stack([self.derived[t] if t in self.derived else found[t] for t in texts])


def race_corpus(data: Path, n: int, li: LateInteractionScorer) -> tuple[list[str], _RaceEmbedder, TokenVectorCache]:
    """corpus(data, n), its real paragraphs encoded for real (dense and token vectors, one
    forward pass, cached on disk), and the drawn passages' vectors derived from them, as the
    scale run makes them: encoding 100k passages takes this CPU about two hours. A drawn
    passage's dense vector is the normalised sum of its three sentences' paragraphs' vectors; its
    token vectors are the slices of those paragraphs' token vectors its sentences cover (by
    character position). The returned cache holds every passage's token vectors, as if kept at
    ingestion (the real ones are also kept in ``li``'s, which is saved to disk)."""
    paras, texts, picks = _draws(data, n)
    real = texts[: min(n, len(paras))]
    prime(li, paras if picks else real, "race paragraphs")
    emb = embedder()
    kept = TokenVectorCache(max_bytes=16 * 2**30)
    stored = {k: (q, s) for k, q, s in li.cache.quantized()}
    for text in real:
        kept.put_quantized(text_key(text), *stored[text_key(text)])
    derived: dict[str, np.ndarray] = {}
    if picks:
        pvecs = emb.encode(paras)
        ptoks = [dequantize(*stored[text_key(p)]) for p in paras]
        for text, pick in zip(texts[len(paras) :], picks, strict=True):
            derived[text], tok = drawn_vectors(pick, paras, pvecs, ptoks)
            kept.put(text_key(text), tok)
    return texts, _RaceEmbedder(emb, derived), kept


def _st_cross_encoder(path: str, pairs: list[int]) -> Any:
    """The same sentence-transformers CrossEncoder behind LangChain's BaseCrossEncoder interface
    (``pairs`` collects how many pairs each call scores)."""
    from langchain_community.cross_encoders.base import BaseCrossEncoder
    from sentence_transformers import CrossEncoder

    class STCrossEncoder(BaseCrossEncoder):
        def __init__(self) -> None:
            self.model = CrossEncoder(path, device="cpu")

        def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
            pairs.append(len(text_pairs))
            return [float(x) for x in self.model.predict(text_pairs, show_progress_bar=False)]

    return STCrossEncoder()


@dataclass
class _Arm:
    """One system answering a query: ``run`` it; ``model`` and ``ann`` are the clocks (seconds) of
    its verifier and its vector search where they are measured; ``results`` keeps meve's results."""

    run: Callable[[str], Any]
    model: _TimedScorer | None = None
    ann: _TimedStore | None = None
    results: list[Any] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    core_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)
    ann_ms: list[float] = field(default_factory=list)


# What each arm is. Same-work groups: the same cross-encoder in every "_ce" arm, meve's default
# verifier (late interaction over token vectors kept at ingestion) in every "_meve_verifier" arm
# and in meve_default; the "_default" arms are each library's end-to-end default, not the same work.
RACE_ARMS = {
    "meve_ce": "MeVe, shipped config, the cross-encoder as verifier",
    "langchain_ce": "EnsembleRetriever (Chroma k + BM25Retriever k, RRF, cut to k) -> CrossEncoderReranker top 10 -> EmbeddingsRedundantFilter",
    "llamaindex_ce": "QueryFusionRetriever (vector k + BM25 k, reciprocal rank, k) -> SentenceTransformerRerank top 10 -> SimilarityPostprocessor 0.5",
    "meve_default": "MeVe, shipped config and verifier (token vectors kept at ingestion)",
    "langchain_meve_verifier": "the same ensemble -> MeVeCompressor (meve's default verifier and phases) as the ContextualCompressionRetriever's compressor",
    "llamaindex_meve_verifier": "the same fusion -> llamaindex_meve RelevanceVerifier -> RedundancyFilter (meve's default verifier)",
    "meve_default_query_time": "MeVe's default verifier with nothing kept: candidates encoded at query time (LRU), as over a collection built without meve",
    "langchain_default": "vector store as_retriever() (k 4, dense only, no verification): LangChain's end-to-end default",
    "llamaindex_default": "index.as_retriever() (top 2, dense only, no verification): LlamaIndex's end-to-end default",
}
SAME_WORK = {"ce": ("meve_ce", "langchain_ce", "llamaindex_ce"), "meve_verifier": ("meve_default", "langchain_meve_verifier", "llamaindex_meve_verifier")}


def race(data: Path, sizes: list[int], n_queries: int = 20, k: int = 20) -> dict[str, Any]:
    """Every arm built over the same passages and vectors, then timed query by query in turn (the
    order rotated each query), so a slow stretch of this shared CPU falls on every arm alike."""
    ce_path = cross_encoder_path()
    qs = queries(data, n_queries)
    li, disk = default_verifier()
    config = MeVeConfig(k_init=k, t_max=512)
    rows = [_race_one(data, n, qs, li, disk, config, ce_path) for n in sizes]
    return {
        "rows": rows,
        "k": k,
        "queries": n_queries,
        "arms": RACE_ARMS,
        "same_work": {g: list(a) for g, a in SAME_WORK.items()},
        "cross_encoder": "MiniLM-L6 encoder + random 1-logit head (timing only)",
        "vectors": "the 4,943 HotpotQA paragraphs encoded for real; passages drawn beyond them: vectors derived from their sentences' paragraphs",
        "meve_config": acting({name: getattr(MeVeConfig(), name) for name in MEVE_KNOBS}),
    }


def _race_one(data: Path, n: int, qs: list[str], li: LateInteractionScorer, disk: Any, config: MeVeConfig, ce_path: str) -> dict[str, Any]:
    """One size of :func:`race`: build every arm, time them interleaved, return the row."""
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker, DocumentCompressorPipeline
    from langchain_community.document_transformers import EmbeddingsRedundantFilter
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables import RunnableLambda
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.postprocessor import SentenceTransformerRerank, SimilarityPostprocessor
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import BaseNode, QueryBundle, TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LIBM25Retriever
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from langchain_meve import MeVeCompressor, MeVeRetriever
    from llamaindex_meve import MeVeEmbedding, RedundancyFilter, RelevanceVerifier
    from meve.retrieval.chroma import chroma_client

    k = config.k_init
    t0 = time.perf_counter()
    texts, emb, kept = race_corpus(data, n, li)
    emb.encode([*qs, WARM_UP])
    embed_s = time.perf_counter() - t0
    disk.save(li.cache)
    emb.inner.save()
    row: dict[str, Any] = {
        "passages": n,
        "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "rerun": f"python -m benchmarks.run --full --only race --race-sizes {n}",
        "embed_s_uncached_or_cached": round(embed_s, 1),
    }
    ids = [f"p{i}" for i in range(n)]

    class LCEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str], _emb: Any = emb) -> list[list[float]]:
            return _emb.encode(texts).tolist()

        def embed_query(self, text: str, _emb: Any = emb) -> list[float]:
            return _emb.encode([text])[0].tolist()

    def verifier() -> _TimedScorer:
        # Each arm its own late-interaction scorer over the same kept token vectors: one sharing
        # another's query memory would skip the query's forward pass the other paid for.
        own = LateInteractionScorer(SentenceTransformerEmbedder(), cache_bytes=0)
        own.cache = kept
        return _TimedScorer(own)

    arms: dict[str, _Arm] = {}
    gc.collect()
    ce = _TimedScorer(CrossEncoderScorer(ce_path))
    mem, t0 = _PeakRSS().start(), time.perf_counter()
    built = MeVeRetriever.from_texts(texts, ids=ids, embedder=emb, scorer=ce.timing(Scoring.of(ce.inner)), config=config, batch_size=2048)
    row["meve_build_s"] = round(time.perf_counter() - t0, 2)
    mem.stop()
    row["meve_build_peak_mb"], row["meve_build_held_mb"] = mem.peak_mb, mem.held_mb
    ann = _TimedStore(built.meve.store)

    def meve_arm(timed: _TimedScorer, scoring: Scoring) -> _Arm:
        # The same in-memory collection from_texts made: nothing else writes to it, so no catch-up, as shipped.
        core = MeVe(store=ann, lexical=built.meve.lexical, config=config, embedder=emb, scorer=timed.timing(scoring), follow_replicas=False)
        arm = _Arm(run=lambda q: None, model=timed, ann=ann)
        retriever, run = MeVeRetriever(meve=core), core.run

        def keep(query: str, **kw: Any) -> Any:
            t0 = time.perf_counter()
            arm.results.append(run(query, **kw))
            arm.core_ms.append((time.perf_counter() - t0) * 1000)
            return arm.results[-1]

        core.run = keep  # type: ignore[method-assign]
        arm.run = retriever.invoke
        return arm

    arms["meve_ce"] = meve_arm(ce, Scoring.of(ce.inner))
    timed_li = verifier()
    arms["meve_default"] = meve_arm(timed_li, li_verifier(timed_li.inner))
    cold = _TimedScorer(LateInteractionScorer(SentenceTransformerEmbedder()))
    arms["meve_default_query_time"] = meve_arm(cold, li_verifier(cold.inner))

    gc.collect()
    mem, t0 = _PeakRSS().start(), time.perf_counter()
    docs = [Document(page_content=t, id=i) for t, i in zip(texts, ids, strict=True)]
    store = Chroma(collection_name=f"lc{time.time_ns()}", embedding_function=LCEmbeddings(), client=chroma_client())
    for i in range(0, n, 2048):
        store.add_documents(docs[i : i + 2048], ids=ids[i : i + 2048])
    # The ensemble's fused list (weighted RRF of k dense and k BM25 hits) cut to its top k, as
    # LlamaIndex's QueryFusionRetriever does: the reranker scores k pairs like MeVe's verifier.
    ensemble = EnsembleRetriever(retrievers=[store.as_retriever(search_kwargs={"k": k}), BM25Retriever.from_documents(docs, k=k)], weights=[0.5, 0.5])
    fused_top_k = ensemble | RunnableLambda(lambda found: found[:k])
    row["langchain_build_s"] = round(time.perf_counter() - t0, 2)
    mem.stop()
    row["langchain_build_peak_mb"], row["langchain_build_held_mb"] = mem.peak_mb, mem.held_mb
    lc_pairs: list[int] = []
    rerank_filter = DocumentCompressorPipeline(
        transformers=[CrossEncoderReranker(model=_st_cross_encoder(ce_path, lc_pairs), top_n=10), EmbeddingsRedundantFilter(embeddings=LCEmbeddings())]
    )
    arms["langchain_ce"] = _Arm(run=ContextualCompressionRetriever(base_compressor=rerank_filter, base_retriever=fused_top_k).invoke)
    lc_li = verifier()
    compressor = MeVeCompressor(config=config, embedder=emb, scorer=lc_li.timing(li_verifier(lc_li.inner)))
    arms["langchain_meve_verifier"] = _Arm(run=ContextualCompressionRetriever(base_compressor=compressor, base_retriever=fused_top_k).invoke, model=lc_li)
    arms["langchain_default"] = _Arm(run=store.as_retriever().invoke)

    gc.collect()
    mem, t0 = _PeakRSS().start(), time.perf_counter()
    nodes: list[BaseNode] = [TextNode(text=t, id_=i) for t, i in zip(texts, ids, strict=True)]
    li_store = ChromaVectorStore(chroma_collection=chroma_client().create_collection(f"li{time.time_ns()}"))
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=li_store), embed_model=MeVeEmbedding(emb), insert_batch_size=2048)
    fusion = QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=k), LIBM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k)],
        similarity_top_k=k,
        num_queries=1,
        mode=FUSION_MODES.RECIPROCAL_RANK,
        use_async=False,
        llm=MockLLM(),
    )
    row["llamaindex_build_s"] = round(time.perf_counter() - t0, 2)
    mem.stop()
    row["llamaindex_build_peak_mb"], row["llamaindex_build_held_mb"] = mem.peak_mb, mem.held_mb
    li_li = verifier()
    chains: dict[str, list[Any]] = {
        "llamaindex_ce": [SentenceTransformerRerank(model=ce_path, top_n=10, device="cpu"), SimilarityPostprocessor(similarity_cutoff=0.5)],
        "llamaindex_meve_verifier": [RelevanceVerifier(embedder=emb, scorer=li_li.timing(li_verifier(li_li.inner))), RedundancyFilter(embedder=emb)],
    }
    for name, chain in chains.items():

        def li_query(q: str, chain: list[Any] = chain) -> Any:
            bundle = QueryBundle(q)
            found = fusion.retrieve(bundle)
            for step in chain:
                found = step.postprocess_nodes(found, bundle)
            return found

        arms[name] = _Arm(run=li_query, model=li_li if name == "llamaindex_meve_verifier" else None)
    li_default = index.as_retriever()
    arms["llamaindex_default"] = _Arm(run=li_default.retrieve)

    _interleave(arms, qs)
    for name, arm in arms.items():
        _report(row, name, arm)
    row["langchain_ce_pairs_p50"] = pct(lc_pairs[1:], 50)
    for mine, *others in SAME_WORK.values():
        for other in others:
            row[f"{other}_over_{mine}_p50"] = round(row[f"{other}_ms_p50"] / row[f"{mine}_ms_p50"], 2)
    for other in ("langchain_default", "llamaindex_default"):
        row[f"{other}_over_meve_default_p50"] = round(row[f"{other}_ms_p50"] / row["meve_default_ms_p50"], 2)
    print(row, flush=True)
    return row


WARM_UP = "Which country is the warm-up question about?"


def _interleave(arms: dict[str, _Arm], qs: list[str]) -> None:
    """Each arm answers a warm-up question (models load, caches fill), then every question in turn,
    the arms' order rotated by one each question."""
    names = list(arms)
    for name in names:
        arms[name].run(WARM_UP)
        arms[name].results.clear()
        arms[name].core_ms.clear()
    for i, q in enumerate(qs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            arm = arms[name]
            model0 = arm.model.seconds if arm.model else 0.0
            ann0 = arm.ann.seconds if arm.ann else 0.0
            t0 = time.perf_counter()
            arm.run(q)
            arm.ms.append((time.perf_counter() - t0) * 1000)
            if arm.model:
                arm.model_ms.append((arm.model.seconds - model0) * 1000)
            if arm.ann:
                arm.ann_ms.append((arm.ann.seconds - ann0) * 1000)


def _report(row: dict[str, Any], name: str, arm: _Arm) -> None:
    row[f"{name}_ms_p50"], row[f"{name}_ms_p95"] = round(pct(arm.ms, 50), 1), round(pct(arm.ms, 95), 1)
    if arm.model_ms:
        row[f"{name}_model_ms_p50"] = round(pct(arm.model_ms, 50), 1)
    if arm.ann_ms:
        # meve's own work: everything but the verifier's model time and the vector search (the
        # query's dense vector comes from the cache for every system).
        own = [t - m - a for t, m, a in zip(arm.ms, arm.model_ms, arm.ann_ms, strict=True)]
        row[f"{name}_ann_ms_p50"] = round(pct(arm.ann_ms, 50), 2)
        row[f"{name}_overhead_ms_p50"] = round(pct(own, 50), 2)
        # The same inside MeVe.run, without the LangChain retriever around it (its callbacks and Documents).
        core = [t - m - a for t, m, a in zip(arm.core_ms, arm.model_ms, arm.ann_ms, strict=True)]
        row[f"{name}_core_overhead_ms_p50"] = round(pct(core, 50), 2)
    if arm.results:
        row[f"{name}_pairs_p50"] = pct([sum(rec.info.get("pairs_scored", 0) for rec in r.trace) for r in arm.results], 50)
        row[f"{name}_fallback_rate"] = round(float(np.mean([bool(r.phase("fallback").info.get("triggered")) for r in arm.results])), 2)
        phases = [rec.phase for rec in arm.results[0].trace]
        row[f"{name}_phase_ms_p50"] = {p: round(pct([r.phase(p).ms for r in arm.results], 50), 2) for p in phases}


def bm25_backends(data: Path, sizes: list[int], n_queries: int = 50) -> list[dict[str, Any]]:
    qs = queries(data, n_queries)
    rows = []
    for n in sizes:
        texts = corpus(data, n)
        row: dict[str, Any] = {"passages": n}
        for name, cls in (("bm25s", Bm25sBackend), ("rank_bm25", RankBM25Backend), ("incremental", IncrementalBM25)):
            t0 = time.perf_counter()
            bm = cls(texts)
            bm.get_scores("warm up index")
            row[f"{name}_build_s"] = round(time.perf_counter() - t0, 3)
            lat = []
            for q in qs:
                t0 = time.perf_counter()
                top_k(bm.get_scores(q), 10)
                lat.append((time.perf_counter() - t0) * 1000)
            row[f"{name}_query_ms_p50"] = round(pct(lat, 50), 3)
            if name != "rank_bm25":
                # A live corpus: one passage added, then a query (bm25s re-indexes everything on that query).
                lat = []
                for i, q in enumerate(qs[:5]):
                    t0 = time.perf_counter()
                    bm.add([f"{texts[i]} (revised)"])
                    top_k(bm.get_scores(q), 10)
                    lat.append((time.perf_counter() - t0) * 1000)
                row[f"{name}_add_then_query_ms_p50"] = round(pct(lat, 50), 3)
        row["build_ratio_rank_over_bm25s"] = round(row["rank_bm25_build_s"] / row["bm25s_build_s"], 1)
        row["query_ratio_rank_over_bm25s"] = round(row["rank_bm25_query_ms_p50"] / row["bm25s_query_ms_p50"], 1)
        rows.append(row)
        print(row, flush=True)
    return rows


def onnx_cross_encoder(path: str, *, int8: bool) -> Any:
    """The same cross-encoder exported to ONNX and run by onnxruntime (int8: dynamic weight quantisation).

    Returns ``score(query, passages) -> logits`` with meve's length-sorted batching, or None when the
    ``onnx`` package (needed to export) is missing.
    """
    try:
        import onnx
        import onnxruntime as ort
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError:
        return None
    out_dir = CACHE / "onnx"
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32, q8 = out_dir / "cross-encoder.onnx", out_dir / "cross-encoder-int8.onnx"
    tok = AutoTokenizer.from_pretrained(path)
    if not fp32.exists():
        model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        enc = tok(["q"] * 2, ["a passage"] * 2, return_tensors="pt", padding=True)
        names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
        axes = {k: {0: "batch", 1: "seq"} for k in names} | {"logits": {0: "batch"}}
        torch.onnx.export(
            model, tuple(enc[k] for k in names), str(fp32), input_names=names, output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False
        )
    if int8 and not q8.exists():
        quantize_dynamic(str(fp32), str(q8), weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(str(q8 if int8 else fp32), options, providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}

    def score(query: str, passages: list[str], batch_size: int = 32) -> np.ndarray:
        order = np.argsort([len(p) for p in passages], kind="stable")
        out = np.empty(len(passages))
        for b in range(0, len(passages), batch_size):
            idx = order[b : b + batch_size]
            enc = tok([query] * len(idx), [passages[i] for i in idx], truncation=True, padding=True, return_tensors="np")
            out[idx] = session.run(None, {k: v.astype(np.int64) for k, v in enc.items() if k in inputs})[0][:, -1]
        return out

    return score


def verification_cost(data: Path, n_queries: int = 20, k: int = 20) -> dict[str, Any]:
    """meve's scorer (length-sorted batches), its 256-token cap, and onnxruntime fp32/int8 vs a plain
    CrossEncoder.predict on the same pairs.

    Agreement is on which candidates pass, at a threshold set per query to the median of the plain
    scores, so half pass: the random head's scores sit in a narrow band, and any fixed tau would put
    them all on one side and make agreement trivially 100%.
    """
    import torch
    from sentence_transformers import CrossEncoder

    ce_path = cross_encoder_path()
    emb = embedder()
    texts = corpus(data, 2000)
    meve = MeVe.from_texts(texts, embedder=emb, scorer=CrossEncoderScorer(ce_path), config=MeVeConfig(k_init=k))
    plain = CrossEncoder(ce_path, device="cpu")
    arms: dict[str, Any] = {
        "meve_sorted_batches": CrossEncoderScorer(ce_path).score,
        "meve_max_length_256": CrossEncoderScorer(ce_path, max_length=256).score,
    }
    for name, int8 in (("onnxruntime_fp32", False), ("onnxruntime_int8", True)):
        fn = onnx_cross_encoder(ce_path, int8=int8)
        if fn is not None:
            arms[name] = lambda q, c, fn=fn: sigmoid(fn(q, c))
    times: dict[str, list[float]] = {"plain": [], **{a: [] for a in arms}}
    agree: dict[str, list[float]] = {a: [] for a in arms}
    for q in queries(data, n_queries):
        assert meve.store is not None
        cands = [p.text for p in meve.store.query(emb.encode([q])[0], k)]
        pairs = [(q, c) for c in cands]
        plain.predict(pairs[:2], show_progress_bar=False)
        t0 = time.perf_counter()
        ref = np.asarray(plain.predict(pairs, batch_size=32, show_progress_bar=False, activation_fn=torch.nn.Sigmoid()))
        times["plain"].append(time.perf_counter() - t0)
        tau = float(np.median(ref))
        for name, fn in arms.items():
            t0 = time.perf_counter()
            got = np.asarray(fn(q, cands))
            times[name].append(time.perf_counter() - t0)
            agree[name].append(float(np.mean((ref >= tau) == (got >= tau))))
    base = pct(times["plain"], 50)
    return {
        "pairs_per_query": k,
        "queries": n_queries,
        "agreement_threshold": "per-query median of the plain scores (half the candidates pass)",
        "plain_predict_ms_p50": round(base * 1000, 1),
        "arms": {
            name: {
                "ms_p50": round(pct(times[name], 50) * 1000, 1),
                "ratio_over_plain": round(pct(times[name], 50) / base, 3),
                "pass_agreement": round(float(np.mean(agree[name])), 4),
            }
            for name in arms
        },
        "not_run": [] if "onnxruntime_fp32" in arms else ["onnxruntime (pip install onnx to export)"],
    }
