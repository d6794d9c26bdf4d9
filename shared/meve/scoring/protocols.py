"""What scores and what embeds: the Protocols every model meets, and :class:`Scoring`, how a
MeVe runs a scorer (resolved once, by :mod:`meve.scoring.resolve`, so no phase asks which
scorer it holds).

The one word for "the thing that scores a (query, passage) pair" is *scorer*: the default late
interaction, a cross-encoder, the cosine baseline, or your own object with ``name`` and ``score``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "ProvidesScoring", "Scorer", "Scoring", "SharedPass", "SpanScores", "score_span_texts", "split_sizes"]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Scorer(Protocol):
    """Scores (query, passage) pairs on a [0, 1] scale where ``tau`` applies. ``query_vec`` is the
    query's dense embedding when the caller already has it (a scorer in the embedder's space can
    skip embedding the query again); others ignore it."""

    name: str

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray: ...


@runtime_checkable
class ProvidesScoring(Protocol):
    """A scorer that knows how meve should run it (:class:`Scoring`): how it scores sentences
    inside a passage and, optionally, a shared pass. meve's late interaction and cross-encoder
    are such scorers; a scorer of your own can be one too."""

    def scoring(self) -> Scoring: ...


#: Scores of character spans (sentences) inside passages: (query, texts, spans per text) -> one array per text.
SpanScores = Callable[[str, Sequence[str], Sequence[Sequence[tuple[int, int]]]], list[np.ndarray]]


def split_sizes(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """``values`` cut into consecutive pieces of the given sizes."""
    bounds = np.cumsum([0, *sizes])
    return [values[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]


def score_span_texts(scorer: Scorer, query: str, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> list[np.ndarray]:
    """Span scores through the one protocol: every span's text scored alone, in one batch."""
    flat = [t[a:b] for t, sp in zip(texts, spans, strict=True) for a, b in sp]
    scores = np.asarray(scorer.score(query, flat), dtype=np.float64) if flat else np.zeros(0)
    return split_sizes(scores, [len(sp) for sp in spans])


@dataclass(frozen=True)
class SharedPass:
    """Dense vectors made by a scorer's own forward pass, which also keeps what the scorer
    scores with (late interaction's token vectors), so one model run serves retrieval and
    verification. ``name`` is the embedder whose vectors these are; meve uses a shared pass
    only for a MeVe whose embedder has that name."""

    name: str
    passages: Callable[[Sequence[str]], np.ndarray]
    query: Callable[[str], np.ndarray]
    #: Vectors of another retriever's texts met at query time; texts an earlier query saw may come
    #: from the scorer's cache. None: ``passages`` serves.
    candidates: Callable[[Sequence[str]], np.ndarray] | None = None
    #: ``passages`` with each text's later windows' vectors (:class:`meve.scoring.token_pass.Pass`)
    #: from the same pass. None: windows are the embedder's to make, if it can.
    windowed: Callable[[Sequence[str]], tuple[np.ndarray, list[np.ndarray]]] | None = None


@dataclass(frozen=True)
class Scoring:
    """A scorer as meve runs it: ``scorer`` scores passages (the one protocol), ``spans`` scores
    sentences inside a kept passage, ``shared`` (optional) makes the dense vectors."""

    scorer: Scorer
    spans: SpanScores
    shared: SharedPass | None = None

    @classmethod
    def of(cls, scorer: Scorer) -> Scoring:
        """Any scorer: sentences are scored as texts of their own (:func:`score_span_texts`)."""
        return cls(scorer, partial(score_span_texts, scorer))
