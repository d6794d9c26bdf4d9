"""LangChain document compressor: MeVe's verify → fallback → prioritise → budget over any retriever's documents."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_meve.retriever import meve_metadata
from meve import MeVeConfig
from meve.context import embed_passages, local_lexical, select_context
from meve.models import LazyModels
from meve.records import ContextResult, check_query
from meve.tokens import get_token_counter


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
    _models: LazyModels = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        overrides = {k: data.pop(k) for k in list(data) if k in MeVeConfig.__dataclass_fields__}
        if overrides:
            data["config"] = data.get("config", MeVeConfig()).replace(**overrides)
        super().__init__(**data)
        self._models = LazyModels(self.embedder, self.scorer)

    def run(self, documents: Sequence[Document], query: str) -> ContextResult:
        """The full MeVe result (documents as passages with ids "0", "1", … and the trace)."""
        query = check_query(query)
        models = self._models
        qvec, passages = embed_passages(query, [d.page_content for d in documents], models.embedder)
        return select_context(
            query,
            passages,
            self.config,
            verifier=lambda: models.verifier,
            embedder=models.embedder,
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
            out.append(Document(page_content=p.text, metadata=meve_metadata(p, src.metadata), id=src.id))
        return out

    async def acompress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)
