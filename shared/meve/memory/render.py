"""The one rendering of chat turns: the text ``l_max`` is counted on, and the chat messages
both framework adapters build from a rebuilt context."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import timezone
from typing import TYPE_CHECKING

from meve.core.tokens import TokenCounter
from meve.retrieval.terms import stemmed_tokenize

if TYPE_CHECKING:
    from meve.memory.records import Turn

__all__ = ["SEPARATOR", "TRUNCATION_MARKER", "content", "date_prefix", "day_changes", "render", "render_turn", "truncate_turn"]

SEPARATOR = "\n"
# Short, so a cut turn keeps its words: how much was kept is in the trace and ``meve_truncated``.
TRUNCATION_MARKER = " […]"


def date_prefix(turn: Turn) -> str:
    """The date a line carries with ``dates``: the turn's UTC calendar day."""
    return f"[{turn.timestamp.astimezone(timezone.utc):%Y-%m-%d}]"


def content(turn: Turn, *, dates: bool = False) -> str:
    """A turn's text as a chat message carries it: with ``dates``, prefixed by its date."""
    return f"{date_prefix(turn)} {turn.text}" if dates else turn.text


def render_turn(turn: Turn, *, dates: bool = False) -> str:
    """One line: ``role: text`` (``[YYYY-MM-DD] role: text`` with ``dates``)."""
    return f"{date_prefix(turn)} {turn.role}: {turn.text}" if dates else f"{turn.role}: {turn.text}"


def render(turns: Iterable[Turn], *, dates: bool = False) -> str:
    """The one rendering of a rebuilt context; l_max is counted on exactly this text. Adapters that
    pass turns as chat messages send only the texts, which is never more.

    With ``dates``, a line carries its date only when the day changes from the line before (the
    lines are in time order, so each undated line belongs to the last date shown): a date costs
    ~8 tokens, and a day's session would otherwise pay it on every line."""
    turns = list(turns)
    flags = day_changes(turns) if dates else [False] * len(turns)
    return SEPARATOR.join(render_turn(t, dates=d) for t, d in zip(turns, flags, strict=True))


def day_changes(turns: Sequence[Turn]) -> list[bool]:
    """Per turn (in time order), whether its day differs from the turn before: where a dated
    rendering, and the chat messages the adapters send (:meth:`MemoryContext.contents`), put a date."""
    days = [date_prefix(t) for t in turns]
    return [k == 0 or days[k] != days[k - 1] for k in range(len(days))]


def truncate_turn(counter: TokenCounter, text: str, budget: int, query: str = "") -> tuple[str, int] | None:
    """``text`` cut to fit ``budget`` tokens with a marker saying so, and its
    tokens; None when not even the marker fits. The part kept is the run of words that holds the
    most of ``query``'s terms (the first such run); when the query shares no term with the turn
    ("Continue", "Go on"), its end, where a continuation picks up. A cut start is marked "… "."""
    room = budget - counter.count(TRUNCATION_MARKER) - 2
    if room < 1:
        return None
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    head = len(counter.truncate(text, room))
    size = max(1, sum(1 for _, end in words if end <= head))
    start, tail = _best_start(text, words, size, query)
    part = text[words[start][0] : words[min(start + size, len(words)) - 1][1]] if words else text
    lead = "… " if start > 0 else ""
    out, used = _marked(counter, lead, part)
    while used > budget and part:
        step = max(1, len(part) // 20)  # a tail gives up its first words, any other part its last
        part = part[step:] if tail else part[: max(0, len(part) - step)]
        out, used = _marked(counter, lead, part)
    return (out, used) if used <= budget else None


def _marked(counter: TokenCounter, lead: str, part: str) -> tuple[str, int]:
    out = lead + part + TRUNCATION_MARKER
    return out, counter.count(out)


def _best_start(text: str, words: list[tuple[int, int]], size: int, query: str) -> tuple[int, bool]:
    """The first word of the ``size``-word run holding the most distinct query terms (stemmed,
    stopwords out; the first such run), or of the last run when no word holds one (then True)."""
    last = max(0, len(words) - size)
    wanted = set(stemmed_tokenize(query))
    hits = [wanted.intersection(stemmed_tokenize(text[a:b])) for a, b in words] if wanted else []
    if not any(hits):
        return last, True
    best, best_n = 0, -1
    for s in [*range(0, last, max(1, size // 4)), last]:  # the last run too, so the end is never out of reach
        n = len(set().union(*hits[s : s + size]))
        if n > best_n:
            best, best_n = s, n
            if n == len(wanted):  # no later run can hold more
                break
    return best, False
