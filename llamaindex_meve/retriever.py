"""A LlamaIndex retriever running MeVe over a ``VectorStoreIndex`` (Chroma-backed ones included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode

from llamaindex_meve.postprocessors import annotate
from meve import ContextResult, InputError, MeVe, MeVeConfig
from meve.context import select_context
from meve.lexical import IncrementalBM25, top_k
from meve.models import Embedder, LazyModels, RelevanceScorer, default_embedder
from meve.records import Passage, check_query
from meve.tokens import get_token_counter


def _all_nodes(index: Any) -> list[BaseNode]:
    docs = list(getattr(index.docstore, "docs", {}).values())
    if docs:
        return docs
    getter = getattr(index.vector_store, "get_nodes", None)
    if getter is None:
        raise TypeError(f"{type(index.vector_store).__name__} cannot list its nodes; pass nodes= for the BM25 fallback")
    return list(getter(None))


class MeVeRetriever(BaseRetriever):
    """Dense retrieval from the index, then MeVe's verify → BM25 fallback (over every node of the
    index) → prioritise → budget. ``aretrieve`` runs in a worker thread so the loop is not blocked."""

    def __init__(
        self,
        index: Any = None,
        *,
        core: MeVe | None = None,
        config: MeVeConfig | None = None,
        nodes: Sequence[BaseNode] | None = None,
        embedder: Embedder | None = None,
        scorer: RelevanceScorer | str | None = None,
        token_counter: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (index is None) == (core is None):
            raise InputError("give either a VectorStoreIndex or core= (a meve.MeVe), not both or neither")
        self.index = index
        self.core = core
        self.config = config if config is not None else (core.config if core is not None else MeVeConfig())
        self._embedder = embedder if embedder is not None else default_embedder()
        self._models = LazyModels(self._embedder, scorer)
        self._counter = get_token_counter(token_counter)
        self.last_result: ContextResult | None = None
        if core is not None:
            return
        self._nodes = list(nodes) if nodes is not None else _all_nodes(index)
        self._bm25 = IncrementalBM25([n.get_content() for n in self._nodes])

    @classmethod
    def from_documents(cls, documents: Sequence[Any], **kwargs: Any) -> MeVeRetriever:
        """MindRef-style hierarchical retrieval over whole LlamaIndex Documents (no pre-chunking):
        documents by title (``metadata['title']``) and summary, then passages inside them with
        character offsets (``metadata['start']``/``['end']``). Keyword arguments go to ``meve.MeVe.from_documents``."""
        docs = [(d.doc_id, str(d.metadata.get("title", "")), d.get_content()) for d in documents]
        return cls(core=MeVe.from_documents(docs, **kwargs))

    def _scorer_(self) -> RelevanceScorer:
        return self._models.scorer

    def run(self, query: str, **overrides: Any) -> tuple[ContextResult, dict[str, NodeWithScore]]:
        query = check_query(query)
        if self.index is None:
            raise InputError("run() needs an index; this retriever wraps a meve.MeVe (use .core.run)")
        cfg = self.config.replace(**overrides)
        t0 = time.perf_counter()
        hits = self.index.as_retriever(similarity_top_k=cfg.k_init).retrieve(query)
        texts = [h.node.get_content() for h in hits]
        vecs = self._embedder.encode([query, *texts])
        qvec = vecs[0]
        by_id = {h.node.node_id: h for h in hits}
        candidates = [
            Passage(id=h.node.node_id, text=t, metadata=dict(h.node.metadata), embedding=vecs[i + 1], dense_score=h.score)
            for i, (h, t) in enumerate(zip(hits, texts, strict=True))
        ]
        first = ("retrieve", (time.perf_counter() - t0) * 1000.0, {p.id: p.dense_score or 0.0 for p in candidates}, {"k_init": cfg.k_init})

        def lexical(q: str, k: int) -> list[Passage]:
            found = [(self._nodes[i], s) for i, s in top_k(self._bm25.get_scores(q), k)]
            if not found:
                return []
            emb = self._embedder.encode([n.get_content() for n, _ in found])
            for n, s in found:
                by_id.setdefault(n.node_id, NodeWithScore(node=n, score=s))
            return [Passage(id=n.node_id, text=n.get_content(), metadata=dict(n.metadata), embedding=emb[j], bm25_score=s) for j, (n, s) in enumerate(found)]

        result = select_context(
            query, candidates, cfg, scorer=self._scorer_, embedder=self._embedder, token_counter=self._counter, query_vec=qvec, lexical=lexical, first=first
        )
        self.last_result = result
        return result, by_id

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.core is not None:
            self.last_result = self.core.run(query_bundle.query_str)
            nodes = [NodeWithScore(node=TextNode(text=p.text, id_=p.id, metadata=dict(p.metadata))) for p in self.last_result.documents]
            return [annotate(n, p.score, pruned=p, meve_source=p.source, meve_tokens=p.tokens) for n, p in zip(nodes, self.last_result.documents, strict=True)]
        result, by_id = self.run(query_bundle.query_str)
        return [annotate(by_id[p.id], p.score, pruned=p, meve_score=p.score, meve_source=p.source, meve_tokens=p.tokens) for p in result.documents]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
