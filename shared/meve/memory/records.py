"""The records chat memory hands out: stored turns, the rebuilt context, and why each turn is in or out."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from meve.core.errors import InputError
from meve.core.records import as_dict
from meve.memory.render import content, day_changes, render

__all__ = ["ROLES", "MemoryContext", "Turn", "TurnTrace", "check_roles", "check_turn_ids"]

ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True)
class Turn:
    """One stored chat turn, verbatim. ``edited``: when an edit (the same id, new text) last
    superseded its text, else None; an edited turn keeps its time and place in the conversation."""

    id: str
    role: str
    text: str
    timestamp: datetime
    seq: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
    edited: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        out = {"id": self.id, "role": self.role, "text": self.text, "timestamp": self.timestamp.isoformat(), "seq": self.seq, "metadata": dict(self.metadata)}
        return {**out, "edited": self.edited.isoformat() if self.edited is not None else None}


@dataclass(frozen=True)
class TurnTrace:
    """Why a turn is, or is not, in the rebuilt context; ``edited``: when an edit superseded the
    turn's earlier text (ISO-8601), else None."""

    id: str
    seq: int
    bm25: float | None
    dense: Mapping[str, float]
    fused: float | None
    included: bool
    reason: str
    tokens: int
    edited: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "seq": self.seq,
            "bm25": self.bm25,
            "dense": dict(self.dense),
            "fused": self.fused,
            "included": self.included,
            "reason": self.reason,
            "tokens": self.tokens,
            "edited": self.edited,
        }


@dataclass(frozen=True, eq=False)  # it holds a closure (the trace builder): two rebuilds are compared by identity
class MemoryContext:
    """The rebuilt context: turns in chronological order, within ``l_max`` tokens."""

    query: str
    turns: tuple[Turn, ...]
    token_count: int
    l_max: int
    fusion: str
    ms: float = 0.0
    dates: bool = False
    #: Why the lines are dated or not (``dates="auto"`` names the words that ask about time).
    dates_reason: str = ""
    #: Why the most recent turns were kept first, or left to compete (``keep_recent="auto"``).
    recent_reason: str = ""
    #: Whose turns the query asks about, if it names one side (``role_cue``), and why.
    role_reason: str = ""
    #: Whether a long query was also matched sentence by sentence (``query_sentences``), and why.
    parts_reason: str = ""
    build_trace: Callable[[], tuple[TurnTrace, ...]] = field(default=tuple, repr=False, compare=False)

    @functools.cached_property
    def trace(self) -> tuple[TurnTrace, ...]:
        """Every candidate turn with its scores and the reason it is in or out, the kept ones first.

        Built on first access: a reply that never reads it does not pay for a record per candidate
        (~3 ms for the 400 candidates of a 100k-turn session)."""
        return self.build_trace()

    @property
    def text(self) -> str:
        """What the budget counts: one ``role: text`` line per turn; with ``dates``, a line opens with
        ``[YYYY-MM-DD]`` when its day differs from the line before (``token_count`` is this text's tokens)."""
        return render(self.turns, dates=self.dates)

    def content_of(self, turn: Turn) -> str:
        """A chosen turn's text with its date when ``dates`` (:meth:`contents` dates each day once)."""
        return content(turn, dates=self.dates)

    def contents(self) -> list[str]:
        """Each chosen turn's text as a chat message carries it, in order: with ``dates``, dated only
        where the day changes from the message before, as :attr:`text` dates its lines, so what an
        adapter sends never costs more than ``token_count`` (a date on every message would)."""
        flags = day_changes(self.turns) if self.dates else [False] * len(self.turns)
        return [content(t, dates=d) for t, d in zip(self.turns, flags, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the trace built)."""
        return as_dict(self, skip=("build_trace", "ms"), ms=round(self.ms, 3), trace=self.trace)


def check_roles(**named: Sequence[str]) -> None:
    """Each named argument is a sequence of roles among :data:`ROLES` (a bare string is refused: it would read as its letters)."""
    for name, roles in named.items():
        if isinstance(roles, str) or any(r not in ROLES for r in roles):
            raise InputError(f"{name}={roles!r} is not allowed: expected a sequence of roles among {', '.join(ROLES)}")


def check_turn_ids(turn_ids: Any) -> list[str]:
    """``turn_ids`` as a list of ids; InputError naming it for one string (its characters would be
    taken as ids) or anything that is not a collection of strings."""
    if isinstance(turn_ids, str | bytes) or not isinstance(turn_ids, Iterable):
        raise InputError(f"turn_ids={turn_ids!r} is not allowed: give a list of turn ids (one id: [turn_id], or delete(turn_id))")
    ids = list(turn_ids)
    bad = [i for i in ids if not isinstance(i, str)]
    if bad:
        raise InputError(f"turn_ids holds {bad[0]!r} ({type(bad[0]).__name__}); every turn id is a str")
    return ids
