"""MemoryCode (Cohere-Labs-Community/MemoryCode, Apache-2.0; Rakotonirina et al., "From Tools to
Teammates", arXiv 2502.13791) as a chat-memory set: what the user told the memory, asked for later in
other words (issue 76 #5, a fresh set read once after the choice).

Each dialogue is a mentor coaching a mentee over 1-100 sessions; in some sessions the mentor gives a
coding convention ("always start variable names with 'x_'"), later updated ("... with 'n_'"), among
filler talk. After the last session, the authors ask for code whose every convention in force must
be followed (``history_eval_query``: "function that merges two sorted lists", one per convention).
Here the mentor is the user and the mentee the assistant, and each request is a question whose
evidence is the mentor's turn that states the convention's latest version.

Rules, fixed before any test conversation was read:

* Dialogues of 10 sessions or more (151-360; 30 per length of 10, 15, 20, 30, 40, 50 and 100).
* A session's ``text`` splits into turns at a blank line followed by "<mentor>:" or "<mentee>:";
  the name is dropped, the role kept. Session ``i`` is dated 2024-01-01 + ``i`` days, 09:00, its
  turns a minute apart. Turn ids ``"<dialogue>/<session>/<k>"``.
* The question is the authors' request in the user's words: "Write a <eval_query>. Follow all the
  latest coding guidelines I gave you, including any updates." Its convention is the one whose
  ``eval_query`` it is (``topics.json``); a request that names two is dropped.
* Its evidence: of the last session that adds or updates that convention, the mentor's turn that
  holds every quoted token of the version given there ("'x_'"). A convention with no quoted token
  ("always use CamelCase for class names"), or with no such turn or more than one, is dropped
  (``dropped`` counts why).
* Split by dialogue number (:data:`benchmarks.harness.splits.MEMORYCODE_DIALOGUES`, the registry's
  sha256 halves). Question ids ``"memorycode:<n>:<eval_query>"``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.harness.conversations import Conversation, MemoryQuestion
from benchmarks.harness.data import EXTERNAL, external
from benchmarks.harness.splits import MEMORYCODE_DIALOGUES, item_id, split_of
from meve.memory.records import Turn

__all__ = ["REQUEST", "memorycode"]

REQUEST = "Write a {}. Follow all the latest coding guidelines I gave you, including any updates."
_START = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)
_QUOTED = re.compile(r"'([^']+)'")


def memorycode(
    root: Path = EXTERNAL / "memorycode", dropped: Counter[str] | None = None, dialogues: tuple[str, ...] = MEMORYCODE_DIALOGUES
) -> dict[str, list[Conversation]]:
    """MemoryCode's dialogues of 10 sessions or more by split, one question per request (module docstring)."""
    topics = json.loads(external(root / "topics.json").read_text())["instructions"]
    by_query: dict[str, list[dict[str, Any]]] = {}
    for ins in topics:
        by_query.setdefault(ins["eval_query"], []).append(ins)
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    counts = dropped if dropped is not None else Counter()
    for n in dialogues:
        raw = json.loads(external(root / "dataset" / f"dialogue_{n}.json").read_text())
        turns, sessions = _turns(n, raw)
        questions = []
        for query in raw["sessions"][-1]["history_eval_query"] or []:
            found = by_query.get(query, [])
            if len(found) != 1:
                counts["memorycode: the request names " + ("no convention" if not found else "two conventions")] += 1
                continue
            why, ev = _evidence(raw, found[0], sessions)
            if ev is None:
                counts[f"memorycode: {why}"] += 1
                continue
            questions.append(MemoryQuestion(item_id("memorycode", n, query), REQUEST.format(query), (ev,), "preference"))
        out[split_of(item_id("memorycode", n, "0"))].append(Conversation(f"memorycode-{n}", turns, questions))
    return out


def _turns(n: str, raw: dict[str, Any]) -> tuple[list[Turn], list[list[Turn]]]:
    """Every turn, and each session's turns."""
    mentor, mentee = raw["context"]["mentor"], raw["context"]["mentee"]
    split = re.compile(rf"\n\s*\n(?=(?:{re.escape(mentor)}|{re.escape(mentee)}):)")
    turns: list[Turn] = []
    sessions: list[list[Turn]] = []
    for i, session in enumerate(raw["sessions"]):
        day = _START + timedelta(days=i)
        mine: list[Turn] = []
        for k, piece in enumerate(p.strip() for p in split.split(session["text"].strip())):
            name, _, text = piece.partition(":")
            role = "user" if name.strip() == mentor else "assistant" if name.strip() == mentee else None
            if role is None or not text.strip():  # a piece with no speaker joins nothing: dropped
                continue
            mine.append(Turn(f"{n}/{i}/{k}", role, text.strip(), day + timedelta(minutes=k), len(turns) + len(mine)))
        turns.extend(mine)
        sessions.append(mine)
    return turns, sessions


def _evidence(raw: dict[str, Any], ins: dict[str, Any], sessions: list[list[Turn]]) -> tuple[str, str | None]:
    """The id of the mentor's turn stating the convention's latest version, or why there is none."""
    last = None
    for i, given in enumerate(raw["instructions"]):
        for pair in given if given != [-1] else []:
            if pair[0] == ins["id"]:
                last = (i, pair[1])
    if last is None:
        return "the convention is never given", None
    session, version = last
    tokens = _QUOTED.findall(ins["text"][version])
    if not tokens:
        return "the convention quotes no token to find its turn by", None
    hits = [t.id for t in sessions[session] if t.role == "user" and all(tok in t.text for tok in tokens)]
    if len(hits) != 1:
        return f"{'no' if not hits else 'more than one'} mentor turn of its session holds its quoted token", None
    return "", hits[0]
