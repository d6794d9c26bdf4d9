"""Passage stores: a Protocol and its Chroma implementation."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meve.errors import InputError, StoreError
from meve.records import Passage

_PRIMITIVES = (str, int, float, bool)


@runtime_checkable
class PassageStore(Protocol):
    """Where passages and their embeddings live (dense search happens here)."""

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None: ...

    def query(self, vector: np.ndarray, k: int) -> list[Passage]: ...

    def get(self, ids: Sequence[str]) -> list[Passage]: ...

    def documents(self) -> tuple[list[str], list[str]]: ...

    def count(self) -> int: ...


def chroma_client(path: str | None = None) -> Any:
    """An embedded Chroma client with telemetry off: persistent at ``path``, else in memory."""
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if path is None:
        return chromadb.EphemeralClient(settings=settings)
    return chromadb.PersistentClient(path=str(path), settings=settings)


def unique_collection_name(prefix: str = "meve") -> str:
    # In-memory Chroma clients share one store per process, so default names must not collide.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def check_metadata(meta: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        raise InputError(f"{where} is {type(meta).__name__}; expected a dict of str -> str/int/float/bool")
    for key, value in meta.items():
        if not isinstance(key, str) or not isinstance(value, _PRIMITIVES):
            raise InputError(f"{where}[{key!r}]={value!r} is not storable; metadata values must be str, int, float or bool")
    return dict(meta) or None


class ChromaStore:
    """Passages in one Chroma collection; cosine similarity computed from returned embeddings,
    so collections in any distance space work."""

    def __init__(self, collection: Any, *, dimension: int | None = None) -> None:
        self.collection = collection
        self.dimension = dimension
        stored = self.stored_dimension()
        if dimension is not None and stored is not None and stored != dimension:
            raise StoreError(
                f"collection {collection.name!r} holds {stored}-dimensional embeddings but the embedder makes {dimension}-dimensional ones; "
                "use the embedder the collection was built with, or another collection"
            )

    def stored_dimension(self) -> int | None:
        if self.collection.count() == 0:
            return None
        peek = self.collection.peek(limit=1)
        embs = peek.get("embeddings")
        if embs is None or len(embs) == 0:
            return None
        return len(embs[0])

    def count(self) -> int:
        return int(self.collection.count())

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None:
        if self.dimension is not None and embeddings.shape[1] != self.dimension:
            raise StoreError(f"embeddings have dimension {embeddings.shape[1]}, the store expects {self.dimension}")
        kwargs: dict[str, Any] = {"ids": list(ids), "documents": list(texts), "embeddings": np.asarray(embeddings, dtype=np.float32)}
        if any(m is not None for m in metadatas):
            kwargs["metadatas"] = [m if m else None for m in metadatas]
        try:
            self.collection.add(**kwargs)
        except Exception as exc:
            if "dimension" in str(exc):
                raise StoreError(f"Chroma rejected the embeddings: {exc}") from exc
            raise

    def _passages(self, ids: list[str], docs: list[Any], metas: list[Any], embs: Any, query: np.ndarray | None) -> list[Passage]:
        out: list[Passage] = []
        for i, pid in enumerate(ids):
            emb = np.asarray(embs[i], dtype=np.float32) if embs is not None else None
            sim = None
            if query is not None and emb is not None:
                norm = float(np.linalg.norm(emb)) or 1.0
                sim = float(emb @ query) / norm
            out.append(Passage(id=pid, text=docs[i] or "", metadata=dict(metas[i] or {}), dense_score=sim, embedding=emb))
        return out

    def query(self, vector: np.ndarray, k: int) -> list[Passage]:
        # Chroma returns what it has when k exceeds the collection (tested), so no count() round trip per query.
        res = self.collection.query(query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=k, include=["documents", "metadatas", "embeddings"])
        if not res["ids"] or not res["ids"][0]:
            return []
        passages = self._passages(res["ids"][0], res["documents"][0], res["metadatas"][0], res["embeddings"][0], np.asarray(vector, dtype=np.float32))
        return sorted(passages, key=lambda p: -(p.dense_score or 0.0))

    def get(self, ids: Sequence[str]) -> list[Passage]:
        if not ids:
            return []
        res = self.collection.get(ids=list(ids), include=["documents", "metadatas", "embeddings"])
        by_id = {p.id: p for p in self._passages(res["ids"], res["documents"], res["metadatas"], res["embeddings"], None)}
        return [by_id[i] for i in ids if i in by_id]

    def documents(self, page: int = 5000) -> tuple[list[str], list[str]]:
        ids: list[str] = []
        texts: list[str] = []
        offset = 0
        while True:
            res = self.collection.get(include=["documents"], limit=page, offset=offset)
            if not res["ids"]:
                break
            ids.extend(res["ids"])
            texts.extend(d or "" for d in res["documents"])
            offset += len(res["ids"])
        return ids, texts
