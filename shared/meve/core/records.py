"""Frozen records that flow between the phases.

Phases never mutate a record; they return new ones via ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from meve.core.errors import InputError

__all__ = [
    "SOURCES",
    "ContextResult",
    "Dropped",
    "Passage",
    "PhaseRecord",
    "Source",
    "as_dict",
    "check_metadata",
    "check_query",
    "check_text",
    "check_texts",
    "check_vector",
]

# How a passage entered the context, the one vocabulary of ``.source`` and of the adapters'
# ``meve_source``: "retrieved" before phase 2; then "verified" (passed tau), "covered" (kept by
# phase 2's query coverage, MeVeConfig.coverage), "fallback" (added by phase 3), "padded" (kept
# below tau so the context holds MeVeConfig.min_keep passages) or "unverified" (verification
# switched off). Where candidates came from (dense kNN, hierarchical windows,
# another retriever) is in the retrieve phase's trace.
Source = Literal["retrieved", "verified", "covered", "fallback", "padded", "unverified"]
SOURCES: tuple[str, ...] = ("retrieved", "verified", "covered", "fallback", "padded", "unverified")


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


_PRIMITIVES = (str, int, float, bool)
# The adapters add these keys to returned metadata; a stored key of that form would be overwritten.
RESERVED_PREFIX = "meve_"


def check_metadata(meta: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """Metadata Chroma stores and returns unchanged: str keys (non-empty) and str/int/float/bool values,
    finite floats and ints within int64 (others vanish or come back as floats)."""
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        raise InputError(f"{where} is {type(meta).__name__}; expected a dict of str -> str/int/float/bool")
    for key, value in meta.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"{where} has the key {key!r}; metadata keys must be non-empty str")
        check_text(key, f"{where} key")
        if key.startswith(RESERVED_PREFIX):
            raise InputError(f"{where} has the key {key!r}; keys starting with {RESERVED_PREFIX!r} are meve's own (score, source, tokens, spans), rename it")
        if not isinstance(value, _PRIMITIVES):
            raise InputError(f"{where}[{key!r}]={value!r} is not storable; metadata values must be str, int, float or bool")
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{where}[{key!r}]={value!r} is not storable: Chroma drops NaN and infinite values; use a finite number or a str")
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise InputError(f"{where}[{key!r}]={value} is outside int64, so Chroma would return it as a float; store it as a str")
        if isinstance(value, str):
            check_text(value, f"{where}[{key!r}]")
    return dict(meta) or None


def check_vector(vec: Any, what: str) -> np.ndarray:
    """``vec`` as one finite float32 vector of unit length (what meve's embedders make: cosines are
    read as dot products), else InputError naming ``what`` and its length."""
    out = np.asarray(vec, dtype=np.float32)
    if out.ndim != 1 or not out.size or not np.isfinite(out).all():
        raise InputError(f"{what} must be one finite vector (e.g. MeVe.query_vector(query)), got an array of shape {out.shape}")
    norm = float(np.linalg.norm(out))
    if abs(norm - 1.0) > 1e-3:
        raise InputError(f"{what} must have unit length, as MeVe.query_vector(query) gives it; got a vector of length {norm:.4g}")
    return out


def check_texts(texts: Any, ids: Any, metadatas: Any, start: int = 0) -> tuple[list[str], list[str], list[dict[str, Any] | None]]:
    """Validate a batch of corpus texts with optional ids and metadatas; returns normalised lists."""
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise InputError(f"texts must be a list of str, got {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputError(f"texts[{i}] is {type(t).__name__} ({t!r}); every text must be a str")
        if not t.strip():
            raise InputError(f"texts[{i}] is empty or whitespace; remove it before indexing")
        check_text(t, f"texts[{i}]")
    if ids is None:
        ids = [f"doc-{start + i}" for i in range(len(texts))]
    else:
        ids = list(ids)
        if len(ids) != len(texts):
            raise InputError(f"ids has {len(ids)} entries but texts has {len(texts)}; give one id per text")
        for i, pid in enumerate(ids):
            if not isinstance(pid, str) or not pid:
                raise InputError(f"ids[{i}]={pid!r}: every id must be a non-empty str")
            check_text(pid, f"ids[{i}]")
    seen: set[str] = set()
    for pid in ids:
        if pid in seen:
            raise InputError(f"duplicate id {pid!r}: ids must be unique")
        seen.add(pid)
    if metadatas is None:
        metas: list[dict[str, Any] | None] = [None] * len(texts)
    else:
        metadatas = list(metadatas)
        if len(metadatas) != len(texts):
            raise InputError(f"metadatas has {len(metadatas)} entries but texts has {len(texts)}; give one per text (or None)")
        metas = [check_metadata(m, f"metadatas[{i}]") for i, m in enumerate(metadatas)]
    return texts, ids, metas


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
    # After a join with a neighbour in its source (MeVeConfig.neighbours): the ids of the passages
    # whose texts ``text`` joins, in reading order, this one's among them. None: its own text alone.
    joined: tuple[str, ...] | None = None

    @property
    def score(self) -> float:
        for value in (self.relevance, self.dense_score, self.bm25_score):
            if value is not None:
                return float(value)
        return 0.0

    def with_(self, **changes: Any) -> Passage:
        # dataclasses.replace re-runs __init__ (~7 us); a query copies ~60 passages, so this
        # copies the fields directly (Passage has no __post_init__ to skip).
        unknown = changes.keys() - _PASSAGE_FIELDS
        if unknown:
            raise TypeError(f"Passage has no field(s) {sorted(unknown)}; fields are {sorted(_PASSAGE_FIELDS)}")
        new = object.__new__(Passage)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

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
            "joined": list(self.joined) if self.joined is not None else None,
        }


_PASSAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(Passage))


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
    # What the model reads: the passages kept, in order, their joined text and its tokens.
    documents: tuple[Passage, ...]
    context: str
    token_count: int
    # How it was made: every phase's record, and the settings it ran with.
    trace: tuple[PhaseRecord, ...]
    config: Mapping[str, Any] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseRecord:
        """The record of the phase called ``name`` (KeyError naming the phases there are)."""
        for record in self.trace:
            if record.phase == name:
                return record
        raise KeyError(f"no phase {name!r} in this trace; phases: {[r.phase for r in self.trace]}")

    @property
    def total_ms(self) -> float:
        """Milliseconds of every phase together."""
        return sum(r.ms for r in self.trace)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return as_dict(self, total_ms=round(self.total_ms, 3))


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def as_dict(record: Any, *, skip: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    """A frozen record as JSON-ready data: its fields (records inside converted by their own
    ``to_dict``, tuples as lists), less ``skip``, then ``extra``."""
    out = {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record) if f.name not in skip}
    return {**out, **{k: _plain(v) for k, v in extra.items()}}
