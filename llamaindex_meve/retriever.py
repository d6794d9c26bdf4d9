"""A LlamaIndex retriever running MeVe over a ``VectorStoreIndex`` (Chroma-backed ones included).

The index is wrapped as a meve ``PassageStore`` and its embedding model as a meve ``Embedder``;
then ``meve.MeVe`` does the work, as for every other entry point: this module only converts types.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode

from llamaindex_meve.postprocessors import annotate
from meve import CachedEmbedder, ContextResult, InputError, MeVe, MeVeConfig, Passage, RelevanceScorer
from meve.lexical import DEFAULT_BM25, LexicalIndex
from meve.models import store_verifier
from meve.phases import unit_rows


def _all_nodes(index: Any) -> list[BaseNode]:
    docs = list(getattr(index.docstore, "docs", {}).values())
    if docs:
        return docs
    getter = getattr(index.vector_store, "get_nodes", None)
    if getter is None:
        raise TypeError(f"{type(index.vector_store).__name__} cannot list its nodes; pass nodes= for the BM25 fallback")
    return list(getter(None))


class _IndexEmbedder:
    """meve Embedder over a LlamaIndex embedding model (vectors L2-normalised here)."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model
        self.name = str(getattr(embed_model, "model_name", None) or type(embed_model).__name__)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Passages, through the text side of the model (asymmetric models embed queries differently)."""
        return unit_rows(self.embed_model.get_text_embedding_batch(list(texts)), np.float32)

    def encode_query(self, query: str) -> np.ndarray:
        return unit_rows([self.embed_model.get_query_embedding(query)], np.float32)[0]


class LlamaIndexStore:
    """A ``meve.store.PassageStore`` over a ``VectorStoreIndex``: kNN through the index's own
    retriever with the query vector given (the index does not embed the query again); passage
    vectors for redundancy checks come from the index's embedding model, once per text (cached)."""

    def __init__(self, index: Any, nodes: Sequence[BaseNode], embedder: _IndexEmbedder) -> None:
        self.index = index
        self.nodes: dict[str, BaseNode] = {n.node_id: n for n in nodes}
        self.embedder = CachedEmbedder(embedder)

    def _passages(self, nodes: Sequence[BaseNode]) -> list[Passage]:
        if not nodes:
            return []
        texts = [n.get_content() for n in nodes]
        vecs = self.embedder.encode(texts)
        return [Passage(id=n.node_id, text=t, metadata=dict(n.metadata), embedding=v) for n, t, v in zip(nodes, texts, vecs, strict=True)]

    def query(self, vector: np.ndarray, k: int) -> list[Passage]:
        bundle = QueryBundle(query_str="", embedding=[float(x) for x in vector])
        hits = self.index.as_retriever(similarity_top_k=k).retrieve(bundle)
        for h in hits:
            self.nodes.setdefault(h.node.node_id, h.node)  # a node added to the index after this retriever was built
        passages = self._passages([h.node for h in hits])
        return [p.with_(dense_score=float(np.dot(np.asarray(p.embedding), vector))) for p in passages]

    def get(self, ids: Sequence[str]) -> list[Passage]:
        return self._passages([self.nodes[i] for i in ids if i in self.nodes])

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Any], embeddings: Any) -> None:
        raise TypeError("add nodes through your VectorStoreIndex (index.insert_nodes); this retriever reads it")

    def documents(self) -> tuple[list[str], list[str]]:
        return list(self.nodes), [n.get_content() for n in self.nodes.values()]

    def count(self) -> int:
        return len(self.nodes)


class MeVeRetriever(BaseRetriever):
    """MeVe over a LlamaIndex ``VectorStoreIndex``: dense retrieval through the index, then verify
    → BM25 fallback (over every node of the index) → prioritise → budget. ``aretrieve`` runs in a
    worker thread so the loop is not blocked.

    ``embed_model``: the index's embedding model (default: the one the index was built with); it
    embeds the query for the kNN and the candidates for the redundancy checks, so both live in the
    index's vector space. ``core=`` wraps a ready ``meve.MeVe`` instead (e.g. ``from_documents``)."""

    def __init__(
        self,
        index: Any = None,
        *,
        core: MeVe | None = None,
        config: MeVeConfig | None = None,
        nodes: Sequence[BaseNode] | None = None,
        embed_model: Any = None,
        scorer: RelevanceScorer | str | None = None,
        token_counter: Any = None,
        bm25_backend: str = DEFAULT_BM25,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (index is None) == (core is None):
            raise InputError("give either a VectorStoreIndex or core= (a meve.MeVe), not both or neither")
        self.index = index
        self.last_result: ContextResult | None = None
        self._nodes: dict[str, BaseNode] = {}
        if core is not None:
            self.core = core
            return
        model = embed_model if embed_model is not None else getattr(index, "_embed_model", None)
        if model is None:
            raise InputError(f"{type(index).__name__} has no embedding model meve can read; pass embed_model= (the one the index was built with)")
        all_nodes = list(nodes) if nodes is not None else _all_nodes(index)
        embedder = _IndexEmbedder(model)
        store = LlamaIndexStore(index, all_nodes, embedder)
        self._nodes = store.nodes
        lexical = LexicalIndex(list(store.nodes), [n.get_content() for n in store.nodes.values()], bm25_backend)
        verifier = store_verifier(scorer, store.embedder)
        self.core = MeVe(
            store=store,
            lexical=lexical,
            config=config,
            embedder=store.embedder,
            scorer=verifier,
            token_counter=token_counter,
            query_encoder=embedder.encode_query,
        )

    @property
    def config(self) -> MeVeConfig:
        return self.core.config

    @classmethod
    def from_documents(cls, documents: Sequence[Any], **kwargs: Any) -> MeVeRetriever:
        """MindRef-style hierarchical retrieval over whole LlamaIndex Documents (no pre-chunking):
        documents by title (``metadata['title']``) and summary, then passages inside them with
        character offsets (``metadata['start']``/``['end']``). Keyword arguments go to ``meve.MeVe.from_documents``."""
        docs = [(d.doc_id, str(d.metadata.get("title", "")), d.get_content()) for d in documents]
        return cls(core=MeVe.from_documents(docs, **kwargs))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.last_result = self.core.run(query_bundle.query_str)
        out = []
        for p in result.documents:
            # The index's own node where there is one (its type, relationships and metadata kept);
            # hierarchical windows of a wrapped core are new text nodes.
            node = self._nodes.get(p.id) or TextNode(text=p.text, id_=p.id, metadata=dict(p.metadata))
            out.append(annotate(NodeWithScore(node=node), p.score, pruned=p, meve_score=p.score, meve_source=p.source, meve_tokens=p.tokens))
        return out

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
