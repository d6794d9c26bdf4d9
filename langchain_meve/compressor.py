"""LangChain document compressor: MeVe's verify → fallback → prioritise → prune → budget over any retriever's documents."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from meve import ContextResult, MeVeConfig
from meve.integration import Models, config_from, metadata_place, passage_metadata, run_on_texts


class MeVeCompressor(BaseDocumentCompressor):
    """Verification + fallback + prioritisation + pruning + token budget for documents from any retriever.

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
    _models: Models = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        data["config"] = config_from(data, data.pop("config", None), owner="MeVeCompressor", others=("embedder", "scorer", "token_counter"))
        super().__init__(**data)
        self._models = Models(self.embedder, self.scorer)

    def run(self, documents: Sequence[Document], query: str) -> ContextResult:
        """The full MeVe result (documents as passages with ids "0", "1", … and the trace). With
        ``neighbours=True``, a document joins its neighbour among these by their ``source`` and
        ``start_index`` metadata (a splitter's ``add_start_index=True``)."""
        texts = [d.page_content for d in documents]
        places = [metadata_place(d.metadata) for d in documents] if self.config.neighbours else None
        return run_on_texts(query, texts, self.config, self._models, token_counter=self.token_counter, places=places)

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        """The documents MeVe keeps, pruned where it pruned, with ``meve_*`` metadata."""
        if not documents:
            return []
        result = self.run(documents, query)
        out = []
        for p in result.documents:
            src = documents[int(p.id)]
            meta = passage_metadata(result, p, src.metadata, named=lambda pid: documents[int(pid)].id or pid)
            out.append(Document(page_content=p.text, metadata=meta, id=src.id))
        return out

    async def acompress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        """:meth:`compress_documents` in a worker thread."""
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)

    def warm_up(self, documents: Sequence[Document] = (), *, show_progress: bool = True) -> int:
        """Load the models now and have the verifier read ``documents`` (a store's chunks,
        embedded with another model than meve's) ahead of any query, with a progress bar; what it
        reads is kept on disk, so later processes skip it too. Returns how many went through the model."""
        return self._models.read_ahead([d.page_content for d in documents], show_progress=show_progress)

    async def awarm_up(self, documents: Sequence[Document] = (), *, show_progress: bool = True) -> int:
        """:meth:`warm_up` in a worker thread."""
        return await asyncio.to_thread(self.warm_up, documents, show_progress=show_progress)
