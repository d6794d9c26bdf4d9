"""LangChain retriever over a meve pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from meve import ConfigError, ContextResult, MeVe, MeVeConfig, Passage, PhaseRecord
from meve.lexical import DEFAULT_BM25, LexicalIndex
from meve.models import store_verifier
from meve.phases import unit_rows

PHASE_EVENT = "meve_phase"
# ``k`` is LangChain's name for the document cap (MeVeConfig.max_passages); every other MeVeConfig field keeps its name.
_CALL_OVERRIDES = ("k", *(f for f in MeVeConfig.__dataclass_fields__ if f != "max_passages"))


def passage_to_document(p: Passage) -> Document:
    # The passage id travels as Document.id: a user's own "id" metadata key is left as they stored it.
    return Document(page_content=p.text, metadata=meve_metadata(p, p.metadata), id=p.id)


def meve_metadata(p: Passage, base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` plus what meve adds (its ``meve_*`` keys are reserved, so nothing of the user's is overwritten);
    ``meve_spans`` when sentences were pruned: offsets of the kept text in the original."""
    meta = {**base, "meve_score": p.score, "meve_source": p.source, "meve_tokens": p.tokens}
    if p.spans is not None:
        meta["meve_spans"] = [list(span) for span in p.spans]
    return meta


def check_k(k: Any) -> int | None:
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError("k", k, "None (no cap) or an int >= 1: the most documents to return")
    return k


def _overrides(kwargs: dict[str, Any], k: int | None) -> dict[str, Any]:
    unknown = set(kwargs) - set(_CALL_OVERRIDES)
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}; allowed at invoke time: {', '.join(_CALL_OVERRIDES)}")
    out = {key: kwargs[key] for key in _CALL_OVERRIDES if key != "k" and kwargs.get(key) is not None}
    limit = check_k(kwargs.get("k", k))
    if limit is not None:
        out["max_passages"] = limit
    return out


class MeVeRetriever(BaseRetriever):
    """MeVe's verified, de-duplicated, token-budgeted retrieval as a LangChain retriever.

    ``k`` caps the number of documents; ``k``, ``t_max`` and ``tau`` (and other
    MeVeConfig fields) can also be given at ``invoke`` time. Each phase is emitted
    as a ``meve_phase`` custom callback event.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    meve: Any = Field(description="a meve.MeVe pipeline")
    k: int | None = None

    def model_post_init(self, context: Any, /) -> None:
        check_k(self.k)
        if not isinstance(self.meve, MeVe):
            raise ConfigError("meve", self.meve, "a meve.MeVe (build one with MeVeRetriever.from_texts / from_documents / from_vectorstore)")

    @classmethod
    def from_texts(cls, texts: Sequence[str], *, k: int | None = None, **kwargs: Any) -> MeVeRetriever:
        """Build the pipeline with :meth:`meve.MeVe.from_texts` (same keyword arguments)."""
        check_k(k)  # before the corpus is embedded
        return cls(meve=MeVe.from_texts(texts, **kwargs), k=k)

    @classmethod
    def from_documents(cls, documents: Sequence[Document], *, k: int | None = None, **kwargs: Any) -> MeVeRetriever:
        """MindRef-style hierarchical retrieval over whole documents (no pre-chunking): documents
        by title (``metadata['title']``) and summary, then passages inside them, with character
        offsets in ``metadata['start']``/``['end']``. Keyword arguments go to :meth:`meve.MeVe.from_documents`."""
        check_k(k)
        docs = [(str(d.id or d.metadata.get("id") or i), str(d.metadata.get("title", "")), d.page_content) for i, d in enumerate(documents)]
        return cls(meve=MeVe.from_documents(docs, **kwargs), k=k)

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        documents: Sequence[Document],
        *,
        k: int | None = None,
        config: MeVeConfig | None = None,
        scorer: Any = None,
        token_counter: Any = None,
        bm25_backend: str = DEFAULT_BM25,
    ) -> MeVeRetriever:
        """Keep your LangChain ``VectorStore`` (and its ``Embeddings``) for phase 1; ``documents``
        (with ``id`` or ``metadata['id']``) feed the BM25 fallback."""
        check_k(k)
        store = LangChainVectorStore(vectorstore)
        ids = [str(d.id or d.metadata.get("id") or i) for i, d in enumerate(documents)]
        store.remember(ids, documents)
        lexical = LexicalIndex(ids, [d.page_content for d in documents], bm25_backend)
        verifier = store_verifier(scorer, store.embedder)
        meve = MeVe(
            store=store, lexical=lexical, config=config, embedder=store.embedder, scorer=verifier, token_counter=token_counter, query_encoder=store.embed_query
        )
        return cls(meve=meve, k=k)

    def _emit(self, run_manager: CallbackManagerForRetrieverRun) -> Any:
        child = run_manager.get_child()
        if not child.handlers:
            return None  # no listener: skip building five event payloads per query (measured ms of overhead)

        def on_phase(rec: PhaseRecord) -> None:
            child.on_custom_event(PHASE_EVENT, rec.to_dict(), run_id=run_manager.run_id)

        return on_phase

    def _to_docs(self, result: ContextResult) -> list[Document]:
        return [passage_to_document(p) for p in result.documents]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        result = self.meve.run(query, on_phase=self._emit(run_manager), **_overrides(kwargs, self.k))
        return self._to_docs(result)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        records: list[PhaseRecord] = []
        result = await self.meve.arun(query, on_phase=records.append, **_overrides(kwargs, self.k))
        child = run_manager.get_child()
        for rec in records if child.handlers else ():  # emitted on the loop, after the worker thread finished
            await child.on_custom_event(PHASE_EVENT, rec.to_dict(), run_id=run_manager.run_id)
        return self._to_docs(result)


class _LangChainEmbedder:
    """meve Embedder over LangChain ``Embeddings`` (vectors L2-normalised here)."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.name = type(embeddings).__name__

    def encode(self, texts: Sequence[str]) -> Any:
        """Passages, always through ``embed_documents`` (asymmetric models embed queries differently)."""
        return unit_rows(self.embeddings.embed_documents(list(texts)), np.float32)

    def encode_query(self, text: str) -> Any:
        return unit_rows([self.embeddings.embed_query(text)], np.float32)[0]


class LangChainVectorStore:
    """A ``meve.store.PassageStore`` over any LangChain VectorStore; embeddings for redundancy checks are
    computed once per passage text and cached."""

    def __init__(self, vectorstore: Any) -> None:
        from meve.models import CachedEmbedder

        if getattr(vectorstore, "embeddings", None) is None:
            raise TypeError(f"{type(vectorstore).__name__} exposes no .embeddings; MeVe needs them for the query and redundancy checks")
        self.vectorstore = vectorstore
        self._query = _LangChainEmbedder(vectorstore.embeddings)
        self.embedder = CachedEmbedder(self._query)
        self._docs: dict[str, Document] = {}

    def embed_query(self, query: str) -> Any:
        """The query through the user's ``embed_query`` (not cached: each query is new)."""
        return self._query.encode_query(query)

    def remember(self, ids: Sequence[str], documents: Sequence[Document]) -> None:
        self._docs.update(zip(ids, documents, strict=True))

    def _passages(self, hits: Sequence[tuple[str, Document]]) -> list[Passage]:
        """Passages with their embeddings: one ``embed_documents`` call for the texts this process has
        not embedded yet (cached by text), so a repeated passage costs the user's embeddings nothing."""
        if not hits:
            return []
        vecs = self.embedder.encode([doc.page_content for _, doc in hits])
        return [
            Passage(id=pid, text=doc.page_content, metadata={k: v for k, v in doc.metadata.items() if k != "id"}, embedding=np.asarray(vec))
            for (pid, doc), vec in zip(hits, vecs, strict=True)
        ]

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Any], embeddings: Any) -> None:
        docs = [Document(page_content=t, metadata=dict(m or {}), id=i) for i, t, m in zip(ids, texts, metadatas, strict=True)]
        self.vectorstore.add_documents(docs, ids=list(ids))
        self.remember(ids, docs)

    def query(self, vector: Any, k: int) -> list[Passage]:
        hits = self.vectorstore.similarity_search_by_vector(list(map(float, vector)), k=k)
        passages = self._passages([(str(doc.id or doc.metadata.get("id")), doc) for doc in hits])
        out = [p.with_(dense_score=float(np.dot(np.asarray(p.embedding), vector))) for p in passages]
        return sorted(out, key=lambda p: -(p.dense_score or 0.0))

    def get(self, ids: Sequence[str]) -> list[Passage]:
        return self._passages([(i, self._docs[i]) for i in ids if i in self._docs])

    def documents(self) -> tuple[list[str], list[str]]:
        return list(self._docs), [d.page_content for d in self._docs.values()]

    def count(self) -> int:
        return len(self._docs)
