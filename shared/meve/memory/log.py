"""What one handle knows of its session, in memory: the turns in the order it learned them, their
time order, rendered token counts and BM25 statistics. Pure bookkeeping: no I/O, no locks (the
memory holds its lock around every call)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from meve.core.tokens import TokenCounter, count_many
from meve.memory.records import Turn
from meve.memory.render import render_turn
from meve.retrieval.bm25 import IncrementalBM25
from meve.retrieval.terms import stemmed_tokenize

__all__ = ["Snapshot", "TurnLog"]


@dataclass(frozen=True)
class Snapshot:
    """The first ``n`` turns as one reader sees them. Positions index ``turns``, ``tokens`` (each
    rendered ``role: text`` line) and ``keys`` (time, order key); ``chrono`` lists positions in time
    order. The lists only grow (a reload swaps in new ones), so the first ``n`` entries are stable."""

    turns: Sequence[Turn]
    tokens: Sequence[int]
    keys: Sequence[tuple[float, str]]
    chrono: Sequence[int]
    n: int
    smallest: int

    def partner(self, i: int, skip: Sequence[str]) -> int | None:
        """The turn next to position ``i`` in time by the other role (not in ``skip``): the reply
        after it, else the turn it answered. Reads the live ``chrono``: call it under the memory's lock."""
        at = bisect.bisect_left(self.chrono, self.keys[i], key=self.keys.__getitem__)
        for k in (at + 1, at - 1):
            role = self.turns[self.chrono[k]].role if 0 <= k < len(self.chrono) else None
            if role is not None and role != self.turns[i].role and role not in skip:
                return self.chrono[k]
        return None


class TurnLog:
    """Positions index everything held (turns, BM25 documents, token counts) in the order this
    handle learned of the turns; ``chrono`` lists the positions in time order. Turns that other
    processes write arrive later but may be older, so the two orders differ."""

    def __init__(self, counter: TokenCounter, *, stemming: bool) -> None:
        self.counter = counter
        self.turns: list[Turn] = []
        self.index: dict[str, int] = {}
        self.tokens: list[int] = []
        self.keys: list[tuple[float, str]] = []
        self.chrono: list[int] = []  # positions sorted by self.keys
        self.bm25 = IncrementalBM25(tokenize=stemmed_tokenize if stemming else None)
        self.latest: datetime | None = None
        self.smallest = 0  # the fewest tokens any stored turn renders to: below it, nothing more fits

    def __len__(self) -> int:
        return len(self.turns)

    def append(self, rows: Sequence[tuple[Turn, str]]) -> None:
        """Add turns (with their order keys), skipping none: the caller filters known ids."""
        if not rows:
            return
        rendered = count_many(self.counter, [render_turn(t) for t, _ in rows])
        self.smallest = min(rendered) if not self.turns else min(self.smallest, *rendered)
        for (turn, okey), used in zip(rows, rendered, strict=True):
            pos = len(self.turns)
            key = (turn.timestamp.timestamp(), okey)
            self.turns.append(turn)
            self.index[turn.id] = pos
            self.tokens.append(used)
            self.keys.append(key)
            self.chrono.insert(bisect.bisect(self.chrono, key, key=self.keys.__getitem__), pos)
            if self.latest is None or turn.timestamp > self.latest:
                self.latest = turn.timestamp
        self.bm25.add([t.text for t, _ in rows])

    def get(self, turn_id: str) -> Turn | None:
        """The turn stored under ``turn_id``, if this handle knows it."""
        pos = self.index.get(turn_id)
        return self.turns[pos] if pos is not None else None

    def order_key(self, turn_id: str) -> str | None:
        """The order key of a known turn."""
        pos = self.index.get(turn_id)
        return self.keys[pos][1] if pos is not None else None

    def in_time_order(self) -> list[Turn]:
        """Every known turn, oldest first."""
        return [self.turns[i] for i in self.chrono]

    def snapshot(self) -> Snapshot:
        """The current state as a :class:`Snapshot` (no copies: read ``chrono`` under the memory's lock)."""
        return Snapshot(self.turns, self.tokens, self.keys, self.chrono, len(self.turns), self.smallest)
