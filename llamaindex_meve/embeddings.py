"""A LlamaIndex embedding model over any meve Embedder (default: all-MiniLM-L6-v2, offline)."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from meve import Embedder
from meve.integration import Models, default_embedder


class MeVeEmbedding(BaseEmbedding):
    """Lets a ``VectorStoreIndex`` use the same offline model meve uses (and its cache). Indexing
    through it reads each node once: the pass that makes a node's vector keeps its token vectors
    for meve's verifier, in memory and on disk, so a later process's queries read none."""

    _embedder: Embedder = PrivateAttr()
    _models: Models = PrivateAttr()

    def __init__(self, embedder: Embedder | None = None, **kwargs: Any) -> None:
        emb = embedder if embedder is not None else default_embedder()
        kwargs.setdefault("model_name", emb.name)
        super().__init__(**kwargs)
        self._embedder = emb
        self._models = Models(emb)

    @classmethod
    def class_name(cls) -> str:
        return "MeVeEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The meve embedder behind this model."""
        return self._embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.encode([query])[0]]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        # Over meve's model the same pass keeps each node's token vectors for the verifier (on disk too).
        return [[float(x) for x in row] for row in self._models.embed_passages(texts)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)
