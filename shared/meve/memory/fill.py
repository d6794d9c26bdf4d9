"""The budget fill over a learned ranking (issue 76), as a pure function: candidates in the
ranker's order (:mod:`meve.memory.ranker`), none kept first by rule (the latest exchange is a
candidate with features of its own), each line costing what it renders to, its date included.

Two things differ from :func:`meve.memory.select.select_turns`' relevance fill, both from issue 76:
no one turn's text takes more than ``share`` of ``l_max`` while others score (a pasted 6,900-token
tool result ranked first comes in as its best part, not whole and not never), and the first turn
worth recalling that does not fit the room left is cut to its best part
(:func:`meve.memory.render.truncate_turn`) instead of being passed over for lower-ranked turns that
fit, as the latest exchange already is. ``cut=False`` is the whole-turn fill (a turn that does not
fit is passed over), for comparison.

Not wired into :class:`meve.MomentaryMemory`: ``benchmarks/memory_ranker.py`` measures it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from meve.core.budget import Ledger, shrink_to_fit
from meve.core.tokens import TokenCounter
from meve.memory.decide import TURN_SHARE
from meve.memory.log import Snapshot
from meve.memory.records import Turn
from meve.memory.render import SEPARATOR, date_prefix, render, render_turn, truncate_turn
from meve.memory.select import MIN_CUT, Selection

__all__ = ["MIN_CUT", "TURN_SHARE", "fill_by_score", "with_partners"]


class _Lines:
    """What each line costs: its rendered tokens, and its date once per day (the rendering dates a
    line only where the day changes, and the lines are in time order)."""

    def __init__(self, snap: Snapshot, counter: TokenCounter, dates: bool) -> None:
        self.snap, self.counter, self.dates = snap, counter, dates
        self.days: set[int] = set()
        self._heads: dict[str, int] = {}  # a line's head depends on its role alone

    def day(self, i: int) -> int:
        return int(self.snap.keys[i][0] // 86_400)

    def date(self, i: int) -> int:
        """The tokens of the date this line would add (0 when undated, or its day is dated already)."""
        if not self.dates or self.day(i) in self.days:
            return 0
        return self.counter.count(date_prefix(self.snap.turns[i]) + " ")

    def head(self, i: int) -> int:
        """The tokens of the line without its text (``role: ``)."""
        role = self.snap.turns[i].role
        if role not in self._heads:
            self._heads[role] = self.counter.count(render_turn(replace(self.snap.turns[i], text="")))
        return self._heads[role]


def with_partners(order: Sequence[int], scores: Sequence[float], partner: Callable[[int], int | None], weight: float) -> list[int]:
    """``order`` (positions, best first, ``scores`` theirs) with each turn's partner turn competing
    at its worth lifted toward its anchor's, as the rule-based fill lifts it
    (:func:`meve.memory.select.select_turns`, ``partner_weight``): ``weight`` x the anchor's score +
    (1 - ``weight``) x its own, or its own alone if higher. A reply the query does not match still
    comes in after a strong anchor, taking the budget only from turns worth less. Ties keep
    ``order``, an anchor before its partner; a partner outside ``order`` has its own score 0."""
    own = dict(zip(order, (float(s) for s in scores), strict=True))
    worth: dict[int, tuple[float, int, bool]] = {i: (own[i], k, False) for k, i in enumerate(order)}
    for k, i in enumerate(order):
        j = partner(i)
        if j is None:
            continue
        lifted = weight * own[i] + (1.0 - weight) * own.get(j, 0.0)
        if lifted > worth.get(j, (-1.0, 0, False))[0]:
            worth[j] = (lifted, k, True)
    return sorted(worth, key=lambda i: (-worth[i][0], worth[i][1], worth[i][2]))


def fill_by_score(
    snap: Snapshot,
    counter: TokenCounter,
    order: Sequence[int],
    *,
    l_max: int,
    dates: bool,
    query: str,
    cut: bool = True,
    share: float = TURN_SHARE,
) -> Selection:
    """Fill ``l_max`` with the positions of ``order`` (best first), then sort by time. A turn
    whose text is over ``share`` x ``l_max`` tokens is cut to its best part of that size (the run
    of words holding the most of ``query``'s terms; its end when it holds none); the first turn
    that does not fit the room left is cut to it; with ``cut=False`` neither (a turn that does not
    fit whole is passed over). A cut keeping under :data:`MIN_CUT` tokens of text is not made.
    ``dates``: whether lines carry their day (decided for the query), counted in the budget."""
    if not isinstance(dates, bool):
        raise ValueError(f"fill_by_score needs dates decided for the query (True or False), got {dates!r}")
    lines, ledger, sel = _Lines(snap, counter, dates), Ledger(l_max, counter.count(SEPARATOR)), Selection()
    cap, cut_for_room = max(1, int(share * l_max)), False
    for rank, i in enumerate(order, start=1):
        turn, extra = snap.turns[i], lines.date(i)
        head = lines.head(i) if cut else 0
        over = cut and snap.tokens[i] - head > cap
        taken = None if over else ledger.take(snap.tokens[i] + extra)
        if taken is not None:
            _keep(sel, lines, i, turn, f"learned rank {rank}", taken)
            continue
        room = ledger.room - head - extra
        budget = min(cap, room) if over else room
        if not cut or (cut_for_room and budget == room) or budget < MIN_CUT:
            sel.reasons[i] = (False, f"learned rank {rank}: needs {ledger.cost(snap.tokens[i] + extra)} tokens, {ledger.left} left of l_max {l_max}", 0)
            continue
        got = truncate_turn(counter, turn.text, budget, query)
        taken = None if got is None else ledger.take(got[1] + head + extra)
        if got is None or taken is None:
            sel.reasons[i] = (False, f"learned rank {rank}: no cut of it fits {ledger.left} tokens left of l_max {l_max}", 0)
            continue
        cut_for_room = cut_for_room or budget == room
        why = f"its share of l_max ({cap} tokens of text)" if budget == cap else f"the {room} tokens of text left of l_max {l_max}"
        short = replace(turn, text=got[0], metadata={**turn.metadata, "meve_truncated": True})
        _keep(sel, lines, i, short, f"learned rank {rank}, cut to its best part ({got[1]} of {snap.tokens[i] - head} tokens of text) to fit {why}", taken)

    def rendered(idx: list[int]) -> str:
        return render(tuple(sel.picked[i] for i in sorted(idx, key=lambda i: snap.keys[i])), dates=dates)

    kept, over_limit, _, sel.tokens = shrink_to_fit(list(sel.picked), rendered, counter, l_max)
    for i, n in over_limit:
        del sel.picked[i]
        sel.reasons[i] = (False, f"rendered context was {n} tokens > l_max {l_max}", 0)
    sel.turns = tuple(sel.picked[i] for i in sorted(kept, key=lambda i: snap.keys[i]))
    return sel


def _keep(sel: Selection, lines: _Lines, i: int, turn: Turn, reason: str, tokens: int) -> None:
    sel.picked[i] = turn
    sel.reasons[i] = (True, reason, tokens)
    lines.days.add(lines.day(i))
