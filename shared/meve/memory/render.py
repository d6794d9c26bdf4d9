"""The one rendering of chat turns: the text ``l_max`` is counted on, and the chat messages
both framework adapters build from a rebuilt context."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timezone
from typing import TYPE_CHECKING

from meve.core.tokens import TokenCounter

if TYPE_CHECKING:
    from meve.memory.records import Turn

__all__ = ["SEPARATOR", "TRUNCATION_MARKER", "content", "date_prefix", "render", "render_turn", "truncate_turn"]

SEPARATOR = "\n"
TRUNCATION_MARKER = " […truncated by meve: {kept} of {total} tokens kept]"


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
    if not dates:
        return SEPARATOR.join(render_turn(t) for t in turns)
    lines: list[str] = []
    day = None
    for t in turns:
        today = date_prefix(t)
        lines.append(render_turn(t, dates=today != day))
        day = today
    return SEPARATOR.join(lines)


def truncate_turn(counter: TokenCounter, text: str, need: int, budget: int) -> tuple[str, int] | None:
    """``text`` (of ``need`` tokens) cut to fit ``budget`` tokens with a marker saying so, and its
    tokens; None when not even the marker fits."""
    marker = TRUNCATION_MARKER.format(kept=0, total=need)
    room = budget - counter.count(marker) - 2
    if room < 1:
        return None
    head = counter.truncate(text, room)
    kept = counter.count(head)
    out = head + TRUNCATION_MARKER.format(kept=kept, total=need)
    used = counter.count(out)
    while used > budget and head:
        head = head[: max(0, len(head) - max(1, len(head) // 20))]
        kept = counter.count(head)
        out = head + TRUNCATION_MARKER.format(kept=kept, total=need)
        used = counter.count(out)
    return (out, used) if used <= budget else None
