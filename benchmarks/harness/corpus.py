"""One corpus, indexed once for every system compared on it: MeVe over Chroma with the default
scorer's token vectors, and the dense and BM25 rankings the baselines read (cached per query)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.harness.common import DiskCachedEmbedder, embedder, li_verifier, prime
from meve import MeVe
from meve.retrieval.fusion import rrf
from meve.scoring.late_interaction import LateInteractionScorer

__all__ = ["Corpus"]

DEPTH = 50  # how deep the cached rankings go: past any k or k_init compared


class Corpus:
    """Passages (ids, texts) with a MeVe index whose scorer is ``li`` (token vectors primed once,
    cached on disk by the caller's :class:`~benchmarks.harness.common.TokenDiskCache`)."""

    def __init__(self, name: str, ids: Sequence[str], texts: Sequence[str], li: LateInteractionScorer, emb: DiskCachedEmbedder | None = None) -> None:
        """``emb``: the dense vectors' cache, of the model ``li`` runs (default the float32 MiniLM's)."""
        self.name = name
        self.emb = emb if emb is not None else embedder()
        prime(li, texts, name, self.emb)
        self.meve = MeVe.from_texts(list(texts), ids=list(ids), embedder=self.emb, scorer=li_verifier(li), batch_size=1024)
        self.text = dict(zip(ids, texts, strict=True))
        self._dense: dict[str, list[str]] = {}
        self._bm25: dict[str, list[str]] = {}

    def dense(self, query: str, k: int) -> list[str]:
        """The k nearest passages by the bi-encoder's cosine."""
        if query not in self._dense:
            assert self.meve.store is not None
            self._dense[query] = [p.id for p in self.meve.store.query(self.emb.encode([query])[0], DEPTH)]
        return self._dense[query][:k]

    def bm25(self, query: str, k: int) -> list[str]:
        """The k best passages by BM25 (meve's index over the same passages)."""
        if query not in self._bm25:
            self._bm25[query] = [pid for pid, _ in self.meve.lexical.search(query, DEPTH)]
        return self._bm25[query][:k]

    def hybrid(self, query: str, k: int) -> list[str]:
        """Dense and BM25 fused by reciprocal rank (k = 60), the k best."""
        fused = rrf({"dense": self.dense(query, DEPTH), "bm25": self.bm25(query, DEPTH)})
        return sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]

    def close(self) -> None:
        """Drop the in-memory collection."""
        self.meve.close()
