"""The bi-encoder cosine as a scorer (``scorer="cosine"``; a baseline, never the default)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from meve.scoring.embedders import CachedEmbedder, default_embedder
from meve.scoring.protocols import Embedder

__all__ = ["CosineScorer", "sigmoid"]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function, as float64."""
    return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=np.float64)


class CosineScorer:
    """Bi-encoder cosine mapped to [0, 1] by a logistic.

    ``score = sigmoid((cos - center) / scale)``, so the pipeline's ``tau = 0.5``
    means ``cos >= center``. ``center = 0.664`` and ``scale = 0.163`` are a Platt
    fit for all-MiniLM-L6-v2 on the registry's HotpotQA dev questions (question vs.
    "title: paragraph", supporting paragraphs relevant; ``benchmarks/fitted/cosine_scorer.json``,
    ``python -m benchmarks.record_fitted``). It only re-applies the retriever's own
    similarity, so it can trim a ranking's tail but not correct it.
    """

    def __init__(self, embedder: Embedder | None = None, *, center: float = 0.664, scale: float = 0.163) -> None:
        # Passages are embedded by text; a cache makes the vectors ingestion already made free.
        given = embedder if embedder is not None else default_embedder()
        self.embedder: Embedder = given if isinstance(given, CachedEmbedder) else CachedEmbedder(given)
        self.center = center
        self.scale = scale
        self.name = f"cosine:{self.embedder.name} (center {center})"
        self.pairs_scored = 0

    def score_embeddings(self, query_vec: np.ndarray, passage_vecs: np.ndarray) -> np.ndarray:
        """Scores from vectors already made (rows are unit vectors)."""
        if len(passage_vecs) == 0:
            return np.zeros(0, dtype=np.float64)
        cos = np.asarray(passage_vecs, dtype=np.float64) @ np.asarray(query_vec, dtype=np.float64)
        self.pairs_scored += len(passage_vecs)
        return sigmoid((cos - self.center) / self.scale)

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray:
        """``query_vec`` is unused: it may come from another embedder's space. The query and the
        passages go through this scorer's cached embedder (hits when it is the pipeline's)."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float64)
        vecs = self.embedder.encode([query, *passages])
        return self.score_embeddings(vecs[0], vecs[1:])
