"""Follow-up probes: what an agent loop asks every few turns, which no memory set asks.

Every memory set asks its questions after the last turn and never about it, so on them the
recency anchor is only cost. A probe cuts one of a set's conversations right after one of its
replies (a user turn, then the other role's answer) and asks a request that leans on that reply
("Continue", "Put that into a short list for me"); the evidence is the reply. Probes come from
the conversation's own split (dev probes from dev conversations), and the requests are written
here in two disjoint lists, one per split, so the test probes' wording was never used to choose.
Written for issue 64 #1 (2026-11-28), before any probe was scored.
"""

from __future__ import annotations

import hashlib
import math

from benchmarks.harness.conversations import Conversation, MemoryQuestion

__all__ = ["CATEGORY", "PHRASINGS", "probes"]

CATEGORY = "follow-up"
#: Requests by split: short and long, plain and polite, some naming words a reply may hold.
PHRASINGS: dict[str, tuple[str, ...]] = {
    "dev": (
        "Continue",
        "Go on",
        "Say more about that",
        "Can you summarize what you just said?",
        "Could you explain that last part again, more simply?",
        "Put that into a short list for me",
        "What do you mean by that exactly?",
        "Give me an example of what you just described",
        "Rewrite your last message so it sounds less formal",
        "Translate your last reply into Spanish",
        "Okay, and what would be the next step after that?",
        "Can you shorten that to two sentences?",
    ),
    "test": (
        "Keep going",
        "Tell me more",
        "Summarize that in one line",
        "Could you put all of that in a table?",
        "Please rephrase your answer for a ten-year-old",
        "Explain the first point in more detail",
        "Which of those would you pick, and why?",
        "Turn what you said into an email I can send",
        "Why do you say that?",
        "Make your last answer more concise, please",
        "Can you give the same advice in French?",
        "What is the most important thing in what you just wrote?",
    ),
}
MIN_HISTORY = 10  # turns before the probed exchange: a probe needs something to recall besides it
PER_SET = 30  # probes per set and split at most (spread over its conversations)


def _replies(conv: Conversation) -> list[int]:
    """Positions of replies: a turn answering a user turn (the one before it, by the user), after MIN_HISTORY turns."""
    t = conv.turns
    return [i for i in range(MIN_HISTORY + 1, len(t)) if t[i].role != t[i - 1].role and t[i - 1].role == "user"]


def probes(convs: list[Conversation], split: str) -> list[Conversation]:
    """Up to :data:`PER_SET` probes over ``convs`` (one split), each a conversation cut after a reply,
    with one question of category :data:`CATEGORY` whose evidence is that reply. Replies are taken at
    even quantiles of each conversation, and the request by a hash of the probe's name (stable)."""
    asks = PHRASINGS[split]
    each = max(1, min(3, math.ceil(PER_SET / max(1, len(convs)))))
    out: list[Conversation] = []
    for conv in convs:
        at = _replies(conv)
        if not at or not conv.questions:
            continue
        for k in range(each):
            p = at[min(len(at) - 1, (k + 1) * len(at) // (each + 1))]
            name = f"{conv.name}@{p}"
            text = asks[int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(asks)]
            dataset, key, _ = conv.questions[0].id.split(":", 2)  # the registry reads a probe's split as its conversation's
            q = MemoryQuestion(id=f"{dataset}:{key}:follow-up@{p}", text=text, evidence=(conv.turns[p].id,), category=CATEGORY)
            out.append(Conversation(name=name, turns=conv.turns[: p + 1], questions=[q]))
            if len(out) == PER_SET:
                return out
    return out
