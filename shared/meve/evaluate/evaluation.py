""":func:`evaluate`: a user's questions over their corpus, MeVe against dense, BM25 and hybrid top-k
over the same index, each MeVe setting's margin over the frontier at its own tokens, with a paired
bootstrap 95% interval."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from meve.core.config import MeVeConfig
from meve.core.errors import InputError
from meve.evaluate import frontier
from meve.evaluate.arms import BASELINES, KS, Rankings, Scorable
from meve.evaluate.metrics import ANSWER_MATCHES, check_match
from meve.evaluate.questions import Question, as_questions, check_evidence_ids, targets
from meve.evaluate.report import Points, Report, arm_summary, measure_arm, measure_curves, reference_tokens

if TYPE_CHECKING:
    from meve.pipeline.meve import MeVe

__all__ = ["Corpus", "answer_note", "evaluate", "opened", "progress", "run_arms"]

#: a MeVe (flat store), passages as texts, or passages as {id: text}
Corpus = Any
Settings = Mapping[str, Mapping[str, Any] | MeVeConfig]


@contextlib.contextmanager
def opened(corpus: Corpus) -> Iterator[MeVe]:
    """The MeVe to evaluate: the one given (left open), or one built over the texts given (closed after)."""
    from meve.pipeline.meve import MeVe

    if isinstance(corpus, MeVe):
        yield corpus
        return
    if isinstance(corpus, Mapping):
        ids, texts = [str(k) for k in corpus], list(corpus.values())
    elif isinstance(corpus, Sequence) and not isinstance(corpus, str):
        ids, texts = [f"doc-{i}" for i in range(len(corpus))], list(corpus)
    else:
        raise InputError(f"corpus must be a meve.MeVe, a list of passage texts or a dict of id -> text, got {type(corpus).__name__}")
    with MeVe.from_texts(texts, ids=ids) as meve:
        yield meve


class Tick:
    """A tick per question run; ``expect(n)`` corrects the total once it is known (an arm that will not run)."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def __call__(self) -> None:
        self.bar.update(1)

    def expect(self, total: int) -> None:
        self.bar.total = total
        self.bar.refresh()


@contextlib.contextmanager
def progress(total: int, show: bool, desc: str) -> Iterator[Tick]:
    """A tqdm bar on stderr when ``show``. Its ETA is the mean rate over the whole run
    (``smoothing=0``): the first runs load models and read caches, and a recent-rate estimate
    read 16-21 minutes for runs of 1-3. A terminal that reports no width gets 80 columns, not no bar."""
    import shutil

    from tqdm.auto import tqdm

    width = None if shutil.get_terminal_size((0, 0)).columns > 0 else 80
    bar = tqdm(total=total, desc=desc, unit="run", disable=not show, smoothing=0, ncols=width)
    try:
        yield Tick(bar)
    finally:
        bar.close()


def _overrides(setting: Mapping[str, Any] | MeVeConfig) -> dict[str, Any]:
    return setting.to_dict() if isinstance(setting, MeVeConfig) else dict(setting)


def run_arms(
    rankings: Rankings,
    items: Sequence[Scorable],
    settings: Mapping[str, Mapping[str, Any]],
    *,
    ks: Sequence[int] = KS,
    reps: int = 2000,
    seed: int = 0,
    tick: Callable[[], Any] | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """The top-k curves and each setting's summary row (margin and its interval) on ``items``."""
    counter = rankings.meve.token_counter
    points: Points = {}
    curves = measure_curves(rankings, items, counter, ks=ks, points=points, tick=tick)
    reference = reference_tokens(curves)
    arms = {}
    for label, setting in settings.items():
        row, scores = measure_arm(rankings, items, counter, setting, tick=tick)
        arms[label] = {"setting": dict(setting), **arm_summary(_means(row), curves, reference, frontier.margin_interval(scores, points, reps=reps, seed=seed))}
    return curves, arms


def _means(row: Mapping[str, Any]) -> dict[str, Any]:
    """A measured row less the setting's fields (kept apart, under "setting")."""
    fields = set(MeVeConfig.__dataclass_fields__)
    return {k: v for k, v in row.items() if k not in fields}


def evaluate(
    corpus: Corpus,
    questions: str | os.PathLike[str] | Sequence[Question | Mapping[str, Any]],
    *,
    settings: Settings | None = None,
    ks: Sequence[int] = KS,
    reps: int = 2000,
    seed: int = 0,
    show_progress: bool = False,
    answers: str = "any",
) -> Report:
    """Measure MeVe against the top-k frontier on ``questions`` over ``corpus``.

    ``corpus``: a :class:`meve.MeVe` (its own config is the arm "this config"), or passages (a list
    of texts, or a dict id -> text) indexed here with the defaults. ``questions``: a JSONL file
    (:mod:`meve.evaluate.questions`), or its lines as dicts, or :class:`Question` records; every
    check runs before any model loads (evidence ids against the corpus's ids). ``settings``:
    label -> MeVeConfig fields (or a MeVeConfig) to run instead of the MeVe's own config. Each top-k
    curve is k in ``ks``; intervals are paired bootstraps of ``reps`` draws. ``answers``: how a
    question's several answer strings count, "any" (alternatives) or "all" (each must occur;
    :data:`meve.evaluate.metrics.ANSWER_MATCHES`); the report says which."""
    qs = as_questions(questions)
    check_match(answers)
    if isinstance(corpus, Mapping):  # passages given as text: refuse a wrong id before they are embedded
        check_evidence_ids(qs, [str(k) for k in corpus])
    with opened(corpus) as meve:
        rankings = Rankings(meve)
        check_evidence_ids(qs, rankings.text)
        items = targets(qs, rankings.text, answers)
        chosen = {label: _overrides(s) for label, s in settings.items()} if settings else {"this config": {}}
        first = _timed(meve, items[0].text, next(iter(chosen.values())))  # before anything else ran: what a first call costs
        total = len(items) * (len(BASELINES) * len(ks) + len(chosen))
        with progress(total, show_progress, "meve: evaluating") as tick:
            curves, arms = run_arms(rankings, items, chosen, ks=ks, reps=reps, seed=seed, tick=tick)
        for label, setting in chosen.items():
            warm = [_timed(meve, q.text, setting) for q in items[:LATENCY_CALLS]]
            arms[label]["latency"] = {"first_call_ms": round(first, 1), "warm_ms_p50": round(float(np.percentile(warm, 50)), 1), "warm_calls": len(warm)}
        notes = [f"intervals: paired bootstrap over the {len(items)} questions, {reps} draws, 95%", LATENCY_NOTE, *answer_note(qs, answers)]
        return Report(len(items), len(rankings.text), curves, arms, notes)


#: Whole ``MeVe.run`` calls timed per setting, as a user's call runs (the query embedded, models included).
LATENCY_CALLS = 20
LATENCY_NOTE = (
    "latency: `ms` is per question with its query vector computed once and shared by every setting and top-k curve "
    "(model time of the query's embedding excluded); `latency.first_call_ms` is the evaluation's first MeVe.run "
    "(it loads any model not yet loaded), `latency.warm_ms_p50` the median of whole MeVe.run calls on the first "
    f"{LATENCY_CALLS} questions afterwards, query embedding included"
)


def answer_note(questions: Sequence[Question], match: str) -> list[str]:
    """How the answer strings were counted, when any question has some."""
    if not any(q.answers for q in questions):
        return []
    other = "all" if match == "any" else "any"
    return [f"answers: {ANSWER_MATCHES[match]} (answers={match!r}; the other way: answers={other!r}, `meve evaluate --answers {other}`)"]


def _timed(meve: MeVe, query: str, setting: Mapping[str, Any]) -> float:
    t0 = time.perf_counter()
    meve.run(query, **setting)
    return (time.perf_counter() - t0) * 1000.0
