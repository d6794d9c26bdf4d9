"""What meve costs over the nodes users make, against the frameworks' own rerankers (issue 63 #4).

Nodes: LlamaIndex ``SentenceSplitter`` at its defaults (1,024 tokens, overlap 200) over the SQuAD
test articles (``benchmarks.harness.data.long_variant``, "llamaindex-1024"); questions: the first
``n_queries`` of its test questions; each query's nodes: the same dense top-``k`` for every arm,
so the arms do the same job on the same text, in one process, timed question by question in turn
(the order rotated each question, so a slow stretch of this shared CPU falls on every arm alike).

Arms, each built fresh in this process:
- ``llamaindex_rerank``: LlamaIndex ``SentenceTransformerRerank(top_n=3)``;
- ``langchain_rerank``: LangChain ``CrossEncoderReranker(top_n=3)`` over sentence-transformers'
  ``CrossEncoder.predict`` (what langchain-community's ``HuggingFaceCrossEncoder`` calls; it is not
  installed here);
- ``meve_postprocessor``: ``llamaindex_meve.MeVePostprocessor()``, every default;
- ``meve_compressor``: ``langchain_meve.MeVeCompressor()``, every default.
The rerankers' cross-encoder is MiniLM-L6 with a one-logit head (``benchmarks.speed.cross_encoder_path``;
timing only: no cross-encoder weights can be had offline), the size of the usual
``cross-encoder/ms-marco-MiniLM-L-6-v2``; it reads a (query, node) pair up to 512 word pieces and
drops the rest. meve's verifier (late interaction over the same MiniLM's token vectors) reads the
whole node, in windows of 256. "first" is an arm's first query (its model's load included, and a
node's token vectors encoded on first sight); "second instance" is the first query of another new
instance of the same component (the token vectors are shared by every component in the process);
"warm" the median of the other queries (each brings nodes not seen before as well as seen ones);
``meve_unseen_nodes``: per query, whichever meve component met that query's nodes first (the two
alternate), so the cost of encoding the nodes it had not seen is in it. Then indexing the same
nodes (:func:`ingestion`): langchain-chroma against ``MeVe.from_texts``, the same MiniLM, and
langchain-chroma over the nodes split so that its model reads all their text (the same work).
The two meve arms share one model and one token-vector cache, as an app using both would: the
compressor's first query finds what the postprocessor's loaded and encoded. The nodes' and
questions' dense vectors come from the benchmarks' cache (``harness_encoded`` says how many it had
to compute; 0: meve's MiniLM had not run in this process before the first meve arm).

    python -m benchmarks.run --full --only long_rerank
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.common import embedder, pct
from benchmarks.harness.data import load, long_variant
from benchmarks.speed import cross_encoder_path
from meve import get_token_counter

ARMS = ("llamaindex_rerank", "langchain_rerank", "meve_postprocessor", "meve_compressor")


def _builders(ce_path: str) -> dict[str, Callable[[], Callable[[str, list[str]], Any]]]:
    """Each arm as a factory of a fresh component, wrapped as (query, node texts) -> its output."""
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_classic.retrievers.document_compressors.cross_encoder import BaseCrossEncoder
    from langchain_core.documents import Document
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from langchain_meve import MeVeCompressor
    from llamaindex_meve import MeVePostprocessor

    class STCrossEncoder(BaseCrossEncoder):
        def __init__(self) -> None:
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(ce_path, device="cpu")

        def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
            return [float(x) for x in self.model.predict(text_pairs, show_progress_bar=False)]

    def nodes(texts: list[str]) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0) for i, t in enumerate(texts)]

    def docs(texts: list[str]) -> list[Document]:
        return [Document(page_content=t, id=f"d{i}") for i, t in enumerate(texts)]

    def llamaindex_rerank() -> Callable[[str, list[str]], Any]:
        rerank = SentenceTransformerRerank(model=ce_path, top_n=3, device="cpu")
        return lambda q, texts: rerank.postprocess_nodes(nodes(texts), QueryBundle(q))

    def langchain_rerank() -> Callable[[str, list[str]], Any]:
        rerank = CrossEncoderReranker(model=STCrossEncoder(), top_n=3)
        return lambda q, texts: rerank.compress_documents(docs(texts), q)

    def meve_postprocessor() -> Callable[[str, list[str]], Any]:
        post = MeVePostprocessor()
        return lambda q, texts: post.postprocess_nodes(nodes(texts), QueryBundle(q))

    def meve_compressor() -> Callable[[str, list[str]], Any]:
        comp = MeVeCompressor()
        return lambda q, texts: comp.compress_documents(docs(texts), q)

    return {
        "llamaindex_rerank": llamaindex_rerank,
        "langchain_rerank": langchain_rerank,
        "meve_postprocessor": meve_postprocessor,
        "meve_compressor": meve_compressor,
    }


def ingestion(texts: list[str]) -> dict[str, Any]:
    """Indexing the same nodes, after the queries (so their first query pays no index's model load):
    langchain-chroma's ``Chroma.from_texts`` with the same MiniLM (a fresh embedder, no cache), then
    ``MeVe.from_texts`` at every default (dense vectors, the verifier's token vectors and the later
    windows from one windowed pass per node, BM25); the better of two runs each.

    MiniLM reads 256 word pieces, so langchain-chroma's vector of a node is its first 254 pieces
    and the rest is never read; meve reads every piece (in windows overlapping by a quarter). So
    the same work is also timed: ``langchain_chroma_all_text``, the nodes split with LangChain's
    own ``RecursiveCharacterTextSplitter.from_huggingface_tokenizer`` (MiniLM's tokenizer, chunks
    of 254 pieces overlapping by 63, meve's window and overlap; no chunk_size is exact at a word
    boundary) and those chunks put into langchain-chroma, splitting timed in. ``pieces_read``: the
    word pieces each arm's model reads (special tokens aside). ``langchain_chroma_then_meve_s``: the
    path that keeps the app's store, ``Chroma.from_documents`` then ``langchain_meve.MeVeRetriever.from_vectorstore``
    over it (meve adds BM25 at build time; the verifier reads a node's text when a query first meets it)."""
    from langchain_chroma import Chroma
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from langchain_meve import MeVeRetriever
    from meve import MeVe, SentenceTransformerEmbedder
    from meve.scoring.windows import overlap_for

    st = SentenceTransformerEmbedder()
    st.encode(["load the model first"])
    tokenizer = st.model.tokenizer
    size = st.model.max_seq_length - 2

    class Plain(Embeddings):
        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            return st.encode(docs).tolist()

        def embed_query(self, text: str) -> list[float]:
            return st.encode([text])[0].tolist()

    def split(docs: list[str]) -> list[str]:
        splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(tokenizer, chunk_size=size, chunk_overlap=overlap_for(size))
        return [c for d in docs for c in splitter.split_text(d)]

    out: dict[str, list[float]] = {"langchain_chroma_s": [], "langchain_chroma_all_text_s": [], "meve_s": [], "langchain_chroma_then_meve_s": []}
    docs = [Document(page_content=t, id=f"node-{j}") for j, t in enumerate(texts)]
    for i in range(2):
        start = time.perf_counter()
        Chroma.from_texts(texts, Plain(), collection_name=f"lc-ingest-{i}")
        out["langchain_chroma_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        chunks = split(texts)
        Chroma.from_texts(chunks, Plain(), collection_name=f"lc-all-{i}")
        out["langchain_chroma_all_text_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        MeVe.from_texts(texts).close()
        out["meve_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        MeVeRetriever.from_vectorstore(Chroma.from_documents(docs, Plain(), collection_name=f"lc-kept-{i}"), docs)
        out["langchain_chroma_then_meve_s"].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in out.items()}
    return {
        **{k: round(v, 1) for k, v in best.items()},
        "ratio": round(best["meve_s"] / best["langchain_chroma_s"], 2),
        "ratio_same_work": round(best["meve_s"] / best["langchain_chroma_all_text_s"], 2),
        "ratio_kept_store": round(best["langchain_chroma_then_meve_s"] / best["langchain_chroma_s"], 2),
        "chunks_all_text": len(chunks),
        "pieces_read": _pieces_read(tokenizer, size, texts, chunks),
        "runs": {k: [round(x, 1) for x in v] for k, v in out.items()},
    }


def _pieces_read(tokenizer: Any, size: int, texts: list[str], chunks: list[str]) -> dict[str, int]:
    """The word pieces each ingestion arm's model reads: a node's first ``size`` (langchain-chroma),
    every chunk's, and every window of meve's plan (overlapping by a quarter)."""
    from meve.scoring.windows import overlap_for, plan, text_pieces

    nodes = text_pieces(tokenizer, [t.strip() for t in texts])
    return {
        "langchain_chroma": sum(min(len(p), size) for p in nodes),
        "langchain_chroma_all_text": sum(min(len(p), size) for p in text_pieces(tokenizer, [c.strip() for c in chunks])),
        "meve": sum(e - s for p in nodes for s, e in plan(p.starts, size, overlap_for(size))),
    }


def run(data: Path, n_queries: int = 20, k: int = 10) -> dict[str, Any]:
    """Module docstring."""
    import numpy as np

    t0 = time.perf_counter()
    counter = get_token_counter()
    ds = long_variant(load("squad", data, n_queries), "llamaindex-1024", counter)
    part = ds.splits["test"]
    emb = embedder()
    vecs = emb.encode(part.texts)
    qs = [q.text for q in part.questions[:n_queries]]
    qv = emb.encode(qs)
    emb.save()
    harness_encoded = emb.computed
    picks = [[part.texts[i] for i in np.argsort(-(vecs @ v))[:k]] for v in qv]
    builders = _builders(cross_encoder_path())
    ms: dict[str, list[float]] = {a: [] for a in ARMS}
    unseen: list[float] = []  # per query, meve's first component to meet the query's nodes
    first: dict[str, float] = {}
    second: dict[str, float] = {}
    made: dict[str, Callable[[str, list[str]], Any]] = {}
    groups = [("llamaindex_rerank",), ("langchain_rerank",), ("meve_postprocessor", "meve_compressor")]
    for j, (q, texts) in enumerate(zip(qs, picks, strict=True)):
        order = groups[j % len(groups) :] + groups[: j % len(groups)]
        for group in order:
            # meve's two components share the token vectors: which meets the nodes first alternates.
            for n, arm in enumerate(group if j % 2 == 0 else group[::-1]):
                if arm not in made:
                    start = time.perf_counter()
                    made[arm] = builders[arm]()
                    made[arm](q, texts)
                    first[arm] = (time.perf_counter() - start) * 1000
                    again = builders[arm]()  # another new instance: what it shares with the first
                    start = time.perf_counter()
                    again(q, texts)
                    second[arm] = (time.perf_counter() - start) * 1000
                    continue
                start = time.perf_counter()
                made[arm](q, texts)
                ms[arm].append((time.perf_counter() - start) * 1000)
                if len(group) > 1 and n == 0:
                    unseen.append(ms[arm][-1])
    tokens = [counter.count(t) for t in part.texts]
    rows: dict[str, dict[str, float]] = {}
    for arm in ARMS:
        rows[arm] = {"first_ms": round(first[arm], 1), "second_instance_ms": round(second[arm], 1)}
        rows[arm].update(warm_p50_ms=round(statistics.median(ms[arm]), 1), warm_p95_ms=round(pct(ms[arm], 95), 1))
    rows["meve_unseen_nodes"] = {"warm_p50_ms": round(statistics.median(unseen), 1), "warm_p95_ms": round(pct(unseen, 95), 1)}
    for base in ("llamaindex_rerank", "langchain_rerank"):
        for arm in ("meve_postprocessor", "meve_compressor", "meve_unseen_nodes"):
            rows[arm][f"warm_ratio_to_{base}"] = round(rows[arm]["warm_p50_ms"] / rows[base]["warm_p50_ms"], 2)
            if "first_ms" in rows[arm]:
                rows[arm][f"first_ratio_to_{base}"] = round(rows[arm]["first_ms"] / rows[base]["first_ms"], 2)
    return {
        "protocol": __doc__,
        "nodes": len(part.texts),
        "node_tokens_mean": round(sum(tokens) / len(tokens), 1),
        "queries": len(qs),
        "k": k,
        "arms": rows,
        "harness_encoded": harness_encoded,
        "ingestion": ingestion(part.texts),
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }
