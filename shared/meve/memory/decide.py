"""Per-query decisions of a rebuild, as pure functions: whether the lines are dated, whether the
most recent turns are kept before anything else, and whose turns the query asks about. Each returns
what the context's trace says about it, so every decision is explained where it is read."""

from __future__ import annotations

import re

from meve.core.config import time_words

__all__ = ["ROLE_DISCOUNT", "decide_dates", "decide_recent", "decide_role", "follow_up_words"]

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


# A query's grammatical person names whose turns it asks about. Contractions are matched whole.
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)
_SECOND = re.compile(r"\b(?:you|you're|you've|you'd|you'll|your|yours|yourself)\b", re.IGNORECASE)
#: What the fused score of a turn by another role than the one a query asks about is multiplied
#: by (the one value tried: BENCHMARKS.md, "Chat memory", sixth run).
ROLE_DISCOUNT = 0.5


def decide_role(cue: bool, query: str) -> tuple[str | None, str]:
    """Whose turns ``query`` asks about, and why: "user" for a query in the first person alone
    ("how often do I ...", "my sister"), "assistant" for one in the second person alone ("what
    did you recommend"), None for both ("what did you tell me"), neither, or ``cue=False``."""
    if not cue:
        return None, "role_cue=False"
    first, second = _FIRST.search(query), _SECOND.search(query)
    if first and not second:
        return "user", f"the query asks about the user's own turns (first person: {first.group(0)!r}); other roles count {ROLE_DISCOUNT}"
    if second and not first:
        return "assistant", f"the query asks about the assistant's turns (second person: {second.group(0)!r}); other roles count {ROLE_DISCOUNT}"
    return None, "the query names no one side (" + ("both persons" if first else "neither person") + "): every role counts alike"
