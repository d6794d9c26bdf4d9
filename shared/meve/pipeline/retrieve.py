"""Phase 1: where a MeVe's candidates come from (dense kNN, hybrid fusion with BM25, or
documents-then-windows) and where its fallback's BM25 hits come from."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from meve.core.config import MeVeConfig
from meve.core.errors import ConfigError
from meve.core.records import Passage
from meve.mindref.hierarchy import Hierarchy
from meve.pipeline.runner import cosine_to
from meve.retrieval.fusion import rrf
from meve.retrieval.lexical import Lexical, LexicalSearch
from meve.retrieval.store import ChromaStore, PassageStore
from meve.scoring.protocols import Scorer

__all__ = ["Retriever"]


class Retriever:
    """A MeVe's corpus: the passage store (dense search), the BM25 index over the same passages,
    or the document hierarchy; ``follow_replicas`` makes each BM25 lookup first catch up with
    rows other handles or processes added (one ``count()``)."""

    def __init__(self, store: PassageStore | None, lexical: Lexical, hierarchy: Hierarchy | None, follow_replicas: bool) -> None:
        self.store = store
        self.lexical = lexical
        self.hierarchy = hierarchy
        self.follow_replicas = follow_replicas

    def retrieve(self, query: str, qvec: np.ndarray, cfg: MeVeConfig, scorer: Callable[[], Scorer]) -> tuple[list[Passage], LexicalSearch, dict[str, Any]]:
        """(candidates in rank order, the fallback's lexical search, facts for the trace)."""
        if cfg.retrieval == "hierarchical":
            return self._hierarchical(query, qvec, cfg, scorer)
        return self._dense(query, qvec, cfg)

    def _dense(self, query: str, qvec: np.ndarray, cfg: MeVeConfig) -> tuple[list[Passage], LexicalSearch, dict[str, Any]]:
        if self.store is None:
            raise ConfigError("retrieval", cfg.retrieval, "'hierarchical' for a MeVe built with from_documents (it has no flat passage store)")
        candidates = self.store.query(qvec, cfg.k_init)
        # The lexical index mirrors every passage meve added: its size costs nothing, a Chroma count() a few ms per query.
        info: dict[str, Any] = {"k_init": cfg.k_init, "candidates": cfg.candidates, "store_size": len(self.lexical)}
        # Whether dense search also read long passages' later windows (meve.retrieval.passage_windows).
        info["windows"] = getattr(self.store, "windows", None) is not None
        search: LexicalSearch = self.search
        if cfg.candidates == "hybrid":
            candidates, info["from_bm25"] = self._fuse(query, qvec, candidates, cfg.k_init)
            search = partial(self.search, caught_up=True)  # the fusion just caught up; a count() costs ms
        return candidates, search, info

    def _fuse(self, query: str, qvec: np.ndarray, dense: list[Passage], k: int) -> tuple[list[Passage], list[str]]:
        """Dense and BM25 top-k fused by reciprocal rank and cut to k; BM25-only hits are read from
        the store with their embeddings and scored by cosine like the rest."""
        assert self.store is not None
        self.catch_up()
        lexical = self.lexical.search(query, k)
        fused = rrf({"dense": [p.id for p in dense], "bm25": [pid for pid, _ in lexical]})
        order = sorted(fused, key=lambda pid: -fused[pid])[:k]
        by_id = {p.id: p for p in dense}
        new = [pid for pid in order if pid not in by_id]
        by_id.update({p.id: cosine_to(p, qvec) for p in self.store.get(new)})
        bm25 = dict(lexical)
        return [by_id[pid].with_(bm25_score=bm25.get(pid)) for pid in order if pid in by_id], new

    def _hierarchical(self, query: str, qvec: np.ndarray, cfg: MeVeConfig, scorer: Callable[[], Scorer]) -> tuple[list[Passage], LexicalSearch, dict[str, Any]]:
        hierarchy = self.hierarchy
        if hierarchy is None:
            raise ConfigError("retrieval", "hierarchical", "'dense' for a MeVe built from passages; use MeVe.from_documents for hierarchical retrieval")
        if cfg.passage_tokens != hierarchy.passage_tokens:
            raise ConfigError("passage_tokens", cfg.passage_tokens, f"{hierarchy.passage_tokens}, the window size this corpus was built with at ingestion")
        if self.follow_replicas:
            hierarchy.catch_up()
        nearest = hierarchy.nearest_windows(qvec)  # one kNN serves both stages
        chosen = hierarchy.select(query, qvec, cfg.k_docs, scorer, nearest=nearest)
        candidates = hierarchy.localise(query, qvec, chosen, cfg.k_init, nearest=nearest)
        info = {
            "k_init": cfg.k_init,
            "mode": "hierarchical",
            "documents": [d.id for d in chosen],
            "doc_scores": [d.score for d in chosen],
            "doc_signals": {d.id: dict(d.signals) for d in chosen},
        }
        return candidates, hierarchy.search, info

    def catch_up(self) -> None:
        """Index the rows other replicas added (only the lexical side needs it: dense search asks
        Chroma, which every replica writes to)."""
        if self.follow_replicas and isinstance(self.store, ChromaStore):
            self.lexical.catch_up(self.store)

    def search(self, query: str, k: int, *, caught_up: bool = False) -> list[Passage]:
        """The k best passages by BM25 over the whole corpus, read from the store."""
        assert self.store is not None
        if not caught_up:
            self.catch_up()
        hits = self.lexical.search(query, k)
        fetched = {p.id: p for p in self.store.get([pid for pid, _ in hits])}
        return [fetched[pid].with_(bm25_score=s) for pid, s in hits if pid in fetched]
