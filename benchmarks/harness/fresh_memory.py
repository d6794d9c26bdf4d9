"""Two more chat-memory sets of user-assistant conversations, with their evidence turns.

* BEAM (mohammadtavakoli78/BEAM; data CC BY-SA 4.0 per its Hugging Face card, see DATA.md): its
  20 "100K" conversations, each one user's LLM-written chat with an assistant over 3-5 dated
  sessions (writing, coding, planning, money, health...), 188-310 turns. Twenty probing
  questions per conversation, two of each of ten abilities, each naming the message ids it rests
  on (``source_chat_ids``). The length-adjusted copy of a conversation (``chat_trunecated.json``,
  10 of the 20) is used where the repository has one: it is the 100K-token version, and every
  question's evidence lies inside it.
* PrefEval (amazon-science/PrefEval, CC BY-NC 4.0): 1,000 preferences over 20 everyday topics
  (travel, shopping, diet, fitness...), each with a later request whose ordinary answer would
  violate it. A conversation is the preference as PrefEval plants it, then ``inter_turns`` of its
  shared filler chats (real LMSYS-Chat-1M user-assistant chats), then the request is the
  question. Two forms: "explicit" (one user turn states the preference; evidence that turn) and
  "choice" (implicit, choice-based: the assistant offers options and the user picks; evidence
  the assistant's options turn and the user's choice). The third form, persona-driven, has no
  turn-level evidence (the preference is implied somewhere in a 5-7 exchange chat) and is not used.

Split rule, fixed before any content was read: BEAM by conversation (its directory, "100K/<n>"),
PrefEval by topic (the file stem, e.g. "shop_home"; one topic's explicit and choice items share
their preferences, so a topic never straddles the split). The ids are sorted by the sha256 hex
of that name; the first half is dev, the rest test (the registry, :mod:`benchmarks.harness.splits`,
as for MemoryBank, REALTALK and RealMem). Question ids read ``"<set>:<split key>:<native id>"``.

Question types (``MemoryQuestion.category``): BEAM's information_extraction -> single-hop (or
single-hop-assistant when every evidence turn is the assistant's), multi_session_reasoning ->
multi-hop, knowledge_update -> knowledge-update, temporal_reasoning -> temporal,
preference_following -> preference; contradiction-resolution, event-ordering,
instruction-following and summarization keep their names; abstention questions name no evidence
and are dropped. Every PrefEval question is "preference".

Each loader counts what it drops in ``dropped`` when given a Counter.
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
from benchmarks.harness.splits import BEAM_CHATS, PREFEVAL_TOPICS, item_id, split_of
from meve.memory.records import Turn

__all__ = ["BEAM_CATEGORIES", "PREFEVAL_FORMS", "beam", "prefeval"]

#: BEAM's ability names, as categories; the ones not listed keep their own name (hyphenated).
BEAM_CATEGORIES = {
    "information_extraction": "single-hop",
    "multi_session_reasoning": "multi-hop",
    "knowledge_update": "knowledge-update",
    "temporal_reasoning": "temporal",
    "preference_following": "preference",
}
BEAM_SIZE = "100K"
#: The generation pipeline's trailing plan marker ("... ->-> 1,2"), on user messages and a few of the
#: assistant's that echo it: not part of what was said.
BEAM_MARKER = re.compile(r"\s*->->\s*[0-9A-Za-z/,()\s]{0,20}$")
#: PrefEval's forms used here, and the folder each is read from.
PREFEVAL_FORMS = {"explicit": "explicit_preference", "choice": "implicit_preference/choice-based"}
#: PrefEval's longest setting in its paper: 300 filler exchanges (its file holds 316).
PREFEVAL_INTER_TURNS = 300
_START = datetime(2024, 1, 1, 9, 0, tzinfo=timezone.utc)


def beam(root: Path = EXTERNAL / "beam", dropped: Counter[str] | None = None) -> dict[str, list[Conversation]]:
    """BEAM's 100K conversations by split (module docstring): every message a turn, sessions on
    their dates, and the probing questions asked after the last turn."""
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for key in BEAM_CHATS:
        n = key.split("/")[1]
        folder = root / BEAM_SIZE / n
        chat = folder / "chat_trunecated.json" if (folder / "chat_trunecated.json").exists() else folder / "chat.json"
        turns = _beam_turns(n, json.loads(external(chat).read_text()))
        role = {t.id: t.role for t in turns}
        questions = []
        for ability, items in json.loads(external(folder / "probing_questions.json").read_text()).items():
            for k, q in enumerate(items):
                ev = tuple(dict.fromkeys(f"{n}/{i}" for i in _ids(q.get("source_chat_ids"))))
                if not ev or any(e not in role for e in ev):
                    if dropped is not None:
                        dropped[f"beam {ability}: " + ("no evidence ids" if not ev else "evidence id not in the chat")] += 1
                    continue
                kind = BEAM_CATEGORIES.get(ability, ability.replace("_", "-"))
                if kind == "single-hop" and all(role[e] == "assistant" for e in ev):
                    kind = "single-hop-assistant"
                questions.append(MemoryQuestion(f"beam:{key}:{ability}/{k}", q["question"], ev, kind))
        out[split_of(item_id("beam", key, "0"))].append(Conversation(f"beam-{BEAM_SIZE}-{n}", turns, questions))
    return out


def _beam_turns(chat: str, batches: list[dict[str, Any]]) -> list[Turn]:
    """A batch is a session: it starts at 09:00 on its date (the ``time_anchor`` of its first
    message that has one, "March-03-2024"; a batch without one, the day after the previous) and
    its turns follow a minute apart. Turn ids are ``<chat>/<message id>``."""
    turns: list[Turn] = []
    day = _START
    for batch in batches:
        messages = [m for turn in batch["turns"] for m in turn]
        anchor = next((m["time_anchor"] for m in messages if m.get("time_anchor")), None)
        day = datetime.strptime(anchor, "%B-%d-%Y").replace(hour=9, tzinfo=timezone.utc) if anchor else day + timedelta(days=1)
        when = max(day, turns[-1].timestamp + timedelta(minutes=1)) if turns else day
        for k, m in enumerate(messages):
            text = BEAM_MARKER.sub("", m["content"])
            if text.strip():
                turns.append(Turn(f"{chat}/{m['id']}", m["role"].lower(), text, when + timedelta(minutes=k), len(turns)))
    return turns


def _ids(value: Any) -> list[int]:
    """The message ids in a ``source_chat_ids`` value: a list, or a dict of lists
    ({"original_info": [...], "updated_info": [...]}), in the order given."""
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in _ids(v)]
    return [value] if isinstance(value, int) else []


def prefeval(
    root: Path = EXTERNAL / "prefeval", inter_turns: int = PREFEVAL_INTER_TURNS, stride: int = 1, dropped: Counter[str] | None = None
) -> dict[str, list[Conversation]]:
    """PrefEval's explicit and choice-based preferences by split (module docstring): one
    conversation per preference and form, one question each. The filler is PrefEval's own
    (``filtered_inter_turns.json``, its first ``inter_turns`` user-assistant exchanges in file
    order, as its scripts take them), the same for every conversation. ``stride``: only every
    ``stride``-th preference of each topic file (by its place in the file, 0 first), so a replay
    of ~600-turn conversations fits in memory (the benchmarks take every tenth)."""
    filler = _prefeval_filler(json.loads(external(root / "filtered_inter_turns.json").read_text()), inter_turns)
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for topic in PREFEVAL_TOPICS:
        for form, folder in PREFEVAL_FORMS.items():
            for i, item in enumerate(json.loads(external(root / folder / f"{topic}.json").read_text())):
                if i % stride:
                    continue
                said, evidence = _prefeval_planted(item, form)
                own = [(f"{form}/{topic}/{i}/{k}", role, text) for k, (role, text) in enumerate(said) if text.strip()]
                known = {tid for tid, _, _ in own}
                ev = tuple(f"{form}/{topic}/{i}/{k}" for k in evidence if f"{form}/{topic}/{i}/{k}" in known)
                if not ev or not item.get("question", "").strip():
                    if dropped is not None:
                        dropped["prefeval: evidence turn or question empty"] += 1
                    continue
                turns = [Turn(tid, role, text, _START + timedelta(minutes=k), k) for k, (tid, role, text) in enumerate(own)]
                turns += [Turn(tid, role, text, when, len(turns) + k) for k, (tid, role, text, when) in enumerate(filler)]
                q = MemoryQuestion(f"prefeval:{topic}:{form}/{i}", item["question"], ev, "preference")
                out[split_of(item_id("prefeval", topic, "0"))].append(Conversation(f"prefeval-{form}-{topic}-{i}", turns, [q]))
    return out


def _prefeval_planted(item: dict[str, Any], form: str) -> tuple[list[tuple[str, str]], tuple[int, ...]]:
    """The turns that plant the preference, and which of them are the evidence."""
    if form == "explicit":
        return [("user", item["preference"])], (0,)
    c = item["conversation"]  # choice-based: query, options, the user's pick, acknowledgment
    said = [("user", c["query"]), ("assistant", c["assistant_options"]), ("user", c["user_selection"]), ("assistant", c["assistant_acknowledgment"])]
    return said, (1, 2)


def _prefeval_filler(chats: list[dict[str, Any]], inter_turns: int) -> list[tuple[str, str, str, datetime]]:
    """The first ``inter_turns`` exchanges (2 x ``inter_turns`` messages) of the filler chats in
    file order; each chat is a session on its own day (day 1, 2, ... after the preference's
    session on day 0), its turns a minute apart. Ids are ``lmsys/<conversation_id>/<k>``."""
    out: list[tuple[str, str, str, datetime]] = []
    taken = 0
    for day, chat in enumerate(chats, start=1):
        for k, m in enumerate(chat["conversation"]):
            if taken == 2 * inter_turns:
                return out
            taken += 1
            if m["content"].strip():
                out.append((f"lmsys/{chat['conversation_id']}/{k}", m["role"].lower(), m["content"], _START + timedelta(days=day, minutes=k)))
    if taken < 2 * inter_turns:
        raise ValueError(f"PrefEval's filler holds {taken // 2} exchanges, fewer than the {inter_turns} asked for")
    return out
