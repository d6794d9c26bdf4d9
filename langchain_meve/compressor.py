"""LangChain document compressor: MeVe's verify → fallback → prioritise → budget over any retriever's documents."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from meve import MeVeConfig
from meve.context import local_lexical, select_context
from meve.models import Embedder, RelevanceScorer, default_embedder, default_scorer
from meve.pipeline import check_query
from meve.records import ContextResult, Passage
from meve.tokens import get_token_counter


def passages_with_embeddings(query: str, texts: Sequence[str], embedder: Embedder, ids: Sequence[str] | None = None) -> tuple[Any, tuple[Passage, ...]]:
    """Embed the query and texts once; passages carry their embedding and cosine to the query."""
    vecs = embedder.encode([query, *texts])
    ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
    return vecs[0], tuple(
        Passage(id=pid, text=t, embedding=vecs[i + 1], dense_score=float(vecs[i + 1] @ vecs[0])) for i, (pid, t) in enumerate(zip(ids, texts, strict=True))
    )


class MeVeCompressor(BaseDocumentCompressor):
    """Verification + fallback-to-top-N + prioritisation + token budget for documents from any retriever.

    ``MeVeCompressor()`` works offline with the defaults; any MeVeConfig field can be
    passed (``MeVeCompressor(tau=0.6, t_max=256)``). When fewer than ``n_min``
    documents pass, the best of the rest (BM25 over the given documents, then the
    retriever's order) are added, up to ``fallback_k``. Input documents are never mutated.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: MeVeConfig = Field(default_factory=MeVeConfig)
    embedder: Any = None
    scorer: Any = None
    token_counter: Any = None
    _embedder: Embedder | None = PrivateAttr(default=None)
    _scorer: RelevanceScorer | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        overrides = {k: data.pop(k) for k in list(data) if k in MeVeConfig.__dataclass_fields__}
        if overrides:
            data["config"] = data.get("config", MeVeConfig()).replace(**overrides)
        super().__init__(**data)

    def _embed(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self.embedder if self.embedder is not None else default_embedder()
        return self._embedder

    def _score(self) -> RelevanceScorer:
        if self._scorer is None:
            self._scorer = self.scorer if self.scorer is not None else default_scorer(self._embed())
        return self._scorer

    def run(self, documents: Sequence[Document], query: str) -> ContextResult:
        """The full MeVe result (documents as passages with ids "0", "1", … and the trace)."""
        query = check_query(query)
        qvec, passages = passages_with_embeddings(query, [d.page_content for d in documents], self._embed())
        return select_context(
            query,
            passages,
            self.config,
            scorer=self._score,
            embedder=self._embed(),
            token_counter=get_token_counter(self.token_counter),
            query_vec=qvec,
            lexical=local_lexical(passages),
        )

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        if not documents:
            return []
        result = self.run(documents, query)
        out = []
        for p in result.documents:
            src = documents[int(p.id)]
            meta = {**src.metadata, "meve_score": p.score, "meve_source": "verified" if p.source == "dense" else "fallback", "meve_tokens": p.tokens}
            out.append(Document(page_content=src.page_content, metadata=meta, id=src.id))
        return out

    async def acompress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)
