"""Query-time verification raced against the frameworks' own filters (issue 49), in one process on
the same MiniLM, over candidates no arm has seen.

The drop-in path: meve after a retriever it did not build, so every candidate's vectors are made
at query time. Per question, 20 candidates (SQuAD: 20 consecutive paragraphs of one dev article,
the question asked of the first; HotpotQA: the 10 paragraphs of two distractor-setting questions,
the first one's question), 50 questions per set, each arm timed on every question in turn, the
order rotated each question (a slow stretch of the shared CPU falls on every arm alike). Every meve
arm gets a fresh scorer per question (built outside the clock), so nothing is cached.

Arms (:data:`ARMS`): meve's ``MeVeCompressor``, LlamaIndex ``MeVePostprocessor`` and
``MeVeRetriever.from_vectorstore`` (a LangChain ``InMemoryVectorStore`` holding the 20, embedded
when added, outside the clock), each in float32 and int8; a plain float32 (and int8)
``SentenceTransformer.encode`` of the 20; LangChain's ``EmbeddingsFilter`` and LlamaIndex's
``SentenceTransformerRerank`` and ``SimilarityPostprocessor`` over the same 20 with the same
MiniLM. ``SentenceTransformerRerank`` needs a cross-encoder: MiniLM-L6's encoder with a random
1-logit head (:func:`benchmarks.speed.cross_encoder_path`; the architecture and cost of
cross-encoder/ms-marco-MiniLM-L-6-v2, which cannot be downloaded here; its scores mean nothing).
``SimilarityPostprocessor`` reads node scores: here the cosine of the same MiniLM's embeddings of
the query and the 20, made in the arm through a LlamaIndex embedding (batches of 10, its default).

The throughput limit of this CPU for MiniLM's products is measured in the same run
(:mod:`benchmarks.harness.limits`), and the plain encode's and meve's model work are stated as
fractions of it.

    python -m benchmarks.run --full --only query_time
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import pct
from benchmarks.harness.limits import achieved, matmul_limit, model_flops, token_lengths
from meve import LateInteractionScorer, MeVeConfig, SentenceTransformerEmbedder

#: question -> the zero-argument call the clock times (built outside it: fresh scorers, documents)
Prepare = Callable[[str, list[str]], Callable[[], Any]]

ARMS = {
    "meve_compressor": "langchain_meve.MeVeCompressor.compress_documents (meve's default verifier and phases)",
    "meve_postprocessor": "llamaindex_meve.MeVePostprocessor.postprocess_nodes (the same)",
    "meve_from_vectorstore": "langchain_meve.MeVeRetriever.from_vectorstore over an InMemoryVectorStore holding the 20 (k_init 20), invoke",
    "plain_encode": "SentenceTransformer.encode of the 20 (float32, normalised, its default batch of 32)",
    "langchain_embeddings_filter": "langchain_classic EmbeddingsFilter (similarity_threshold 0.5) with a LangChain Embeddings over the same MiniLM",
    "llamaindex_sentence_transformer_rerank": "LlamaIndex SentenceTransformerRerank (top_n 20) with MiniLM-L6 + a random 1-logit head",
    "llamaindex_similarity_postprocessor": "the query and the 20 embedded by a LlamaIndex embedding over the same MiniLM, SimilarityPostprocessor (cutoff 0.5)",
}
#: Each framework arm against meve's arm in the same framework (their p50 over meve's).
SAME_WORK = {
    "langchain_embeddings_filter": ("meve_compressor", "meve_from_vectorstore"),
    "llamaindex_sentence_transformer_rerank": ("meve_postprocessor",),
    "llamaindex_similarity_postprocessor": ("meve_postprocessor",),
}
MEVE_ARMS = ("meve_compressor", "meve_postprocessor", "meve_from_vectorstore")
SQUAD = Path("train") / "squad" / "squad-v1.1-dev.explorer.json.gz"
HOTPOT = Path("hotpotqa") / "hotpot_dev_distractor_500_factoid.orig.json"


def squad_groups(data: Path, n: int, size: int = 20) -> list[tuple[str, list[str]]]:
    """(question, 20 consecutive paragraphs of one SQuAD dev article): the question is the first
    one asked of the group's first paragraph; articles give as many groups as they hold."""
    with gzip.open(data / SQUAD, "rt", encoding="utf-8") as fh:
        articles = json.load(fh)["data"]
    out = []
    for a in articles:
        paras = a["paragraphs"]
        for start in range(0, len(paras) - size + 1, size):
            group = paras[start : start + size]
            asked = next((p["qas"][0]["question"] for p in group if p["qas"]), None)
            if asked is not None:
                out.append((asked, [p["context"] for p in group]))
    return out[:n]


def hotpot_groups(data: Path, n: int) -> list[tuple[str, list[str]]]:
    """(question, the candidate paragraphs of it and of the next question, "title: text", each once):
    HotpotQA's distractor setting gives 10 per question; pairs of questions are disjoint."""
    rows = json.loads((data / HOTPOT).read_text())
    out = []
    for i in range(0, len(rows) - 1, 2):
        paras = [f"{t}: {' '.join(s)}" for q in rows[i : i + 2] for t, s in q["context"]]
        out.append((rows[i]["question"], list(dict.fromkeys(paras))))
    return out[:n]


def _lc_embeddings(model: Any) -> Any:
    """A LangChain ``Embeddings`` over a loaded SentenceTransformer, as HuggingFaceEmbeddings
    (langchain-huggingface, not installed here) calls it: normalised, no progress bar."""
    from langchain_core.embeddings import Embeddings

    class STEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return model.encode(texts, normalize_embeddings=True, show_progress_bar=False).tolist()  # type: ignore[no-any-return]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return STEmbeddings()


def _li_embedding(model: Any) -> Any:
    """A LlamaIndex ``BaseEmbedding`` over a loaded SentenceTransformer, as HuggingFaceEmbedding
    (llama-index-embeddings-huggingface, not installed here) calls it; LlamaIndex batches 10 texts."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    class STEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return self._get_text_embeddings([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._get_text_embeddings([text])[0]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return model.encode(texts, normalize_embeddings=True, show_progress_bar=False).tolist()  # type: ignore[no-any-return]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    return STEmbedding(model_name="all-MiniLM-L6-v2")


def meve_arms(precision: str, config: MeVeConfig, store_model: Any) -> dict[str, Prepare]:
    """meve's three drop-in arms over MiniLM at ``precision``, each with a fresh default verifier
    per question; ``store_model`` (float32) is the vector store's own embedding model."""
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from langchain_meve import MeVeCompressor, MeVeRetriever
    from llamaindex_meve import MeVePostprocessor

    emb = SentenceTransformerEmbedder(precision=precision)
    store_embeddings = _lc_embeddings(store_model)

    def compressor(q: str, texts: list[str]) -> Callable[[], Any]:
        comp = MeVeCompressor(config=config, embedder=emb, scorer=LateInteractionScorer(emb))
        docs = [Document(page_content=t) for t in texts]
        return lambda: comp.compress_documents(docs, q)

    def postprocessor(q: str, texts: list[str]) -> Callable[[], Any]:
        post = MeVePostprocessor(config=config, embedder=emb, scorer=LateInteractionScorer(emb))
        nodes = [NodeWithScore(node=TextNode(text=t)) for t in texts]
        return lambda: post.postprocess_nodes(nodes, QueryBundle(q))

    def from_vectorstore(q: str, texts: list[str]) -> Callable[[], Any]:
        docs = [Document(page_content=t, id=f"d{i}") for i, t in enumerate(texts)]
        store = InMemoryVectorStore(embedding=store_embeddings)
        store.add_documents(docs)
        retriever = MeVeRetriever.from_vectorstore(store, docs, config=config, scorer=LateInteractionScorer(emb))
        return lambda: retriever.invoke(q)

    suffix = "" if precision == "float32" else f"_{precision}"
    return {f"meve_compressor{suffix}": compressor, f"meve_postprocessor{suffix}": postprocessor, f"meve_from_vectorstore{suffix}": from_vectorstore}


def framework_arms(model: Any, ce_path: str) -> tuple[dict[str, Prepare], list[str]]:
    """The frameworks' own filters over the same float32 MiniLM, and the arms that cannot run here."""
    from llama_index.core.postprocessor import SentenceTransformerRerank, SimilarityPostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    arms: dict[str, Prepare] = {}
    not_run = []
    try:
        import langchain_community  # noqa: F401 - EmbeddingsFilter imports it when it runs
        from langchain_classic.retrievers.document_compressors import EmbeddingsFilter
        from langchain_core.documents import Document

        flt = EmbeddingsFilter(embeddings=_lc_embeddings(model), similarity_threshold=0.5, k=None)

        def embeddings_filter(q: str, texts: list[str]) -> Callable[[], Any]:
            docs = [Document(page_content=t) for t in texts]
            return lambda: flt.compress_documents(docs, q)

        arms["langchain_embeddings_filter"] = embeddings_filter
    except ImportError:
        not_run.append("langchain_embeddings_filter (EmbeddingsFilter needs langchain-community: pip install -e '.[bench]')")
    rerank = SentenceTransformerRerank(model=ce_path, top_n=20, device="cpu")
    li_embedding = _li_embedding(model)
    similarity = SimilarityPostprocessor(similarity_cutoff=0.5)

    def reranker(q: str, texts: list[str]) -> Callable[[], Any]:
        nodes = [NodeWithScore(node=TextNode(text=t)) for t in texts]
        return lambda: rerank.postprocess_nodes(nodes, QueryBundle(q))

    def similar(q: str, texts: list[str]) -> Callable[[], Any]:
        nodes = [TextNode(text=t) for t in texts]

        def run() -> Any:
            qv = np.asarray(li_embedding.get_query_embedding(q))
            vecs = np.asarray(li_embedding.get_text_embedding_batch(texts))
            scored = [NodeWithScore(node=n, score=float(v @ qv)) for n, v in zip(nodes, vecs, strict=True)]
            return similarity.postprocess_nodes(scored, QueryBundle(q))

        return run

    arms["llamaindex_sentence_transformer_rerank"] = reranker
    arms["llamaindex_similarity_postprocessor"] = similar
    return arms, not_run


def _plain(model: Any) -> Prepare:
    return lambda q, texts: lambda: model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def race(groups: Sequence[tuple[str, list[str]]], arms: dict[str, Prepare]) -> dict[str, list[float]]:
    """Milliseconds per arm per question: the first group warms every arm up (models load) and is
    not counted; then each question's arms are prepared, and timed in an order rotated by one."""
    names = list(arms)
    warm_q, warm_texts = groups[0]
    for name in names:
        arms[name](warm_q, warm_texts)()
    ms: dict[str, list[float]] = {name: [] for name in names}
    for i, (q, texts) in enumerate(groups[1:]):
        ready = {name: arms[name](q, texts) for name in names}
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t0 = time.perf_counter()
            ready[name]()
            ms[name].append((time.perf_counter() - t0) * 1000)
    return ms


def summarise(groups: Sequence[tuple[str, list[str]]], ms: dict[str, list[float]], limit: dict[str, Any]) -> dict[str, Any]:
    """p50/p95 per arm, meve's arms over the plain encode, the frameworks' over meve's, and the
    model work as a fraction of this CPU's limit (the p50 question's FLOPs over the arm's p50)."""
    timed = groups[1:]
    row: dict[str, Any] = {"questions": len(timed), "candidates_mean": round(float(np.mean([len(t) for _, t in timed])), 1)}
    lengths = [token_lengths(texts) for _, texts in timed]
    queries = token_lengths([q for q, _ in timed])
    row["tokens_mean"] = round(float(np.mean([n for ls in lengths for n in ls])), 1)
    texts_flops = float(np.median([model_flops(ls) for ls in lengths]))
    query_flops = float(np.median([model_flops([n]) for n in queries]))
    for name, values in ms.items():
        row[f"{name}_ms_p50"], row[f"{name}_ms_p95"] = round(pct(values, 50), 1), round(pct(values, 95), 1)
    for name in ms:
        base = name.removesuffix("_int8")
        precision = "int8" if name.endswith("_int8") else "float32"
        if base in MEVE_ARMS:
            row[f"{name}_over_plain_encode_p50"] = round(row[f"{name}_ms_p50"] / row["plain_encode_ms_p50"], 3)
            row[f"{name}_model"] = achieved(texts_flops + query_flops, row[f"{name}_ms_p50"] / 1000, limit, precision)
        elif base == "plain_encode":
            row[f"{name}_model"] = achieved(texts_flops, row[f"{name}_ms_p50"] / 1000, limit, precision)
    for other, mine in SAME_WORK.items():
        for m in mine:
            for suffix in ("", "_int8"):
                if other in ms and f"{m}{suffix}" in ms:
                    row[f"{other}_over_{m}{suffix}_p50"] = round(row[f"{other}_ms_p50"] / row[f"{m}{suffix}_ms_p50"], 3)
    return row


def run(data: Path, questions: int = 50, precisions: Sequence[str] = ("float32", "int8")) -> dict[str, Any]:
    """The race on SQuAD and HotpotQA (``questions`` each, plus one warm-up) and the CPU limit."""
    from benchmarks.speed import cross_encoder_path

    t0 = time.perf_counter()
    limit = matmul_limit()
    print(f"query_time: limit {limit['gflops_float32']} GFLOP/s float32, {limit['gops_int8_linear']} GOP/s int8 (meve's layer)", flush=True)
    config = MeVeConfig(k_init=20)
    model = SentenceTransformerEmbedder(precision="float32").model
    arms: dict[str, Prepare] = {"plain_encode": _plain(model)}
    if "int8" in precisions:
        arms["plain_encode_int8"] = _plain(SentenceTransformerEmbedder(precision="int8").model)
    for precision in precisions:
        arms.update(meve_arms(precision, config, model))
    frameworks, not_run = framework_arms(model, cross_encoder_path())
    arms.update(frameworks)
    out: dict[str, Any] = {"protocol": __doc__, "arms": ARMS, "same_work": {k: list(v) for k, v in SAME_WORK.items()}, "limit": limit, "not_run": not_run}
    out["meve_config"] = {"k_init": config.k_init, "verifier": "late-interaction (default), a fresh scorer per question"}
    out["datasets"] = {}
    for name, groups in (("squad", squad_groups(data, questions + 1)), ("hotpotqa", hotpot_groups(data, questions + 1))):
        out["datasets"][name] = summarise(groups, race(groups, arms), limit)
        print(f"query_time: {name} {out['datasets'][name]}", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
