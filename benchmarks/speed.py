"""Speed, side by side in one process on the same models: MeVe vs the LangChain and LlamaIndex
compositions a user would build today; BM25 backends; verification cost; meve's own overhead.

The cross-encoder for every system is all-MiniLM-L6-v2's encoder with a fresh (random) 1-logit
head, saved once under benchmarks/.cache: exactly the architecture and cost of
cross-encoder/ms-marco-MiniLM-L-6-v2 (which cannot be downloaded here). Its scores mean nothing,
so these runs measure time, not quality.
"""

from __future__ import annotations

import functools
import gc
import json
import threading
import time
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
from meve.scoring.late_interaction import LateInteractionScorer
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


def corpus(data: Path, n: int) -> list[str]:
    """n passages: HotpotQA paragraphs, then 3-sentence combinations of their sentences (deterministic)."""
    q500 = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    paras = list(dict.fromkeys(f"{t}: {' '.join(s)}" for q in q500 for t, s in q["context"]))
    if n <= len(paras):
        return paras[:n]
    sents = [s for p in paras for s in split_sentences(p.split(": ", 1)[1])]
    rng = np.random.default_rng(0)
    extra = [" ".join(sents[i] for i in rng.integers(len(sents), size=3)) for _ in range(n - len(paras))]
    return paras + extra


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


def _time(fn, qs: list[str]) -> list[float]:
    fn(qs[0])  # warm-up (loads models, fills query caches)
    out = []
    for q in qs:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


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


def race(data: Path, sizes: list[int], n_queries: int = 20, k: int = 20, kept_up_to: int = 100_000) -> dict[str, Any]:
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
    from llama_index.core.schema import BaseNode, TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LIBM25Retriever
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from langchain_meve import MeVeRetriever
    from llamaindex_meve import MeVeEmbedding
    from meve.retrieval.chroma import chroma_client

    emb = embedder()
    ce_path = cross_encoder_path()
    qs = queries(data, n_queries)

    class CachedLCEmbeddings(Embeddings):
        def embed_documents(self, texts):
            return emb.encode(texts).tolist()

        def embed_query(self, text):
            return emb.encode([text])[0].tolist()

    rows = []
    for n in sizes:
        texts = corpus(data, n)
        t0 = time.perf_counter()
        emb.encode(texts)  # once, cached on disk: index builds below exclude model time
        embed_s = time.perf_counter() - t0
        emb.save()
        row: dict[str, Any] = {
            "passages": n,
            "measured": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rerun": f"python -m benchmarks.run --full --only race --race-sizes {n}",
            "embed_s_uncached_or_cached": round(embed_s, 1),
        }
        ids = [f"p{i}" for i in range(n)]

        gc.collect()
        timed = _TimedScorer(CrossEncoderScorer(ce_path))
        mem, t0 = _PeakRSS().start(), time.perf_counter()
        meve = MeVeRetriever.from_texts(
            texts, ids=ids, embedder=emb, scorer=timed.timing(Scoring.of(timed.inner)), config=MeVeConfig(k_init=k, t_max=512), batch_size=2048
        )
        row["meve_build_s"] = round(time.perf_counter() - t0, 2)
        mem.stop()
        row["meve_build_peak_mb"], row["meve_build_held_mb"] = mem.peak_mb, mem.held_mb
        traces: list[Any] = []
        model_ms: list[float] = []
        core_run = meve.meve.run

        def run_and_keep(query: str, _run: Any = core_run, _timed: Any = timed, _traces: Any = traces, _model: Any = model_ms, **kw: Any) -> Any:
            before = _timed.seconds
            result = _run(query, **kw)
            _traces.append(result)
            _model.append((_timed.seconds - before) * 1000)
            return result

        meve.meve.run = run_and_keep  # type: ignore[method-assign]
        _time_meve(row, "meve", meve, qs, traces, model_ms)

        # MeVe's default verifier (calibrated late interaction) over the same store, in its two
        # modes. "meve_default": token vectors kept at ingestion, as MeVe.from_texts does (one
        # forward pass per passage gives the dense and the token vectors); the race's dense vectors
        # come from the embedding cache, so the passages' token vectors are made here once (about
        # 20 minutes for 100k passages on this CPU) and cached on disk. "meve_default_query_time": nothing kept,
        # each query's candidates encoded at query time (LRU-cached), as over a collection built
        # without meve.
        # Two more arms over the same store, in the same run, say what today's defaults cost: the
        # default verifier with dense candidates and no sentence pruning ("meve_default_dense_unpruned"),
        # and the cross-encoder without pruning ("meve_unpruned": the work the compositions do,
        # passages scored and nothing more).
        arms: list[tuple[str, Scoring, dict[str, Any]]] = [("meve_default_query_time", li_verifier(LateInteractionScorer(SentenceTransformerEmbedder())), {})]
        if n <= kept_up_to:
            li, disk = default_verifier("all-MiniLM-L6-v2-race")
            prime(li, texts, "race")
            disk.save(li.cache)
            # Its own scorer over the same kept token vectors: one sharing li's query memory would
            # skip the query's forward pass that the default arm paid for the same questions.
            twin = LateInteractionScorer(SentenceTransformerEmbedder(), cache_bytes=0)
            twin.cache = li.cache
            arms[:0] = [("meve_default", li_verifier(li), {}), ("meve_default_dense_unpruned", li_verifier(twin), {"candidates": "dense", "prune": "none"})]
        arms.append(("meve_unpruned", Scoring.of(timed.inner), {"prune": "none"}))
        for arm, verifier, knobs in arms:
            gc.collect()
            traces, model_ms = [], []
            timed_li = _TimedScorer(verifier.scorer)
            # The same in-memory collection from_texts made for itself: nothing else writes to it, so no catch-up, as shipped.
            core = MeVe(
                store=meve.meve.store,
                lexical=meve.meve.lexical,
                config=MeVeConfig(k_init=k, t_max=512, **knobs),
                embedder=emb,
                scorer=timed_li.timing(verifier),
                follow_replicas=False,
            )
            default = MeVeRetriever(meve=core)
            default.meve.run = functools.partial(run_and_keep, _run=default.meve.run, _timed=timed_li, _traces=traces, _model=model_ms)  # type: ignore[method-assign]
            _time_meve(row, arm, default, qs, traces, model_ms)
            del default

        gc.collect()
        mem, t0 = _PeakRSS().start(), time.perf_counter()
        docs = [Document(page_content=t, id=i) for t, i in zip(texts, ids, strict=True)]
        lc_pairs: list[int] = []
        store = Chroma(collection_name=f"lc{time.time_ns()}", embedding_function=CachedLCEmbeddings(), client=chroma_client())
        for i in range(0, n, 2048):
            store.add_documents(docs[i : i + 2048], ids=ids[i : i + 2048])
        # The ensemble's fused list (weighted RRF of k dense and k BM25 hits) cut to its top k, as
        # LlamaIndex's QueryFusionRetriever does: the reranker scores k pairs like MeVe's verifier
        # (the whole union was ~37; k/2 + k/2 gave 14-17, fewer than MeVe's).
        bm25 = BM25Retriever.from_documents(docs, k=k)
        ensemble = EnsembleRetriever(retrievers=[store.as_retriever(search_kwargs={"k": k}), bm25], weights=[0.5, 0.5])
        fused_top_k = ensemble | RunnableLambda(lambda found: found[:k])
        pipeline = DocumentCompressorPipeline(
            transformers=[
                CrossEncoderReranker(model=_st_cross_encoder(ce_path, lc_pairs), top_n=10),
                EmbeddingsRedundantFilter(embeddings=CachedLCEmbeddings()),
            ]
        )
        lc = ContextualCompressionRetriever(base_compressor=pipeline, base_retriever=fused_top_k)
        row["langchain_build_s"] = round(time.perf_counter() - t0, 2)
        mem.stop()
        row["langchain_build_peak_mb"], row["langchain_build_held_mb"] = mem.peak_mb, mem.held_mb
        lat = _time(lambda q, r=lc: r.invoke(q), qs)
        row["langchain_ms_p50"], row["langchain_ms_p95"] = round(pct(lat, 50), 1), round(pct(lat, 95), 1)
        row["langchain_pairs_p50"] = pct(lc_pairs[1:], 50)

        gc.collect()
        mem, t0 = _PeakRSS().start(), time.perf_counter()
        nodes: list[BaseNode] = [TextNode(text=t, id_=i) for t, i in zip(texts, ids, strict=True)]
        li_store = ChromaVectorStore(chroma_collection=chroma_client().create_collection(f"li{time.time_ns()}"))
        index = VectorStoreIndex(
            nodes, storage_context=StorageContext.from_defaults(vector_store=li_store), embed_model=MeVeEmbedding(emb), insert_batch_size=2048
        )
        fusion = QueryFusionRetriever(
            [index.as_retriever(similarity_top_k=k), LIBM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k)],
            similarity_top_k=k,
            num_queries=1,
            mode=FUSION_MODES.RECIPROCAL_RANK,
            use_async=False,
            llm=MockLLM(),
        )
        rerank = SentenceTransformerRerank(model=ce_path, top_n=10, device="cpu")
        cutoff = SimilarityPostprocessor(similarity_cutoff=0.5)
        row["llamaindex_build_s"] = round(time.perf_counter() - t0, 2)
        mem.stop()
        row["llamaindex_build_peak_mb"], row["llamaindex_build_held_mb"] = mem.peak_mb, mem.held_mb

        li_pairs: list[int] = []

        def li_query(q: str, fusion: Any = fusion, rerank: Any = rerank, cutoff: Any = cutoff, li_pairs: list[int] = li_pairs) -> Any:
            from llama_index.core.schema import QueryBundle

            bundle = QueryBundle(q)
            fused = fusion.retrieve(bundle)
            li_pairs.append(len(fused))
            return cutoff.postprocess_nodes(rerank.postprocess_nodes(fused, bundle), bundle)

        lat = _time(li_query, qs)
        row["llamaindex_ms_p50"], row["llamaindex_ms_p95"] = round(pct(lat, 50), 1), round(pct(lat, 95), 1)
        row["llamaindex_pairs_p50"] = pct(li_pairs[1:], 50)
        for other in ("langchain", "llamaindex"):
            for arm in ("meve", "meve_default", "meve_default_query_time", "meve_default_dense_unpruned", "meve_unpruned"):
                if f"{arm}_ms_p50" in row:
                    row[f"{other}_over_{arm}_p50"] = round(row[f"{other}_ms_p50"] / row[f"{arm}_ms_p50"], 2)
        rows.append(row)
        print(row, flush=True)
        del meve, store, index, lc, fusion
    return {
        "rows": rows,
        "k": k,
        "queries": n_queries,
        "cross_encoder": "MiniLM-L6 encoder + random 1-logit head (timing only)",
        "langchain_ensemble": f"Chroma vector k, BM25Retriever k; fused list cut to its top {k}",
        "meve_config": acting({name: getattr(MeVeConfig(), name) for name in MEVE_KNOBS}),
    }


def _time_meve(row: dict[str, Any], arm: str, retriever: Any, qs: list[str], traces: list[Any], model_ms: list[float]) -> None:
    """p50/p95 through the LangChain retriever's invoke (like the compositions it races), and what
    is not model time; ``traces`` and ``model_ms`` are filled by the wrapped run, warm-up first."""
    lat = _time(lambda q: retriever.invoke(q), qs)
    row[f"{arm}_ms_p50"], row[f"{arm}_ms_p95"] = round(pct(lat, 50), 1), round(pct(lat, 95), 1)
    # Everything but verifier inference (query embeddings are cached for every system).
    overhead = [total - model for total, model in zip(lat, model_ms[1:], strict=True)]
    row[f"{arm}_overhead_ms_p50"] = round(pct(overhead, 50), 2)
    # Pairs the verifier scored per query: the model dominates every system's latency, so this explains the ratios.
    row[f"{arm}_pairs_p50"] = pct([sum(rec.info.get("pairs_scored", 0) for rec in r.trace) for r in traces[1:]], 50)
    row[f"{arm}_fallback_rate"] = round(float(np.mean([bool(r.phase("fallback").info.get("triggered")) for r in traces[1:]])), 2)
    # Where the time goes, phase by phase (verify and fallback include the verifier's own scoring).
    phases = [rec.phase for rec in traces[1].trace] if len(traces) > 1 else []
    row[f"{arm}_phase_ms_p50"] = {name: round(pct([r.phase(name).ms for r in traces[1:]], 50), 2) for name in phases}


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
