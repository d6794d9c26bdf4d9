"""Per-query decisions of a rebuild, as pure functions: whether the lines are dated, whether the
most recent turns are kept before anything else, whose turns the query asks about, and whether a
long query is also matched sentence by sentence. Each returns
what the context's trace says about it, so every decision is explained where it is read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from meve.core.config import MemoryConfig, time_words

__all__ = [
    "PART_SHARE",
    "ROLE_DISCOUNT",
    "TURN_SHARE",
    "Decisions",
    "Nearby",
    "decide",
    "decide_dates",
    "decide_parts",
    "decide_recent",
    "decide_recent_cap",
    "decide_role",
    "follow_up_words",
    "is_about",
    "leans_on_latest",
    "short_query",
]

# A query that leans on the turn before it: a pronoun or demonstrative standing for something said
# there, or an opening that continues it. Longer queries carry their own subject (a standalone
# question that happens to say "it" pays for the recent turn and nothing else).
_FOLLOW_UP = re.compile(
    r"^\s*(?:and|but|so|also|why|how come|what about|how about|ok(?:ay)?|then)\b|\b(?:it|its|that|this|these|those|they|them|their|he|him|his|she|her|there)\b",
    re.IGNORECASE,
)
_FOLLOW_UP_WORDS = 6
#: The most of ``l_max`` one kept turn's text may take while earlier turns are about the query
#: (issue 76: "no single turn may take the budget while others score"): a product rule, not a
#: tuned value.
TURN_SHARE = 0.5


def short_query(query: str) -> tuple[bool, int]:
    """Whether ``query`` is short (at most 6 words: it leans on what was just said, "Continue",
    "Translate to French"), and its word count. The one rule behind ``keep_recent="short"``,
    the anchor's cap and :func:`follow_up_words`."""
    n = len(query.split())
    return n <= _FOLLOW_UP_WORDS, n


def follow_up_words(query: str) -> str | None:
    """The words that make ``query`` read as a follow-up to the turn before it (what the trace
    cites), or None: a query of at most 6 words that opens by continuing ("and ...", "why ...",
    "what about ...") or refers back with a pronoun or demonstrative ("it", "that", "she", ...)."""
    if not short_query(query)[0]:
        return None
    found = _FOLLOW_UP.search(query)
    return found.group(0).strip() if found else None


@dataclass(frozen=True)
class Nearby:
    """What a rebuild reads of the turns before the latest exchange, for the query: whether one holds
    a word of it (its BM25 terms), and the best cosine of one with it (the first embedder's; None
    when none was searched)."""

    said: bool = True
    nearest: float | None = None


def is_about(nearby: Nearby, threshold: float | None) -> tuple[bool, str]:
    """Whether a turn before the latest exchange is about the query, and why not: its best cosine
    with one reaches ``threshold`` when the vectors were searched (a word's other form, "allergy"
    for "allergic", or another word, "dog" for "beagle puppy", is still near), else one holds a
    word of it; ``threshold`` None: the words alone."""
    if threshold is not None and nearby.nearest is not None:
        if nearby.nearest >= threshold:
            return True, ""
        return False, f"no turn before the latest exchange is near the query (best cosine {nearby.nearest:.2f}, under follow_up_cosine {threshold:g})"
    if nearby.said:
        return True, ""
    return False, "no turn before the latest exchange holds a word of the query"


def leans_on_latest(query: str, nearby: Nearby, threshold: float | None) -> tuple[bool, str]:
    """Whether ``query`` leans on the latest exchange, and why: it is short (at most 6 words:
    "Continue", "Translate to French"), or no turn before it is about it (:func:`is_about`: "Can
    you turn that into a checklist?", "Please rewrite the whole thing in a friendlier tone").
    Otherwise it carries its own subject."""
    short, n = short_query(query)
    if short:
        return True, f"the query is short ({n} words, at most {_FOLLOW_UP_WORDS}): it leans on what was just said"
    about, why = is_about(nearby, threshold)
    if not about:
        return True, f"{why} ({n} words): it is about what was just said"
    return False, f"the query has {n} words (over {_FOLLOW_UP_WORDS}) and carries its own subject"


def decide_recent(keep: bool | str, query: str, leans: tuple[bool, str]) -> tuple[bool, str]:
    """Whether the most recent turns are kept before anything else, and why: ``"short"`` keeps them
    for a query that leans on them (``leans``, from :func:`leans_on_latest`); ``"auto"`` for a
    follow-up by its wording (:func:`follow_up_words`); otherwise they compete by relevance like
    any turn."""
    if keep is True or keep is False:
        return keep, f"keep_recent={keep}"
    if keep == "short":
        return leans if leans[0] else (False, leans[1] + ": the most recent turns compete by relevance")
    words = follow_up_words(query)
    if words:
        return True, f"the query reads as a follow-up ({words!r})"
    return False, "the query stands alone: the most recent turns compete by relevance"


def decide_recent_cap(share: float, l_max: int, query: str, leans: bool, about: bool = False) -> tuple[int | None, str]:
    """The most tokens of its text each kept recent turn may keep, and why: for a query that
    leans on them (:func:`leans_on_latest`), all the room left when no earlier turn is about the
    query ("Continue", "Translate to French"), else :data:`TURN_SHARE` x ``l_max`` (``about``: a
    short question whose words, or whose vector's neighbour, an earlier turn holds, "What am I
    allergic to?", keeps the fact beside a long reply); for a query of its own subject,
    ``share`` x ``l_max``; ``share`` 1.0: never capped. A capped turn is cut to its part the query
    matches, or its end."""
    if share >= 1.0 or (leans and not about):
        return None, ""
    part = TURN_SHARE if leans else share
    cap = max(1, int(part * l_max))
    if leans:
        return cap, f"; an earlier turn is about the query too: each keeps at most {cap} tokens of its text ({part:g} of l_max {l_max})"
    return cap, f"; the query has {short_query(query)[1]} words and its own subject: each keeps at most {cap} tokens of its text ({share:g} of l_max {l_max})"


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


# A sentence ends at . ! or ? before whitespace, or at a line break; fragments of fewer words
# ("Hi!", "Okay.") say nothing a turn could match.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_PART_MIN_WORDS = 3
_MIN_PARTS = 3
#: How much of a turn's vector score comes from its best-matching sentence of a long query (the
#: rest from the whole query); the one value tried (BENCHMARKS.md, "Chat memory", seventh run).
PART_SHARE = 0.5


def decide_parts(enabled: bool, query: str) -> tuple[tuple[str, ...], str]:
    """The sentences a long query is also matched by, and why: a query of at least 3 sentences
    of at least 3 words each (a chat message that says several things: "I tried the recipe. The
    sauce split again. What did you say about the butter?") embeds as a blur of all of them, so
    each turn's vector score becomes half its cosine with the whole query and half its best
    cosine with one sentence (:data:`PART_SHARE`). Shorter queries, or ``enabled=False``: ().

    A sentence ends at ". ", "! ", "? " or a line break; a quote or bracket after the stop keeps
    the next sentence joined to it, an abbreviation ("Dr. Smith") splits, and text without spaces
    between words (Chinese, Japanese) counts no words, so such a query is matched whole."""
    if not enabled:
        return (), "query_sentences=False"
    parts = tuple(p.strip() for p in _SENTENCE_END.split(query.strip()) if len(p.split()) >= _PART_MIN_WORDS)
    if len(parts) < _MIN_PARTS:
        return (), f"the query has {len(parts)} sentence(s) of {_PART_MIN_WORDS}+ words: matched whole"
    share = f"{1 - PART_SHARE:g} x its cosine with the whole query + {PART_SHARE:g} x its best with one sentence"
    return parts, f"the query has {len(parts)} sentences: a turn's vector score is {share}"


@dataclass(frozen=True)
class Decisions:
    """What a rebuild decided for one query, each decision with the reason its context reports."""

    dates: bool
    dates_reason: str
    keep_recent: bool
    recent_reason: str
    recent_cap: int | None
    role: str | None
    role_reason: str
    parts: tuple[str, ...]
    parts_reason: str

    def reasons(self) -> dict[str, str]:
        """Each decision's reason, keyed as :class:`meve.memory.records.MemoryContext` reports it."""
        return {"dates_reason": self.dates_reason, "recent_reason": self.recent_reason, "role_reason": self.role_reason, "parts_reason": self.parts_reason}


def decide(cfg: MemoryConfig, query: str, nearby: Nearby | None = None) -> Decisions:
    """Every per-query decision of a rebuild with ``cfg`` (dates, the most recent turns, the role
    cue, the query's sentences), so the memory and its replay decide alike. ``nearby``: what the
    rebuild read of the turns before the latest exchange (:class:`Nearby`; None: nothing, as for
    a query with a subject of its own)."""
    near = nearby or Nearby()
    leans = leans_on_latest(query, near, cfg.follow_up_cosine)
    (dates, dates_reason), (keep, recent_reason) = decide_dates(cfg.dates, query), decide_recent(cfg.keep_recent, query, leans)
    (role, role_reason), (parts, parts_reason) = decide_role(cfg.role_cue, query), decide_parts(cfg.query_sentences, query)
    about = is_about(near, cfg.follow_up_cosine)[0]
    cap, cap_reason = decide_recent_cap(cfg.recent_share, cfg.l_max, query, leans[0], about) if keep else (None, "")
    return Decisions(
        dates=dates,
        dates_reason=dates_reason,
        keep_recent=keep,
        recent_reason=recent_reason + cap_reason,
        recent_cap=cap,
        role=role,
        role_reason=role_reason,
        parts=parts,
        parts_reason=parts_reason,
    )
