"""The chat-memory data sets, and a replay of MomentaryMemory's selection on precomputed signals.

* LoCoMo (shared/data/locomo): 10 long two-person conversations; questions name their evidence
  turns. Registry: conversations 0-4 dev, 5-9 test.
* SelQA-chat, built here when no conversation-memory QA set other than LoCoMo had been found
  (LongMemEval's release files are 15-280 MB; the store carries none over 4 MB): for each of SelQA's ten
  topics, one conversation whose sessions are the Wikipedia sections that topic's questions were
  written against (one session a day, sentences as alternating user and assistant turns). The
  questions are SelQA's, crowd-written against the section (half of them reworded on purpose:
  ``is_paraphrase``), so they do not reuse the turns' wording the way LoCoMo's often do; the
  evidence is the answer sentences' turns. It is not a real chat: no greetings, no replies that
  only make sense beside their question. Registry: SelQA's dev file dev, its test file test.
* MemoryBank (zhongwanjun/MemoryBank-SiliconFriend, MIT): 15 users' ten days of chat with an AI
  companion (LLM-written, one session a day, dated), and 5-7 probing questions per user written by
  the data set's authors, often naming a day ("On May 4th, ..."). It ships no evidence labels: the
  evidence turns were annotated for meve (``memorybank_evidence.json``, its ``_about``). A question
  that names a date, or asks for one, is "temporal": it is answerable only from dated lines.
  Registry: the first 7 users by sha256 of the name dev, the other 8 test.
* REALTALK (danny911kr/REALTALK; no licence file, see DATA.md): ten real messaging-app chats
  between two people over about three weeks (410-1,548 messages, every message timed as sent), in
  LoCoMo's format, with the authors' memory probes and their evidence messages. Registry: the first
  5 chats by sha256 of the name dev, the other 5 test.
* RealMem (zhiyuan5986/RealMemBench, Apache-2.0): ten personas' LLM-written project chats with an
  assistant, 135-276 dated sessions each (the files say 256k tokens). Its questions are the user's own
  mid-history turns the authors mark as needing memory; the evidence is the turns the memory points
  the assistant used were extracted from. Each persona gives up to nine conversations (its history
  cut at each tenth of its sessions; see :func:`realmem`). Registry: the first 5 personas by sha256 of the
  name dev, the other 5 test.
* LongMemEval_S, a sample (xiaowu0162/LongMemEval, MIT, as split per question by hussainzs/Memoria):
  60 questions, 10 of each type, each asked after its own history of about 50 dated sessions
  (~100k tokens), evidence the turns marked ``has_answer``. Registry: sha256 of the question id.

Question types (``MemoryQuestion.category``), in one vocabulary where the source gives them:
LoCoMo's and REALTALK's numbered categories (multi-hop, temporal, open-domain, single-hop,
adversarial); LongMemEval's types (single-hop, single-hop-assistant, preference, multi-hop,
temporal, knowledge-update); RealMem's (knowledge-update, temporal, preference, else multi-hop or
single-hop by its ``session_type``); SelQA-chat's ``is_paraphrase`` (paraphrase, else single-hop).
MemoryBank has none: its questions are "temporal" when they name or ask for a date, else unlabelled.

:class:`Replay` runs :func:`meve.memory.select.select_turns` (the library's selection, not a copy)
over a conversation, so a grid of settings costs no Chroma and no model run per question.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.data import EXTERNAL, external
from benchmarks.harness.splits import REALMEM_PERSONAS, REALTALK_CHATS, item_id, split_of
from benchmarks.locomo import load as load_locomo
from benchmarks.locomo import turns_of
from meve.core.tokens import TokenCounter
from meve.evaluate.replay import Replay as MemoryReplay
from meve.memory.records import Turn

__all__ = [
    "MEMORY_SETS",
    "Conversation",
    "MemoryQuestion",
    "Replay",
    "evidence_kept",
    "locomo",
    "longmemeval",
    "memorybank",
    "realmem",
    "realtalk",
    "selqa_chat",
]

# REALTALK's repository has no licence (its issue asking for one is open): its loader stays for a
# local check, but it is not among the sets the shipped default is chosen on or reported on.
# LongMemEval_S's sample has a loader and splits but is not in the run yet: its 29k distinct turns did
# not finish embedding on the 2-core CPU in the session that added it.
MEMORY_SETS = ("locomo", "selqa_chat", "memorybank", "realmem", "longmemeval")
MEMORYBANK_EVIDENCE = Path(__file__).with_name("memorybank_evidence.json")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
NAMES_A_DATE = re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\bdate\b", re.IGNORECASE)
#: LoCoMo's numbering, which REALTALK keeps (its file has categories 1-3 only).
REALTALK_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain"}
DIA_ID = re.compile(r"D\d+:\d+")
DIA_RANGE = re.compile(r"D(\d+):(\d+)\s*-\s*D\1:(\d+)")
#: RealMem's query categories that name a question type; "Dynamic Incremental" queries are typed
#: by how many sessions they draw on (the file's ``session_type``).
REALMEM_CATEGORIES = {"Dynamic Updating": "knowledge-update", "Temporal-reasoning": "temporal", "Implicit Preference": "preference"}
REALMEM_PARTS = 10
#: The LongMemEval_S questions used (file names and sha256, ``sha256sum -c`` format; DATA.md says how chosen).
LONGMEMEVAL_SAMPLE = Path(__file__).with_name("longmemeval_sample.sha256")
#: A second sample, never used to choose anything: the held-out check (``benchmarks.memory_heldout``).
LONGMEMEVAL_HELDOUT = Path(__file__).with_name("longmemeval_heldout.sha256")
LONGMEMEVAL_CATEGORIES = {
    "single-session-user": "single-hop",
    "single-session-assistant": "single-hop-assistant",
    "single-session-preference": "preference",
    "multi-session": "multi-hop",
    "temporal-reasoning": "temporal",
    "knowledge-update": "knowledge-update",
}


@dataclass(frozen=True)
class MemoryQuestion:
    """A question asked after the conversation, with its evidence turns (ids)."""

    id: str
    text: str
    evidence: tuple[str, ...]
    category: str = ""


@dataclass
class Conversation:
    """Turns in time order, and the questions asked after the last one."""

    name: str
    turns: list[Turn]
    questions: list[MemoryQuestion]


def locomo(data: Path) -> dict[str, list[Conversation]]:
    """LoCoMo's conversations by split: the first speaker is "user", the other "assistant"."""
    names = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for ci, sample in enumerate(load_locomo(data)):
        raw = turns_of(sample)
        first = raw[0]["text"].split(":", 1)[0]
        turns = [Turn(t["id"], "user" if t["text"].split(":", 1)[0] == first else "assistant", t["text"], t["timestamp"], i) for i, t in enumerate(raw)]
        known = {t.id for t in turns}
        qs = [
            MemoryQuestion(item_id("locomo", str(ci), str(qi)), q["question"], tuple(e for e in q["evidence"] if e in known), names.get(int(q["category"]), ""))
            for qi, q in enumerate(sample["qa"])
            if any(e in known for e in q.get("evidence") or [])
        ]
        out["dev" if ci < 5 else "test"].append(Conversation(f"locomo-{ci}", turns, qs))
    return out


def selqa_chat(per_conversation: int = 30, root: Path = EXTERNAL / "selqa") -> dict[str, list[Conversation]]:
    """SelQA-chat by split (module docstring): one conversation per topic, ``per_conversation``
    questions each (a fixed sample, by sha256 of the id)."""
    out: dict[str, list[Conversation]] = {}
    start = datetime(2023, 1, 2, 9, 0, tzinfo=timezone.utc)
    for split in ("dev", "test"):
        items = json.loads(external(root / f"selqa-ass-{split}.json").read_text())
        convs = []
        for topic in sorted({x["topic"] for x in items}):
            mine = [(i, x) for i, x in enumerate(items) if x["topic"] == topic]
            sections: dict[str, list[str]] = {}
            for _, x in mine:
                sections.setdefault(f"{x['article']}/{x['section']}", x["candidates"])
            turns: list[Turn] = []
            ids: dict[tuple[str, int], str] = {}
            for day, key in enumerate(sorted(sections, key=lambda k: hashlib.sha256(k.encode()).hexdigest())):
                for k, sentence in enumerate(sections[key]):
                    if not sentence.strip():
                        continue  # SelQA holds a few empty candidates
                    tid = f"{key}#{k}"
                    ids[(key, k)] = tid
                    when = start + timedelta(days=day, minutes=k)
                    turns.append(Turn(tid, "user" if k % 2 == 0 else "assistant", sentence, when, len(turns)))
            qs = [
                MemoryQuestion(item_id("selqa_chat", split, f"{topic}/{i}"), x["question"], ev, "paraphrase" if x.get("is_paraphrase") else "single-hop")
                for i, x in mine
                if (ev := tuple(ids[(key, a)] for a in x["answers"] if (key := f"{x['article']}/{x['section']}", a) in ids))
            ]
            qs = sorted(qs, key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())[:per_conversation]
            convs.append(Conversation(f"selqa-{split}-{topic}", turns, qs))
        out[split] = convs
    return out


def memorybank(root: Path = EXTERNAL / "memorybank", evidence: Path = MEMORYBANK_EVIDENCE) -> dict[str, list[Conversation]]:
    """MemoryBank's English users by split (module docstring): each user's days in order, the user's
    messages as "user" turns and the companion's replies as "assistant" turns, every turn dated."""
    history = {name.strip(): user["history"] for name, user in json.loads(external(root / "memory_bank_en.json").read_text()).items()}
    asked: dict[str, list[str]] = {}
    for line in external(root / "probing_questions_en.jsonl").read_text().splitlines():
        asked.update({name.strip(): qs for name, qs in json.loads(line).items()})
    labels = {k: v for k, v in json.loads(evidence.read_text()).items() if not k.startswith("_")}
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for user in sorted(history):
        turns: list[Turn] = []
        for day in sorted(history[user]):
            when = datetime.fromisoformat(day).replace(hour=9, tzinfo=timezone.utc)
            for k, exchange in enumerate(history[user][day]):
                for n, (side, role) in enumerate((("q", "user"), ("r", "assistant"))):
                    tid = f"{user}/{day[5:]}/{k}{side}"
                    turns.append(Turn(tid, role, exchange["query" if side == "q" else "response"], when + timedelta(minutes=2 * k + n), len(turns)))
        known = {t.id for t in turns}
        if len(labels[user]) != len(asked[user]):
            raise ValueError(f"{evidence.name}: {user} has {len(labels[user])} labelled questions, the data {len(asked[user])}")
        qs = []
        for i, (text, ev) in enumerate(zip(asked[user], labels[user], strict=True)):
            ids = tuple(f"{user}/{e}" for e in ev)
            if missing := [e for e in ids if e not in known]:
                raise ValueError(f"{evidence.name}: {user} question {i} names unknown turns {missing}")
            if ids:
                qs.append(MemoryQuestion(item_id("memorybank", user, str(i)), text.strip('"'), ids, "temporal" if NAMES_A_DATE.search(text) else ""))
        out[split_of(item_id("memorybank", user, "0"))].append(Conversation(f"memorybank-{user.replace(' ', '_')}", turns, qs))
    return out


def realtalk(root: Path = EXTERNAL / "realtalk") -> dict[str, list[Conversation]]:
    """REALTALK's ten chats by split (module docstring): every message a turn, timed as sent, the
    file's first speaker "user" and the other "assistant"; each question's evidence is the turns it
    names (ids the file lacks, image-only messages, dropped; a question left with none, dropped)."""
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for chat in REALTALK_CHATS:
        raw = json.loads(external(root / f"{chat}.json").read_text())
        turns = _realtalk_turns(raw)
        known = {t.id for t in turns}
        qs = []
        for qi, q in enumerate(raw["qa"]):
            ev = tuple(dict.fromkeys(e for ref in q.get("evidence") or [] for e in dia_ids(ref) if e in known))
            if ev:
                qs.append(MemoryQuestion(item_id("realtalk", chat, str(qi)), q["question"], ev, REALTALK_CATEGORIES.get(int(q["category"]), "")))
        out[split_of(item_id("realtalk", chat, "0"))].append(Conversation(f"realtalk-{chat}", turns, qs))
    return out


def dia_ids(ref: str) -> list[str]:
    """The message ids in one REALTALK evidence entry. Most hold one id; some several
    ("D13:4. D14:4", "D1:11; D3:18") or a range within a session ("D12:3-D12:5": 3, 4 and 5).
    What is none of these ("D58", "D:56", "23:29") names nothing for sure and gives no id."""
    spelled = DIA_RANGE.sub(lambda m: " ".join(f"D{m[1]}:{k}" for k in range(int(m[2]), int(m[3]) + 1)), ref)
    return DIA_ID.findall(spelled)


def _realtalk_turns(raw: dict[str, Any]) -> list[Turn]:
    first = raw["name"]["speaker_1"]
    sent: list[tuple[datetime, int, str, str, str]] = []
    n = 1
    while f"session_{n}" in raw:
        for t in raw[f"session_{n}"]:
            text = f"{t['speaker']}: {t['clean_text']}"
            if t.get("blip_caption"):
                text += f" [shares an image: {t['blip_caption']}]"
            when = datetime.strptime(t["date_time"], "%d.%m.%Y, %H:%M:%S").replace(tzinfo=timezone.utc)
            sent.append((when, len(sent), t["dia_id"], "user" if t["speaker"] == first else "assistant", text))
        n += 1
    return [Turn(tid, role, text, when, i) for i, (when, _, tid, role, text) in enumerate(sorted(sent))]


def realmem(root: Path = EXTERNAL / "realmem", parts: int = REALMEM_PARTS) -> dict[str, list[Conversation]]:
    """RealMem's ten personas by split (module docstring). A query is asked mid-history, so each
    persona gives ``parts - 1`` conversations: its sessions before the k-th cut (k/parts of the
    sessions), asked the queries of the sessions from that cut to the next whose evidence lies
    wholly before the cut. The evidence is the turns the query's memory points were extracted from
    (a point whose source turn cannot be found makes its query unusable)."""
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for person in REALMEM_PERSONAS:
        sessions = json.loads(external(root / f"{person}_dialogues_256k.json").read_text())["dialogues"]
        turns, starts = _realmem_turns(sessions)
        asked = _realmem_queries(person, sessions)
        cuts = [round(len(sessions) * k / parts) for k in range(1, parts)]
        for c, cut in enumerate(cuts):
            end = cuts[c + 1] if c + 1 < len(cuts) else len(sessions)
            qs = [q for at, last, q in asked if cut <= at < end and last < cut]
            if qs:
                out[split_of(item_id("realmem", person, "0"))].append(Conversation(f"realmem-{person}-{c + 1}of{parts}", turns[: starts[cut]], qs))
    return out


def _realmem_turns(sessions: list[dict[str, Any]]) -> tuple[list[Turn], list[int]]:
    """Every session's turns, and where each session starts. Sessions carry a day, not a time: a
    session starts at 09:00 that day (or a minute after the last turn, a second session that
    day) and its turns follow a minute apart."""
    turns: list[Turn] = []
    starts = []
    for s in sessions:
        starts.append(len(turns))
        day = datetime.strptime(s["current_time"].split(" ")[0], "%Y-%m-%d").replace(hour=9, tzinfo=timezone.utc)
        when = max(day, turns[-1].timestamp + timedelta(minutes=1)) if turns else day
        for k, t in enumerate(s["dialogue_turns"]):
            if t["content"].strip():  # a few turns are empty: nothing to remember, and the memory refuses them
                turns.append(Turn(f"{s['session_uuid']}/{k}", t["speaker"].lower(), t["content"], when + timedelta(minutes=k), len(turns)))
    starts.append(len(turns))
    return turns, starts


def _memory_key(session: str, content: Any) -> tuple[str, str]:
    # A few memory points hold a dict, not a string: compare them canonically.
    return session, content if isinstance(content, str) else json.dumps(content, sort_keys=True)


def _realmem_queries(person: str, sessions: list[dict[str, Any]]) -> list[tuple[int, int, MemoryQuestion]]:
    """Each usable query: its session, the last session its evidence is in, and the question.
    A memory point's source turn is the one turn of its session whose speaker and text are the
    point's ``source_role_snapshot`` and ``source_content_snapshot``. (The file's ``source_turn``
    is 1-based for most points; 566 points say 0 with the session's first, user, turn as the
    snapshot but "Assistant" as the role: a placeholder, not a source, so the role must agree.)"""
    source: dict[tuple[str, str], tuple[int, str] | None] = {}
    for i, s in enumerate(sessions):
        said = [(t["speaker"], t["content"]) for t in s["dialogue_turns"]]
        for m in s.get("extracted_memory") or []:
            hits = [k for k, x in enumerate(said) if x == (m.get("source_role_snapshot"), m.get("source_content_snapshot"))]
            source[_memory_key(m["session_uuid"], m["content"])] = (i, f"{s['session_uuid']}/{hits[0]}") if len(hits) == 1 else None
    out = []
    for i, s in enumerate(sessions):
        ts = s["dialogue_turns"]
        for k, t in enumerate(ts):
            if not t.get("is_query"):
                continue
            used = (ts[k + 1].get("memory_used") if k + 1 < len(ts) else None) or []  # on the reply
            found = [f for m in used if (f := source.get(_memory_key(m["session_uuid"], m["content"]))) is not None]
            if not used or len(found) < len(used):
                continue
            ev = tuple(dict.fromkeys(tid for _, tid in found))
            kind = REALMEM_CATEGORIES.get(t["category_name"]) or ("multi-hop" if t["session_type"] == "multi_session" else "single-hop")
            out.append((i, max(at for at, _ in found), MemoryQuestion(item_id("realmem", person, t["query_id"]), t["content"], ev, kind)))
    return out


def longmemeval(root: Path = EXTERNAL / "longmemeval", sample: Path = LONGMEMEVAL_SAMPLE) -> dict[str, list[Conversation]]:
    """A sample of LongMemEval_S by split (module docstring): each question is asked after its own
    history of about fifty dated sessions; the evidence is the turns the file marks ``has_answer``."""
    out: dict[str, list[Conversation]] = {"dev": [], "test": []}
    for line in sample.read_text().splitlines():
        raw = json.loads(external(root / line.split()[-1]).read_text())
        qid = raw["question_id"]
        turns, evidence = _longmemeval_turns(raw)
        if not evidence:
            raise ValueError(f"LongMemEval question {qid} marks no turn has_answer; the sample holds only questions that do")
        q = MemoryQuestion(item_id("longmemeval", qid, qid), raw["question"], evidence, LONGMEMEVAL_CATEGORIES[raw["question_type"]])
        out[split_of(q.id)].append(Conversation(f"longmemeval-{qid}", turns, [q]))
    return out


def _longmemeval_turns(raw: dict[str, Any]) -> tuple[list[Turn], tuple[str, ...]]:
    """The history in date order, and the ids of the turns marked ``has_answer``. A session's
    turns follow its date and time a minute apart (a session that would start before the last
    turn starts a minute after it); a session's second copy gets ids ``<session>~2/<k>``."""
    turns: list[Turn] = []
    evidence = []
    starts = [_lme_date(d) for d in raw["haystack_dates"]]
    seen: dict[str, int] = {}
    for i in sorted(range(len(starts)), key=lambda i: (starts[i], i)):
        when = max(starts[i], turns[-1].timestamp + timedelta(minutes=1)) if turns else starts[i]
        sid = raw["haystack_session_ids"][i]
        seen[sid] = seen.get(sid, 0) + 1
        if seen[sid] > 1:  # a few histories hold a distractor session twice, on two dates
            sid = f"{sid}~{seen[sid]}"
        for k, t in enumerate(raw["haystack_sessions"][i]):
            if not t["content"].strip():  # empty turns: nothing to remember, and the memory refuses them
                continue
            turns.append(Turn(f"{sid}/{k}", t["role"], t["content"], when + timedelta(minutes=k), len(turns)))
            if t.get("has_answer"):
                evidence.append(turns[-1].id)
    return turns, tuple(evidence)


def _lme_date(text: str) -> datetime:
    day, _, rest = text.partition(" (")  # "2023/05/20 (Sat) 02:21"
    return datetime.strptime(f"{day} {rest.split(') ')[1]}", "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


class Replay(MemoryReplay):
    """The library's replay (:class:`meve.evaluate.replay.Replay`) over one benchmark conversation."""

    def __init__(self, conv: Conversation, counter: TokenCounter, encode: Callable[[Sequence[str]], np.ndarray], embedder_name: str) -> None:
        super().__init__(conv.turns, counter, encode, embedder_name)
        self.conv = conv


def evidence_kept(question: MemoryQuestion, text: str, turns_by_id: dict[str, Turn]) -> float:
    """Share of the question's evidence turns whose text stands in the rendered context."""
    return sum(turns_by_id[e].text in text for e in question.evidence) / len(question.evidence)
