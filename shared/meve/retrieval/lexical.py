"""A BM25 index addressed by passage id, and lexical search over a given candidate list."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from meve.core.records import Passage
from meve.retrieval.bm25 import DEFAULT_BM25, BM25Backend, IncrementalBM25, make_bm25, top_k

if TYPE_CHECKING:
    from meve.retrieval.store import ChromaStore

__all__ = ["LexicalIndex", "LexicalSearch", "local_lexical"]

#: (query, k) -> the k best passages by BM25, each with its ``bm25_score``.
LexicalSearch = Callable[[str, int], list[Passage]]


class LexicalIndex:
    """BM25 over the store's passages, addressed by passage id (thread-safe)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], backend: str = DEFAULT_BM25) -> None:
        self.backend_name = backend
        self.ids: list[str] = list(ids)
        self._known = set(self.ids)
        self.backend: BM25Backend = make_bm25(backend, texts)
        self._lock = threading.Lock()

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        with self._lock:
            fresh = [(i, t) for i, t in zip(ids, texts, strict=True) if i not in self._known]
            self.ids.extend(i for i, _ in fresh)
            self._known.update(i for i, _ in fresh)
            self.backend.add([t for _, t in fresh])

    def __contains__(self, pid: object) -> bool:
        return pid in self._known

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        with self._lock:
            if not self.ids or k <= 0:
                return []
            return [(self.ids[i], s) for i, s in top_k(self.backend.get_scores(query), k)]

    def catch_up(self, store: ChromaStore) -> int:
        """Passages other handles or processes (app replicas) added to the collection since this
        index last looked: one ``count()``, and only on a difference the rows after the ones known
        (Chroma returns rows in the order it stored them; a full id scan if that does not add up).
        Returns how many were added."""
        known = len(self.ids)
        rows = store.rows_after(known, self._known)
        self.add([i for i, _, _ in rows], [t for _, t, _ in rows])
        return len(self.ids) - known


def local_lexical(passages: Sequence[Passage]) -> LexicalSearch:
    """Fallback source over a given candidate list: BM25 hits first, then the rest in input order (top-N)."""
    bm25 = IncrementalBM25([p.text for p in passages])

    def search(query: str, k: int) -> list[Passage]:
        scores = bm25.get_scores(query)
        order = [i for i, _ in top_k(scores, len(passages))]
        order += [i for i in range(len(passages)) if i not in set(order)]
        return [passages[i].with_(bm25_score=float(scores[i])) for i in order[:k]]

    return search
