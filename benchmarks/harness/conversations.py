"""The chat-memory data sets, and a replay of MomentaryMemory's selection on precomputed signals.

* LoCoMo (shared/data/locomo): 10 long two-person conversations; questions name their evidence
  turns. Registry: conversations 0-4 dev, 5-9 test.
* SelQA-chat, built here because no conversation-memory QA set other than LoCoMo could be had
  (LongMemEval's files are 15-280 MB; the store carries none over 4 MB): for each of SelQA's ten
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

import numpy as np

from benchmarks.harness.data import EXTERNAL, external
from benchmarks.harness.splits import item_id, split_of
from benchmarks.locomo import load as load_locomo
from benchmarks.locomo import turns_of
from meve import MemoryConfig
from meve.core.tokens import TokenCounter, count_many
from meve.memory.log import Snapshot
from meve.memory.records import Turn
from meve.memory.render import render, render_turn
from meve.memory.select import Selection, decide_dates, fuse, rank, select_turns, signal_weights
from meve.retrieval.bm25 import IncrementalBM25
from meve.retrieval.terms import bm25_tokenize, stemmed_tokenize

__all__ = ["MEMORY_SETS", "Conversation", "MemoryQuestion", "Replay", "evidence_kept", "locomo", "memorybank", "selqa_chat"]

MEMORY_SETS = ("locomo", "selqa_chat", "memorybank")
MEMORYBANK_EVIDENCE = Path(__file__).with_name("memorybank_evidence.json")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
NAMES_A_DATE = re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\bdate\b", re.IGNORECASE)


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
                MemoryQuestion(item_id("selqa_chat", split, f"{topic}/{i}"), x["question"], ev)
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


class Replay:
    """One conversation ready for :func:`select_turns`: the turns as a Snapshot (time order),
    every turn's vector, and BM25 over the turns (stemmed and plain)."""

    def __init__(self, conv: Conversation, counter: TokenCounter, encode: Callable[[Sequence[str]], np.ndarray], embedder_name: str) -> None:
        self.conv, self.counter, self.embedder = conv, counter, embedder_name
        turns = conv.turns
        tokens = count_many(counter, [render_turn(t) for t in turns])
        keys = [(t.timestamp.timestamp(), f"{i:012d}") for i, t in enumerate(turns)]
        self.snap = Snapshot(turns, tokens, keys, list(range(len(turns))), len(turns), min(tokens))
        self.vecs = np.asarray(encode([t.text for t in turns]), dtype=np.float32)
        self.bm25 = {
            True: IncrementalBM25([t.text for t in turns], tokenize=stemmed_tokenize),
            False: IncrementalBM25([t.text for t in turns], tokenize=bm25_tokenize),
        }

    def signals(self, query: str, qvec: np.ndarray, *, stem: bool, pool: int, exclude: set[int]) -> tuple[dict[int, float], dict[int, float]]:
        """BM25 and cosine of the ``pool`` best past turns each, as MomentaryMemory reads them."""
        scores = self.bm25[stem].get_scores(query)
        cos = self.vecs @ qvec
        if exclude:
            scores[list(exclude)] = 0.0
            cos[list(exclude)] = -np.inf
        k = min(pool, len(scores))
        top_b = np.argpartition(-scores, k - 1)[:k]
        top_d = np.argpartition(-cos, min(k, len(cos)) - 1)[:k]
        return {int(i): float(scores[i]) for i in top_b if scores[i] > 0}, {int(i): float(cos[i]) for i in top_d if np.isfinite(cos[i])}

    def partner(self, i: int) -> int | None:
        """The adjacent turn by the other role (the reply after, else the turn it answered)."""
        for k in (i + 1, i - 1):
            if 0 <= k < len(self.conv.turns) and self.conv.turns[k].role != self.conv.turns[i].role:
                return k
        return None

    def memory(self, query: str, qvec: np.ndarray, cfg: MemoryConfig, pool: int = 256) -> tuple[Selection, str]:
        """What ``MomentaryMemory.reconstruct(query)`` with ``cfg`` selects (one embedder), and the
        context rendered as the memory renders it."""
        cfg = cfg.replace(dates=decide_dates(cfg.dates, query)[0])
        n = self.snap.n
        recent = list(range(n - min(cfg.recent_turns, n), n))
        bm25, dense = self.signals(query, qvec, stem=cfg.stemming, pool=max(pool, cfg.l_max // 8), exclude=set(recent))
        weights = signal_weights(cfg.weights, (self.embedder,))
        fused = fuse({"bm25": bm25, f"dense:{self.embedder}": dense}, weights, cfg.fusion, cfg.rrf_k)
        sel = select_turns(self.snap, cfg, self.counter, recent=recent, pinned=[], ranked=rank(fused, self.snap.keys), partner=self.partner, scores=fused)
        return sel, render(sel.turns, dates=bool(cfg.dates))

    def fill(self, ranked: Sequence[int], l_max: int, dates: bool = False) -> tuple[Selection, str]:
        """A plain fill baseline: turns in ``ranked`` order while they fit, rendered like the memory's
        ``role: text`` lines in time order (no recent turn, no partner turns; dated when ``dates``)."""
        cfg = MemoryConfig(l_max=l_max, partner_turns=False, dates=dates, recent_turns=0)
        sel = select_turns(self.snap, cfg, self.counter, recent=[], pinned=[], ranked=ranked, partner=self.partner)
        return sel, render(sel.turns, dates=dates)

    def ranking(self, query: str, qvec: np.ndarray, how: str, *, stem: bool = True) -> list[int]:
        """Every turn by one signal: "dense", "bm25", or "hybrid" (both fused by reciprocal rank)."""
        cos = self.vecs @ qvec
        dense = sorted(range(len(cos)), key=lambda i: (-cos[i], i))
        if how == "dense":
            return dense
        scores = self.bm25[stem].get_scores(query)
        lexical = sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-scores[i], i))
        if how == "bm25":
            return lexical
        fused = fuse(
            {"dense": {i: float(cos[i]) for i in dense[:256]}, "bm25": {i: float(scores[i]) for i in lexical[:256]}}, {"dense": 1.0, "bm25": 1.0}, "rrf", 60
        )
        return rank(fused, self.snap.keys)


def evidence_kept(question: MemoryQuestion, text: str, turns_by_id: dict[str, Turn]) -> float:
    """Share of the question's evidence turns whose text stands in the rendered context."""
    return sum(turns_by_id[e].text in text for e in question.evidence) / len(question.evidence)
