""":func:`tune`: choose a MeVe setting for a user's corpus on a dev split of their questions, and
report it on the test split beside the shipped default and the top-k frontier.

The protocol (the benchmarks' own, ``benchmarks/context.py``, on one question set):

1. The questions are split by a fixed hash of each one's id (its text when it has none):
   :func:`meve.evaluate.questions.split_of`. Fewer than :data:`MIN_QUESTIONS` questions, or fewer
   than :data:`MIN_SPLIT` on either side, is too few to choose and report on: the default is kept
   and the report says why (it still shows the default against the frontier on every question).
2. On dev: the dense, BM25 and hybrid top-k curves (k = 1..10) and every setting of :data:`GRID`
   (48 settings: the knobs and values the shipped default was chosen among). The choice is the
   setting with the best margin over the dev frontier, ties within 0.002 to the fewer tokens
   (:func:`meve.evaluate.frontier.choose`), and it replaces the shipped default only when it is
   clearly better on dev: the paired bootstrap 95% interval of its dev margin minus the default's
   lies above zero. Otherwise the default is kept and the report says so, with both dev margins.
3. On test: the choice and the shipped default (``MeVeConfig()``'s values of the same knobs), each
   with its margin over the test frontier and a paired bootstrap 95% interval (the default alone
   when it was kept).

The config written is the MeVe's own config with the choice's knobs (the default's, when kept).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meve.core.config import MeVeConfig
from meve.evaluate import frontier
from meve.evaluate.arms import BASELINES, KS, Rankings, Scorable
from meve.evaluate.evaluation import Corpus, answer_note, opened, progress, run_arms
from meve.evaluate.metrics import check_match
from meve.evaluate.questions import Question, as_questions, check_evidence_ids, split_questions, targets
from meve.evaluate.report import Points, Report, measure_arm, measure_curves, reference_tokens

__all__ = ["GRID", "KNOBS", "MIN_QUESTIONS", "MIN_SPLIT", "Choice", "TuneResult", "choose_setting", "shipped_default", "tune"]

MIN_QUESTIONS = 20
MIN_SPLIT = 8
#: The MeVeConfig fields the grid varies.
KNOBS = ("candidates", "tau", "cut", "cut_ratio", "coverage", "coverage_floor", "n_min", "prune", "prune_ratio", "prune_gate", "theta_redundancy")
# 2 candidate sources x 6 verification rules (tau alone at four values, and two per-query cuts at
# tau 0.1) x query coverage off/on x sentence pruning off/on = 48 settings; n_min 1 and the
# redundancy threshold 0.95 throughout (benchmarks/context.py says why the threshold left the grid).
GRID: list[dict[str, Any]] = [
    {"candidates": cand, "tau": tau, "cut": cut, "cut_ratio": 0.8, "coverage": cov, "coverage_floor": 0.05 if cov else 0.0, "n_min": 1}
    | {"prune": prune, "prune_ratio": 0.5, "prune_gate": 0.2, "theta_redundancy": theta}
    for cand, (tau, cut), cov, prune, theta in itertools.product(
        ("dense", "hybrid"),
        ((0.1, "none"), (0.3, "none"), (0.5, "none"), (0.7, "none"), (0.1, "gap"), (0.1, "ratio")),
        (0.0, 0.3),
        ("none", "scorer"),
        (0.95,),
    )
]


def shipped_default() -> dict[str, Any]:
    """``MeVeConfig()``'s values of the grid's knobs."""
    default = MeVeConfig()
    return {k: getattr(default, k) for k in KNOBS}


@dataclass
class Choice:
    """What :func:`choose_setting` decided on dev: ``index`` (in the grid: the choice; None when the
    incumbent was kept and is not in the grid), ``best`` (the grid's best by dev margin, before the
    incumbent's check), ``rows`` (every grid setting's dev row with its margin), ``curves`` (the dev
    top-k curves) and, when an incumbent was given, ``over_incumbent`` (the best's dev margin minus
    the incumbent's, with its paired bootstrap 95% interval) and ``kept_incumbent``."""

    index: int | None
    best: int
    rows: list[dict[str, Any]]
    curves: dict[str, list[dict[str, Any]]]
    over_incumbent: tuple[float, tuple[float, float]] | None = None
    kept_incumbent: bool = False


def _position(grid: Sequence[Mapping[str, Any]], setting: Mapping[str, Any]) -> int | None:
    """Where ``setting`` stands in ``grid`` (the same knobs and values), or None."""
    return next((i for i, s in enumerate(grid) if dict(s) == dict(setting)), None)


def choose_setting(
    rankings: Rankings,
    dev: Sequence[Scorable],
    grid: Sequence[Mapping[str, Any]] = GRID,
    *,
    incumbent: Mapping[str, Any] | None = None,
    reps: int = 2000,
    seed: int = 0,
    tick: Callable[[], Any] | None = None,
) -> Choice:
    """Step 2: the setting with the best margin over the dev frontier. With an ``incumbent`` (what
    ships today), the best replaces it only when the paired bootstrap 95% interval of the best's dev
    margin minus the incumbent's lies above zero: among 48 settings on a few dozen questions the best
    is partly chosen for its luck, and the incumbent was chosen on far more questions."""
    counter = rankings.meve.token_counter
    points: Points = {}
    curves = measure_curves(rankings, dev, counter, points=points, tick=tick)
    rows, scores = [], []
    for setting in grid:
        row, per_question = measure_arm(rankings, dev, counter, setting, tick=tick)
        rows.append({**row, "margin": round(frontier.margin(row, curves), 4)})
        scores.append(per_question)
    best = frontier.choose([{"dev": r} for r in rows], {"dev": curves}, {"dev": reference_tokens(curves)})
    if incumbent is None:
        return Choice(best, best, rows, curves)
    at = _position(grid, incumbent)
    if at is not None:
        inc_row, inc_scores = rows[at], scores[at]
    else:
        inc_row, inc_scores = measure_arm(rankings, dev, counter, incumbent, tick=tick)
    diff = frontier.margin(rows[best], curves) - frontier.margin(inc_row, curves)
    interval = (0.0, 0.0) if best == at else frontier.difference_interval(scores[best], inc_scores, points, reps=reps, seed=seed)
    kept = interval[0] <= 0
    return Choice(at if kept else best, best, rows, curves, (round(diff, 4), (round(interval[0], 4), round(interval[1], 4))), kept)


@dataclass
class TuneResult:
    """What :func:`tune` chose and measured: ``config`` (the MeVeConfig to ship: the choice, or the
    default's knobs when there were too few questions or the best on dev was not clearly better),
    ``chosen`` (the grid setting written, or None when the default was kept: the report's ``chosen``
    then holds the default's knobs, with ``kept_default`` true), ``report`` (the test split: the choice, the default and
    the top-k curves), ``dev`` (every grid setting's dev row) and ``reason`` (why the default was
    kept, or None)."""

    config: MeVeConfig
    chosen: dict[str, Any] | None
    report: Report
    dev: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None

    def save(self, path: str | os.PathLike[str]) -> dict[str, Path]:
        """Write the config as JSON at ``path`` (``MeVe(config=path)``, ``meve query --config``,
        both adapters' ``config=``) and the report beside it: ``<stem>.report.{json,md,html,png}``."""
        from meve.pipeline.config_file import write_config

        out = write_config(self.config, path)
        return {"config": out, **self.report.save(out.parent, f"{out.stem}.report")}


def _too_few(n: int, dev: int, test: int) -> str | None:
    if n < MIN_QUESTIONS:
        return f"{n} questions: tuning needs at least {MIN_QUESTIONS} (a dev split to choose on and a test split to report on); the default is kept"
    if min(dev, test) < MIN_SPLIT:
        return f"the split gave {dev} dev and {test} test questions: each needs at least {MIN_SPLIT}; the default is kept"
    return None


def tune(
    corpus: Corpus,
    questions: str | os.PathLike[str] | Sequence[Question | Mapping[str, Any]],
    *,
    grid: Sequence[Mapping[str, Any]] = GRID,
    incumbent: Mapping[str, Any] | None = None,
    reps: int = 2000,
    seed: int = 0,
    show_progress: bool = False,
    answers: str = "any",
) -> TuneResult:
    """Choose a setting among ``grid`` on the dev split of ``questions`` and report it on the test
    split (module docstring). ``corpus`` and ``questions`` as :func:`meve.evaluate.evaluate`;
    ``incumbent``: the setting kept unless the dev best is clearly better (MeVeConfig fields;
    default: the shipped default's knobs), reported as "default"; ``answers`` as :func:`meve.evaluate.evaluate`."""
    qs = as_questions(questions)
    check_match(answers)
    if isinstance(corpus, Mapping):  # passages given as text: refuse a wrong id before they are embedded
        check_evidence_ids(qs, [str(k) for k in corpus])
    dev_qs, test_qs = split_questions(qs)
    reason = _too_few(len(qs), len(dev_qs), len(test_qs))
    with opened(corpus) as meve:
        rankings = Rankings(meve)
        check_evidence_ids(qs, rankings.text)
        default = dict(incumbent) if incumbent is not None else shipped_default()
        split = {"split": {"dev": len(dev_qs), "test": len(test_qs), "rule": "sha256 of the id (the text when none) even: dev"}}
        if reason is not None:
            items = targets(qs, rankings.text, answers)
            with progress(len(items) * (len(BASELINES) * len(KS) + 1), show_progress, "meve: evaluating the default") as tick:
                curves, arms = run_arms(rankings, items, {"default": default}, reps=reps, seed=seed, tick=tick)
            notes = [reason, *answer_note(qs, answers)]
            report = Report(len(items), len(rankings.text), curves, arms, notes, {**split, "grid_size": len(grid), "chosen": default, "kept_default": True})
            return TuneResult(meve.config.replace(**default), None, report, reason=reason)
        dev, test = targets(dev_qs, rankings.text, answers), targets(test_qs, rankings.text, answers)
        extra_dev = 0 if _position(grid, default) is not None else 1  # the default is measured apart when the grid lacks it
        runs = len(dev) * (len(BASELINES) * len(KS) + len(grid) + extra_dev) + len(test) * (len(BASELINES) * len(KS) + 2)
        with progress(runs, show_progress, "meve: tuning") as tick:
            choice = choose_setting(rankings, dev, grid, incumbent=default, reps=reps, seed=seed, tick=tick)
            best = dict(grid[choice.best])
            arms_to_run = {"default": default} if choice.kept_incumbent else {"tuned": best, "default": default}
            tick.expect(runs - len(test) * (2 - len(arms_to_run)))  # the total counted two test arms
            curves, arms = run_arms(rankings, test, arms_to_run, reps=reps, seed=seed, tick=tick)
    result = _result(meve.config, choice, grid, default, curves, arms, split=split, sizes=(len(dev), len(test), len(rankings.text)), reps=reps)
    result.report.notes.extend(answer_note(qs, answers))
    return result


def _result(
    config: MeVeConfig,
    choice: Choice,
    grid: Sequence[Mapping[str, Any]],
    default: dict[str, Any],
    curves: dict[str, list[dict[str, Any]]],
    arms: dict[str, dict[str, Any]],
    *,
    split: dict[str, Any],
    sizes: tuple[int, int, int],
    reps: int,
) -> TuneResult:
    """Step 3's result: the config written (the choice, or the default kept), the test report and its notes."""
    n_dev, n_test, passages = sizes
    best = dict(grid[choice.best])
    diff, (lo, hi) = choice.over_incumbent or (0.0, (0.0, 0.0))
    best_line = (
        f"the best of {len(grid)} settings on {n_dev} dev questions ({best}) has dev margin {choice.rows[choice.best]['margin']:+.4f}, "
        f"{diff:+.4f} over the default's (paired 95% interval {lo:+.4f} to {hi:+.4f})"
    )
    shipped = default if choice.kept_incumbent else best
    extra = {
        **split,
        "grid_size": len(grid),
        "chosen": shipped,
        "kept_default": choice.kept_incumbent,
        "dev_best": best,
        "dev_margin": choice.rows[choice.best]["margin"],
        "dev_over_default": [diff, [lo, hi]],
    }
    test_line = f"reported on {n_test} test questions it was not chosen on; intervals: paired bootstrap, {reps} draws, 95%"
    if choice.kept_incumbent:
        why = (
            f"{best_line}: the default is itself the best on dev, so it is kept"
            if choice.best == choice.index
            else f"{best_line}: not clearly better (the interval reaches zero), so the default is kept"
        )
        arms = {"tuned": arms["default"], **arms}  # the config written is the default: one run serves both rows
        report = Report(n_test, passages, curves, arms, [why, test_line], extra)
        return TuneResult(config.replace(**default), None, report, choice.rows, reason=why)
    notes = [f"chosen: {best_line}, clearly better", test_line]
    return TuneResult(config.replace(**best), best, Report(n_test, passages, curves, arms, notes, extra), choice.rows)
