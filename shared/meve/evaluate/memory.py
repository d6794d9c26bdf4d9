"""Chat memory on a user's own conversations: :class:`meve.MomentaryMemory`'s selection against
plain dense, BM25 and hybrid fills of the same budget, each rendered as the memory renders
(``role: text`` lines in time order; a fill's lines are dated for a question about time, as the
default ``dates="auto"`` dates the memory's, so no fill is denied a "when" question by its rendering).

A question names its conversation, and its evidence as turn ids (kept when the turn's text stands
in the rebuilt context) or answer strings (kept when one occurs as whole normalised words). The
selection is replayed on precomputed signals (:class:`meve.evaluate.replay.Replay`, one embedding
per turn), so a grid of settings costs no Chroma and no model run per question.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from meve.core.config import MemoryConfig
from meve.core.errors import InputError
from meve.evaluate.frontier import gain_interval
from meve.evaluate.metrics import answer_in
from meve.evaluate.questions import split_of
from meve.evaluate.replay import FILLS, Replay
from meve.memory.records import Turn
from meve.memory.select import decide_dates

__all__ = [
    "MEMORY_GRID",
    "MemoryChoice",
    "MemoryQuestion",
    "MemoryReport",
    "choose_memory",
    "evaluate_memory",
    "memory_questions",
    "pick_by_evidence",
    "prepare",
    "tune_memory",
    "tuned_report",
]

_PARTNERS: tuple[dict[str, Any], ...] = (
    {"partner_turns": False},
    {"partner_turns": True, "partner_weight": 0.5},
    {"partner_turns": True, "partner_weight": 1.0},
)
#: The knobs of a memory tune, the memory benchmark's grid (``benchmarks/memory_lodo.py``): fusion
#: and its weights, partner turns, and whether the latest exchange is kept for every query or only
#: for a query of at most six words; dates "auto" throughout (18 settings).
MEMORY_GRID: list[dict[str, Any]] = [
    {"fusion": f, "weights": {"bm25": w, "dense": round(1 - w, 2)}, "dates": "auto", "keep_recent": kr, **p}
    for (f, w), p, kr in itertools.product((("weighted", 0.5), ("weighted", 0.8), ("rrf", 0.5)), _PARTNERS, (True, "short"))
]


@dataclass(frozen=True)
class MemoryQuestion:
    """A question asked after a conversation, with its evidence turn ids and/or answer strings."""

    text: str
    conversation: str
    evidence_turn_ids: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    id: str = ""


def memory_questions(raw: Sequence[MemoryQuestion | Mapping[str, Any]], turns: Mapping[str, Sequence[Turn]]) -> list[MemoryQuestion]:
    """Questions as dicts (``conversation``, ``question``, ``evidence_turn_ids`` and/or ``answers``,
    optional ``id``) or records, each checked against the conversations; a refusal names the question's place and field."""
    out = []
    for n, q in enumerate(raw, start=1):
        if isinstance(q, Mapping):
            unknown = sorted(set(q) - {"id", "conversation", "question", "evidence_turn_ids", "answers"})
            if unknown:
                raise InputError(f"question {n}: field {unknown[0]!r} is not known (allowed: id, conversation, question, evidence_turn_ids, answers)")
            for f in ("evidence_turn_ids", "answers"):
                if f in q and (not isinstance(q[f], list) or not q[f] or not all(isinstance(x, str) and x.strip() for x in q[f])):
                    raise InputError(f"question {n}: field {f!r}: {q[f]!r} is not allowed: expected a non-empty list of non-blank strings")
            evidence, answers = tuple(q.get("evidence_turn_ids", ())), tuple(q.get("answers", ()))
            q = MemoryQuestion(q.get("question", ""), q.get("conversation", ""), evidence, answers, str(q.get("id", "")))
        if not isinstance(q.text, str) or not q.text.strip():
            raise InputError(f"question {n}: field 'question': {q.text!r} is not allowed: expected a non-empty string")
        if q.conversation not in turns:
            raise InputError(f"question {n}: field 'conversation': {q.conversation!r} is not one of the conversations given")
        if not (q.evidence_turn_ids or q.answers):
            raise InputError(f"question {n}: no evidence field: give 'evidence_turn_ids' or 'answers'")
        known = {t.id for t in turns[q.conversation]}
        missing = [e for e in q.evidence_turn_ids if e not in known]
        if missing:
            raise InputError(f"question {n}: field 'evidence_turn_ids': {missing[0]!r} is not a turn of conversation {q.conversation!r}")
        out.append(q)
    return out


def _turns(conversation: Sequence[Turn | Mapping[str, Any]], name: str) -> list[Turn]:
    """A conversation's turns as records, in time order (a dict: text, role, id or turn_id, timestamp; missing times one second apart)."""
    start = datetime(2000, 1, 1, tzinfo=timezone.utc)
    out = []
    for i, t in enumerate(conversation):
        if isinstance(t, Turn):
            out.append(t)
            continue
        if not isinstance(t, Mapping) or not isinstance(t.get("text"), str) or t.get("role") not in ("user", "assistant"):
            raise InputError(f"conversation {name!r}, turn {i + 1}: expected a Turn or a dict with 'text' and 'role' (user or assistant)")
        when = t.get("timestamp") or start + timedelta(seconds=i)
        when = datetime.fromisoformat(when) if isinstance(when, str) else when
        out.append(Turn(id=str(t.get("id", t.get("turn_id", f"{name}-{i}"))), role=t["role"], text=t["text"], timestamp=when, seq=i))
    return sorted(out, key=lambda t: (t.timestamp, t.seq))


def _kept(q: MemoryQuestion, text: str, by_id: Mapping[str, Turn]) -> float:
    if q.evidence_turn_ids:
        return sum(by_id[e].text in text for e in q.evidence_turn_ids) / len(q.evidence_turn_ids)
    return float(answer_in(q.answers, text))


@dataclass
class MemoryReport:
    """Each arm's mean evidence kept, share of questions with all of it and tokens at ``l_max``;
    the memory's gain over the best fill with a paired bootstrap 95% interval."""

    questions: int
    l_max: int
    arms: dict[str, dict[str, float]]
    best_fill: str
    gain: float
    gain_ci95: tuple[float, float]
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "questions": self.questions,
            "l_max": self.l_max,
            "arms": self.arms,
            "best_fill": self.best_fill,
            "gain": self.gain,
            "gain_ci95": list(self.gain_ci95),
            "notes": self.notes,
            **self.extra,
        }


Prepared = list[tuple[Replay, MemoryQuestion, np.ndarray, dict[str, Turn]]]


def prepare(conversations: Mapping[str, Sequence[Any]], questions: Sequence[Any], embedder: Any, counter: Any) -> tuple[Prepared, Any]:
    """Each question with its conversation's replay, its query vector and the conversation's turns by id
    (questions checked before any model runs); and the token counter."""
    from meve.core.tokens import get_token_counter
    from meve.scoring.embedders import default_embedder

    turns = {name: _turns(conv, name) for name, conv in conversations.items()}
    qs = memory_questions(questions, turns)  # checked before any model loads
    embedder = embedder if embedder is not None else default_embedder()
    counter = get_token_counter(counter)
    used = {q.conversation for q in qs}
    replays = {name: Replay(turns[name], counter, embedder.encode, embedder.name) for name in turns if name in used}
    qvecs = np.asarray(embedder.encode([q.text for q in qs]), dtype=np.float32)
    return [(replays[q.conversation], q, v, {t.id: t for t in turns[q.conversation]}) for q, v in zip(qs, qvecs, strict=True)], counter


def _arms(prepared: Prepared, counter: Any, configs: Mapping[str, MemoryConfig], l_max: int) -> dict[str, list[tuple[float, int]]]:
    """Per arm, per question: (evidence kept, tokens) for each memory config and each fill."""
    out: dict[str, list[tuple[float, int]]] = {name: [] for name in [*configs, *FILLS]}
    # A config equal to an earlier one (the default is also in the grid; a kept default is also "tuned") is replayed once.
    first = {name: next(n for n, c in configs.items() if c == cfg) for name, cfg in configs.items()}
    for rp, q, qv, by_id in prepared:
        for name, cfg in configs.items():
            if first[name] != name:
                out[name].append(out[first[name]][-1])
                continue
            _, text = rp.memory(q.text, qv, cfg)
            out[name].append((_kept(q, text, by_id), counter.count(text)))
        dated = decide_dates("auto", q.text)[0]  # a fill is dated as the default memory dates: for a question about time
        for how in FILLS:
            _, text = rp.fill(rp.ranking(q.text, qv, how), l_max, dates=dated)
            out[how].append((_kept(q, text, by_id), counter.count(text)))
    return out


def _report(per: Mapping[str, list[tuple[float, int]]], arm: str, l_max: int, reps: int, seed: int, notes: list[str]) -> MemoryReport:
    def mean(rows: list[tuple[float, int]], i: int) -> float:
        return round(float(np.mean([r[i] for r in rows])), 4) if rows else 0.0

    def whole(rows: list[tuple[float, int]]) -> float:
        return round(float(np.mean([r[0] == 1.0 for r in rows])), 4) if rows else 0.0

    arms = {name: {"evidence": mean(rows, 0), "all_evidence": whole(rows), "tokens": mean(rows, 1)} for name, rows in per.items()}
    best = max(FILLS, key=lambda f: arms[f]["evidence"])
    lo, hi = gain_interval([r[0] for r in per[arm]], {f: [r[0] for r in per[f]] for f in FILLS}, reps=reps, seed=seed)
    gain = round(arms[arm]["evidence"] - arms[best]["evidence"], 4)
    return MemoryReport(len(per[arm]), l_max, arms, best, gain, (round(lo, 4), round(hi, 4)), notes)


def evaluate_memory(
    conversations: Mapping[str, Sequence[Turn | Mapping[str, Any]]],
    questions: Sequence[MemoryQuestion | Mapping[str, Any]],
    *,
    l_max: int = 512,
    config: MemoryConfig | None = None,
    embedder: Any = None,
    token_counter: Any = None,
    reps: int = 2000,
    seed: int = 0,
) -> MemoryReport:
    """The memory (``config``, default ``MemoryConfig()``, at ``l_max`` tokens) against dense, BM25 and
    hybrid fills of ``l_max`` on ``questions`` asked after each conversation (name -> turns in time
    order). ``gain``: the memory's evidence minus the best fill's, with its paired bootstrap interval."""
    cfg = (config if config is not None else MemoryConfig()).replace(l_max=l_max)
    prepared, counter = prepare(conversations, questions, embedder, token_counter)
    per = _arms(prepared, counter, {"memory": cfg}, l_max)
    return _report(per, "memory", l_max, reps, seed, [f"gain over the best fill: paired bootstrap over {len(prepared)} questions, {reps} draws, 95%"])


def tune_memory(
    conversations: Mapping[str, Sequence[Turn | Mapping[str, Any]]],
    questions: Sequence[MemoryQuestion | Mapping[str, Any]],
    *,
    l_max: int = 512,
    grid: Sequence[Mapping[str, Any]] = MEMORY_GRID,
    embedder: Any = None,
    token_counter: Any = None,
    reps: int = 2000,
    seed: int = 0,
) -> tuple[MemoryConfig, MemoryReport]:
    """Choose among ``grid`` (MemoryConfig fields) by the best evidence on a dev split of the questions
    (split as :func:`meve.evaluate.questions.split_of`: sha256 of the id, else the text), keeping
    ``MemoryConfig()`` unless the best is clearly better there (:func:`choose_memory`), and report
    the choice and ``MemoryConfig()`` on the test split against the fills. Returns (config, report)."""
    from meve.evaluate.questions import Question

    prepared, counter = prepare(conversations, questions, embedder, token_counter)
    side = [split_of(Question(q.text, id=q.id, answers=("-",))) for _, q, _, _ in prepared]
    dev = [p for p, s in zip(prepared, side, strict=True) if s == "dev"]
    test = [p for p, s in zip(prepared, side, strict=True) if s == "test"]
    if min(len(dev), len(test)) < 8:
        raise InputError(f"the split gave {len(dev)} dev and {len(test)} test questions: tuning memory needs at least 8 on each side")
    choice = choose_memory(dev, counter, grid, l_max, reps=reps, seed=seed)
    return tuned_report(test, counter, choice, l_max, reps=reps, seed=seed, dev_questions=len(dev))


@dataclass(frozen=True)
class MemoryChoice:
    """What :func:`choose_memory` decided on dev: ``setting`` (MemoryConfig fields to ship: the grid's
    best, or ``{}`` for ``MemoryConfig()`` when it was kept), ``best`` (the grid's best by dev
    evidence), ``evidence`` (each grid setting's mean dev evidence), ``default_evidence``,
    ``over_default`` (the best's dev evidence minus the default's, with its paired bootstrap 95%
    interval) and ``kept_default``."""

    setting: dict[str, Any]
    best: dict[str, Any]
    evidence: list[float]
    default_evidence: float
    over_default: tuple[float, tuple[float, float]]
    kept_default: bool


def choose_memory(dev: Prepared, counter: Any, grid: Sequence[Mapping[str, Any]], l_max: int, *, reps: int = 2000, seed: int = 0) -> MemoryChoice:
    """The setting of ``grid`` with the most evidence kept on ``dev`` (ties to the earlier one); it
    replaces ``MemoryConfig()`` only when the paired bootstrap 95% interval of its dev evidence minus
    the default's lies above zero (the best of many settings on a few dozen questions is partly
    chosen for its luck; the default was chosen leave-one-dataset-out on five data sets)."""
    configs = {str(i): MemoryConfig(l_max=l_max, **s) for i, s in enumerate(grid)}
    configs["default"] = MemoryConfig(l_max=l_max)
    per_dev = _arms(dev, counter, configs, l_max)
    evidence = [[r[0] for r in per_dev[str(i)]] for i in range(len(grid))]
    same = [i for i in range(len(grid)) if configs[str(i)] == configs["default"]]
    best, over, kept = pick_by_evidence(evidence, [r[0] for r in per_dev["default"]], same=same, reps=reps, seed=seed)
    means = [_mean(e) for e in evidence]
    return MemoryChoice({} if kept else dict(grid[best]), dict(grid[best]), means, _mean([r[0] for r in per_dev["default"]]), over, kept)


def _mean(values: Sequence[float]) -> float:
    return round(float(np.mean(values)), 4)


def pick_by_evidence(
    evidence: Sequence[Sequence[float]], default: Sequence[float], *, same: Sequence[int] = (), reps: int = 2000, seed: int = 0
) -> tuple[int, tuple[float, tuple[float, float]], bool]:
    """:func:`choose_memory`'s rule on per-question evidence (one row per setting, and the
    default's): (the best row by mean, ties to the earlier one; its mean minus the default's with
    the paired bootstrap 95% interval; whether the default is kept: the interval reaches zero, or
    the best is one of ``same``, the settings equal to the default)."""
    means = [_mean(e) for e in evidence]
    best = max(range(len(evidence)), key=lambda i: (means[i], -i))
    lo, hi = (0.0, 0.0) if best in same else gain_interval(evidence[best], {"default": default}, reps=reps, seed=seed)
    return best, (round(means[best] - _mean(default), 4), (round(lo, 4), round(hi, 4))), lo <= 0


def tuned_report(
    test: Prepared, counter: Any, choice: MemoryChoice, l_max: int, *, reps: int = 2000, seed: int = 0, dev_questions: int = 0
) -> tuple[MemoryConfig, MemoryReport]:
    """The choice and ``MemoryConfig()`` on ``test`` against the fills; (the choice's config, the report)."""
    chosen = MemoryConfig(l_max=l_max, **choice.setting)
    per = _arms(test, counter, {"tuned": chosen, "default": MemoryConfig(l_max=l_max)}, l_max)
    diff, (lo, hi) = choice.over_default
    line = (
        f"the best of {len(choice.evidence)} settings on {dev_questions} dev questions ({choice.best}) keeps {diff:+.4f} evidence "
        f"over MemoryConfig()'s (paired 95% interval {lo:+.4f} to {hi:+.4f})"
    )
    if not choice.kept_default:
        verdict = "clearly better, so it is chosen"
    elif MemoryConfig(l_max=l_max, **choice.best) == MemoryConfig(l_max=l_max):
        verdict = "it is MemoryConfig() itself, so that is kept"
    else:
        verdict = "not clearly better (the interval reaches zero), so MemoryConfig() is kept"
    notes = [f"{line}: {verdict}; reported on {len(test)} test questions"]
    report = _report(per, "tuned", l_max, reps, seed, notes)
    default = _report(per, "default", l_max, reps, seed, [])
    report.extra = {
        "chosen": dict(choice.setting),
        "dev_best": choice.best,
        "dev_over_default": [diff, [lo, hi]],
        "kept_default": choice.kept_default,
        "split": {"dev": dev_questions, "test": len(test)},
        "default_gain": default.gain,
        "default_gain_ci95": list(default.gain_ci95),
    }
    return chosen, report
