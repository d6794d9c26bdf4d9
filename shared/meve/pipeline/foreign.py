"""A framework's vector store (a LangChain ``VectorStore``, a LlamaIndex index) as meve's passage
store: the framework searches, meve reads what it returns. The adapters build one through
:mod:`meve.integration` (:func:`~meve.integration.meve_over`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from meve.core.logs import log, warn_once
from meve.core.records import Passage
from meve.pipeline.phases import unit_rows
from meve.scoring.embedders import CachedEmbedder

__all__ = ["ForeignStore", "StoredVectors", "VectorSearch"]


class _FunctionEmbedder:
    """An Embedder over a framework's embedding function (vectors L2-normalised here)."""

    def __init__(self, name: str, fn: Callable[[list[str]], Any]) -> None:
        self.name, self._fn = name, fn

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return unit_rows(self._fn(list(texts)), np.float32)


#: (vector, k) -> the k nearest rows as (id, text, metadata), best first; the id is None or ""
#: where the framework's store returns none.
VectorSearch = Callable[[np.ndarray, int], Sequence[tuple[str | None, str, Mapping[str, Any]]]]

#: The store's own ids -> for each, the (text, vector) the framework's store keeps under it, or
#: None where it keeps none meve can read. A store keeps the vector its model made when the
#: passage was added: reading it spares running that model again over every hit at query time.
StoredVectors = Callable[[Sequence[str]], Sequence[tuple[str, Any] | None]]


def _content_id(text: str) -> str:
    """The id of a passage given without one: a hash of its text, the same in every process, so
    an id-less hit and the same text given for BM25 are one passage."""
    return f"text-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"


class ForeignStore:
    """A :class:`~meve.retrieval.store.PassageStore` over a framework's vector store: the adapter
    says how to search by vector and how to embed (passages and queries apart, for asymmetric
    models).

    Passage vectors (a hit's cosine to the query, the redundancy checks) must be the store's model's,
    as the query's is. With ``stored`` they are read from the store where it keeps one under the
    passage's id for the same text; the rest are embedded with ``embed_texts`` (cached per text),
    which the log says (a warning the first time, a debug line per call); ``vectors_read`` and
    ``vectors_embedded`` count both.

    Ids: a row given without one (``rows``) gets a content id (:func:`_content_id`). A hit keeps
    its id when this store knows it; otherwise it takes the id of a known row with its text (a
    store that named the rows itself, e.g. uuids for documents added without ids), else its own
    id, else a content id. So the dense side and BM25 (built from ``rows``) name a passage alike.
    A hit's text replaces what was known under its id: a document upserted again reads as new."""

    def __init__(
        self,
        *,
        name: str,
        search: VectorSearch,
        embed_texts: Callable[[list[str]], Any],
        embed_query: Callable[[str], Any],
        rows: Iterable[tuple[str | None, str, Mapping[str, Any]]] = (),
        add: Callable[[Sequence[str], Sequence[str], Sequence[Mapping[str, Any] | None]], None] | None = None,
        stored: StoredVectors | None = None,
    ) -> None:
        self._search, self._embed_query, self._add, self._stored = search, embed_query, add, stored
        self.embedder = CachedEmbedder(_FunctionEmbedder(name, embed_texts))
        # meve's id -> (text, metadata, the id the framework's store keeps it under, if known); a
        # given row's own id is taken as the store's (documents added with theirs), checked by text on reading.
        self.rows: dict[str, tuple[str, Mapping[str, Any], str | None]] = {}
        self._by_text: dict[str, str] = {}
        self.vectors_read = self.vectors_embedded = 0
        for pid, text, meta in rows:
            self._put(pid or _content_id(text), text, meta, pid or None)

    def _put(self, pid: str, text: str, meta: Mapping[str, Any], store_id: str | None) -> None:
        """Know ``pid`` with this text (a hit's replaces an older one) and, when given, its store id."""
        former = self.rows.get(pid)
        if former is not None and former[0] != text and self._by_text.get(former[0]) == pid:
            del self._by_text[former[0]]
        self.rows[pid] = (text, meta, store_id or (former[2] if former is not None else None))
        self._by_text.setdefault(text, pid)

    def _hit_id(self, pid: str | None, text: str) -> str:
        if pid and pid in self.rows:
            return pid
        return self._by_text.get(text) or pid or _content_id(text)

    def embed_query(self, query: str) -> np.ndarray:
        """The query through the framework's query side (not cached: each query is new)."""
        return unit_rows([self._embed_query(query)], np.float32)[0]

    def _passages(self, ids: Sequence[str]) -> list[Passage]:
        if not ids:
            return []
        texts = [self.rows[i][0] for i in ids]
        vecs = self._vectors(ids, texts)
        return [Passage(id=i, text=t, metadata=dict(self.rows[i][1]), embedding=v) for i, t, v in zip(ids, texts, vecs, strict=True)]

    def _read(self, ids: Sequence[str], texts: Sequence[str]) -> list[np.ndarray | None]:
        """The vectors the store keeps for these passages (unit length), None where it keeps none
        under the passage's id with the passage's text: a vector of another text is not this one's."""
        found: list[np.ndarray | None] = [None] * len(ids)
        asked = [(j, sid) for j, i in enumerate(ids) if (sid := self.rows[i][2]) is not None]
        if self._stored is None or not asked:
            return found
        for (j, _), row in zip(asked, self._stored([sid for _, sid in asked]), strict=True):
            if row is not None and row[1] is not None and row[0] == texts[j]:
                found[j] = unit_rows([row[1]], np.float32)[0]
        return found

    def _vectors(self, ids: Sequence[str], texts: Sequence[str]) -> list[np.ndarray]:
        """Each passage's vector in the store's space: read from the store where it can give it,
        else embedded (a model pass over the text beside the verifier's), said in the log."""
        found = self._read(ids, texts)
        todo = [t for t, v in zip(texts, found, strict=True) if v is None]
        if todo:
            why = "the adapter cannot read this store's vectors" if self._stored is None else "hits without an id, or ids or texts the store does not hold"
            warn_once(
                f"foreign-store-embeds:{self.embedder.name}:{self._stored is None}",
                f"meve: {len(todo)} of {len(ids)} passages have no vector meve can read from the vector store ({why}); "
                f"they are embedded again with {self.embedder.name}, a model pass beside the verifier's (said once; DEBUG logs each call)",
            )
        made = iter(self.embedder.encode(todo) if todo else ())
        self.vectors_read += len(ids) - len(todo)
        self.vectors_embedded += len(todo)
        log.debug("meve: %d passage vectors read from the vector store, %d embedded with %s", len(ids) - len(todo), len(todo), self.embedder.name)
        return [v if v is not None else next(made) for v in found]

    def query(self, vector: np.ndarray, k: int) -> list[Passage]:
        """The framework's k nearest, each with its cosine to ``vector``."""
        ids: dict[str, None] = {}  # in rank order, each once (two store rows of one text are one passage)
        for pid, text, meta in self._search(vector, k):
            hit = self._hit_id(pid, text)
            if hit not in ids:
                ids[hit] = None
                self._put(hit, text, meta, pid or None)  # new to this wrapper, or upserted again: the store's text now
        out = [p.with_(dense_score=float(np.dot(np.asarray(p.embedding), vector))) for p in self._passages(list(ids))]
        return sorted(out, key=lambda p: -(p.dense_score or 0.0))

    def get(self, ids: Sequence[str]) -> list[Passage]:
        """The known passages among ``ids``, in that order."""
        return self._passages([i for i in ids if i in self.rows])

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: Any) -> None:
        """Add through the framework (its own embeddings), when the adapter allows it."""
        if self._add is None:
            raise TypeError("add passages through your framework's own index; this store only reads it")
        self._add(ids, texts, metadatas)
        for i, t, m in zip(ids, texts, metadatas, strict=True):
            self._put(i, t, dict(m or {}), i)

    def documents(self) -> tuple[list[str], list[str]]:
        """Every known passage's id and text."""
        return list(self.rows), [row[0] for row in self.rows.values()]

    def count(self) -> int:
        """How many passages are known."""
        return len(self.rows)
