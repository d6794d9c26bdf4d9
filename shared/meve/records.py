"""Frozen records that flow between the phases.

Phases never mutate a record; they return new ones via ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from meve.errors import InputError

__all__ = [
    "SOURCES",
    "ContextResult",
    "Dropped",
    "Passage",
    "PhaseRecord",
    "Source",
    "check_query",
    "check_text",
]

# How a passage entered the context, the one vocabulary of ``.source`` and of the adapters'
# ``meve_source``: "retrieved" before phase 2; then "verified" (passed tau), "fallback" (added by
# phase 3) or "unverified" (verification switched off). Where candidates came from (dense kNN,
# hierarchical windows, another retriever) is in the retrieve phase's trace.
Source = Literal["retrieved", "verified", "fallback", "unverified"]
SOURCES: tuple[str, ...] = ("retrieved", "verified", "fallback", "unverified")


def check_text(text: str, where: str) -> str:
    """A str that every layer can encode: lone surrogates (e.g. "\\ud800") cannot be stored or tokenised."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{where} holds {text[exc.start : exc.end]!r} at index {exc.start}, which is not valid Unicode text (a lone surrogate); clean the text first"
        ) from exc
    return text


def check_query(query: Any) -> str:
    """The one rule for queries everywhere (MeVe, memory, both adapters): a non-blank str."""
    if not isinstance(query, str):
        raise InputError(f"query must be a str, got {type(query).__name__}: {query!r}"[:200])
    if not query.strip():
        raise InputError(f"query {query!r} is empty or whitespace; give the question to retrieve context for")
    return check_text(query, "query")


@dataclass(frozen=True, eq=False)
class Passage:
    """One candidate passage and everything the phases learned about it.

    ``score`` is the best evidence of relevance available: the verifier's
    [0, 1] score when verification ran, else the retrieval score.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    source: Source = "retrieved"
    dense_score: float | None = None
    bm25_score: float | None = None
    relevance: float | None = None
    tokens: int | None = None
    embedding: np.ndarray | None = field(default=None, repr=False)
    # After sentence pruning: the kept character spans of the stored text, in order; ``text`` is
    # then those spans joined (non-adjacent ones by " … "). None: the text is whole.
    spans: tuple[tuple[int, int], ...] | None = None

    @property
    def score(self) -> float:
        for value in (self.relevance, self.dense_score, self.bm25_score):
            if value is not None:
                return float(value)
        return 0.0

    def with_(self, **changes: Any) -> Passage:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "metadata": dict(self.metadata),
            "source": self.source,
            "score": self.score,
            "dense_score": self.dense_score,
            "bm25_score": self.bm25_score,
            "relevance": self.relevance,
            "tokens": self.tokens,
            "spans": [list(s) for s in self.spans] if self.spans is not None else None,
        }


@dataclass(frozen=True)
class Dropped:
    """A candidate a phase removed, and why."""

    id: str
    reason: str
    score: float | None = None


@dataclass(frozen=True)
class PhaseRecord:
    """What one phase kept and dropped, with scores, tokens and time."""

    phase: str
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...] = ()
    scores: Mapping[str, float] = field(default_factory=dict)
    tokens_in: int | None = None
    tokens_out: int | None = None
    ms: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "kept": list(self.kept),
            "dropped": [{"id": d.id, "reason": d.reason, "score": d.score} for d in self.dropped],  # asdict deep-copies: slow per query
            "scores": dict(self.scores),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "ms": round(self.ms, 3),
            "info": dict(self.info),
        }


@dataclass(frozen=True)
class ContextResult:
    """The budgeted context for one query and the audit trail that produced it."""

    query: str
    documents: tuple[Passage, ...]
    context: str
    token_count: int
    trace: tuple[PhaseRecord, ...]
    config: Mapping[str, Any] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseRecord:
        for record in self.trace:
            if record.phase == name:
                return record
        raise KeyError(f"no phase {name!r} in this trace; phases: {[r.phase for r in self.trace]}")

    @property
    def total_ms(self) -> float:
        return sum(r.ms for r in self.trace)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "documents": [d.to_dict() for d in self.documents],
            "context": self.context,
            "token_count": self.token_count,
            "trace": [r.to_dict() for r in self.trace],
            "config": dict(self.config),
            "total_ms": round(self.total_ms, 3),
        }
