"""Per-query decisions of a rebuild, as pure functions: whether the lines are dated, and whether the
most recent turns are kept before anything else. Each returns what the context's trace says about
it, so every decision is explained where it is read."""

from __future__ import annotations

import re

from meve.core.config import time_words

__all__ = ["decide_dates", "decide_recent", "follow_up_words"]

# A query that leans on the turn before it: a pronoun or demonstrative standing for something said
# there, or an opening that continues it. Longer queries carry their own subject (a standalone
# question that happens to say "it" pays for the recent turn and nothing else).
_FOLLOW_UP = re.compile(
    r"^\s*(?:and|but|so|also|why|how come|what about|how about|ok(?:ay)?|then)\b|\b(?:it|its|that|this|these|those|they|them|their|he|him|his|she|her|there)\b",
    re.IGNORECASE,
)
_FOLLOW_UP_WORDS = 6


def follow_up_words(query: str) -> str | None:
    """The words that make ``query`` read as a follow-up to the turn before it (what the trace
    cites), or None: a query of at most 6 words that opens by continuing ("and ...", "why ...",
    "what about ...") or refers back with a pronoun or demonstrative ("it", "that", "she", ...)."""
    if len(query.split()) > _FOLLOW_UP_WORDS:
        return None
    found = _FOLLOW_UP.search(query)
    return found.group(0).strip() if found else None


def decide_recent(keep: bool | str, query: str) -> tuple[bool, str]:
    """Whether the most recent turns are kept before anything else, and why: ``"auto"`` keeps them
    for a follow-up (:func:`follow_up_words`); otherwise they compete by relevance like any turn."""
    if keep is True or keep is False:
        return keep, f"keep_recent={keep}"
    words = follow_up_words(query)
    if words:
        return True, f"the query reads as a follow-up ({words!r})"
    return False, "the query stands alone: the most recent turns compete by relevance"


def decide_dates(dates: bool | str, query: str) -> tuple[bool, str]:
    """Whether this query's lines are dated, and why: ``"auto"`` dates them only for a query that
    asks about time (:func:`meve.core.config.asks_about_time`)."""
    if dates is True or dates is False:
        return dates, f"dates={dates}"
    words = time_words(query)
    return (True, f"the query asks about time ({words!r})") if words else (False, "the query does not ask about time")
