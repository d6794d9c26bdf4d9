"""One corpus, indexed once for every system compared on it: MeVe over Chroma with the default
scorer's token vectors, and the dense and BM25 rankings the baselines read (cached per query;
:class:`meve.evaluate.arms.Rankings`, the library's, so ``meve evaluate`` ranks the same way)."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.harness.common import DiskCachedEmbedder, embedder, li_verifier, prime
from meve import MeVe
from meve.evaluate.arms import DEPTH, Rankings
from meve.scoring.late_interaction import LateInteractionScorer

__all__ = ["DEPTH", "Corpus"]


class Corpus(Rankings):
    """Passages (ids, texts) with a MeVe index whose scorer is ``li`` (token vectors primed once,
    cached on disk by the caller's :class:`~benchmarks.harness.common.TokenDiskCache`)."""

    def __init__(self, name: str, ids: Sequence[str], texts: Sequence[str], li: LateInteractionScorer, emb: DiskCachedEmbedder | None = None) -> None:
        """``emb``: the dense vectors' cache, of the model ``li`` runs (default the float32 MiniLM's)."""
        self.name = name
        self.emb = emb if emb is not None else embedder()
        prime(li, texts, name, self.emb)
        meve = MeVe.from_texts(list(texts), ids=list(ids), embedder=self.emb, scorer=li_verifier(li), batch_size=1024)
        super().__init__(meve, dict(zip(ids, texts, strict=True)), lambda q: self.emb.encode([q])[0])

    def close(self) -> None:
        """Drop the in-memory collection."""
        self.meve.close()
