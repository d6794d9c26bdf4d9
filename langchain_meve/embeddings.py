"""LangChain ``Embeddings`` over any meve Embedder (default: all-MiniLM-L6-v2, offline)."""

from __future__ import annotations

import asyncio

from langchain_core.embeddings import Embeddings

from meve import Embedder
from meve.integration import Models


class MeVeEmbeddings(Embeddings):
    """Lets a LangChain VectorStore use the model meve uses, offline (and its text cache).

    The model loads at the first embedding call, not here.
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._models = Models(embedder)

    @property
    def embedder(self) -> Embedder:
        """The meve embedder behind these embeddings."""
        return self._models.embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text; over meve's model (the default) the same pass keeps each text's
        token vectors for the verifier, on disk too, so queries read no passage with the model."""
        return [[float(x) for x in row] for row in self._models.embed_passages(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        """The query's vector."""
        return [float(x) for x in self.embedder.encode([text])[0]]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """:meth:`embed_documents` in a worker thread."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """:meth:`embed_query` in a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)
