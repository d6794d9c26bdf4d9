"""The top-k frontier at equal tokens, a setting's margin over it, and paired bootstrap intervals.

The frontier is the best of the plain top-k curves (dense, BM25, hybrid) at a given token count:
each curve's upper envelope through (0, 0) and its k = 1..10 points, linearly interpolated. A
setting's margin is its evidence minus the frontier at its own mean tokens. The rule that chooses a
setting (:func:`choose`): the best worst-case margin over the question sets it is chosen on; ties
(within ``TIE``) go to the fewer tokens relative to each set's dense top-3. The benchmarks'
leave-one-dataset-out runs (``benchmarks/context.py``) and ``meve tune`` both choose with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "TIE",
    "Scores",
    "choose",
    "difference_draws",
    "difference_interval",
    "envelope_at",
    "frontier_at",
    "gain_interval",
    "margin",
    "margin_interval",
    "tokens_for",
]

TIE = 0.002
Row = Mapping[str, Any]


def _points(rows: Sequence[Row], metric: str) -> list[tuple[float, float]]:
    return sorted((float(r["tokens"]), float(r[metric])) for r in rows)


def envelope_at(rows: Sequence[Row], tokens: float, metric: str = "evidence") -> float:
    """A curve's best ``metric`` at <= ``tokens`` mean tokens, interpolated between its points."""
    best = 0.0
    for (t0, a0), (t1, a1) in itertools.pairwise([(0.0, 0.0), *_points(rows, metric)]):
        if t1 <= tokens:
            best = max(best, a1)
        elif t0 <= tokens < t1:
            best = max(best, a0 + (a1 - a0) * (tokens - t0) / (t1 - t0))
    return best


def frontier_at(curves: Mapping[str, Sequence[Row]], tokens: float, metric: str = "evidence") -> float:
    """The best top-k curve's ``metric`` at ``tokens``."""
    return max(envelope_at(rows, tokens, metric) for rows in curves.values())


def tokens_for(curves: Mapping[str, Sequence[Row]], value: float, metric: str = "evidence") -> float | None:
    """The fewest mean tokens at which some top-k curve reaches ``value`` (interpolated), or None."""
    best: float | None = None
    for rows in curves.values():
        for (t0, a0), (t1, a1) in itertools.pairwise([(0.0, 0.0), *_points(rows, metric)]):
            if a1 >= value and a1 > a0:
                t = t0 + (t1 - t0) * max(0.0, value - a0) / (a1 - a0) if a0 < value else t0
                best = t if best is None else min(best, t)
                break
    return best


def margin(row: Row, curves: Mapping[str, Sequence[Row]], metric: str = "evidence") -> float:
    """``row``'s metric minus the frontier at ``row``'s tokens."""
    return float(row[metric]) - frontier_at(curves, float(row["tokens"]), metric)


def choose(results: Sequence[Mapping[str, Row]], curves: Mapping[str, Mapping[str, Sequence[Row]]], reference: Mapping[str, float]) -> int:
    """The index of the setting with the best worst-case margin over the data sets in ``curves``
    (``results[i][dataset]`` is setting i's dev row); ties within TIE to the smaller mean of tokens
    over ``reference`` (each set's dense top-3 tokens)."""
    names = list(curves)
    worst = [min(margin(r[n], curves[n]) for n in names) for r in results]
    ratio = [sum(float(r[n]["tokens"]) / reference[n] for n in names) / len(names) for r in results]
    top = max(worst)
    return min((i for i, w in enumerate(worst) if w >= top - TIE), key=lambda i: (ratio[i], -worst[i]))


#: per question: (evidence, tokens)
Scores = Sequence[tuple[float, float]]


def _margin_draws(arms: Sequence[Scores], curves: Mapping[str, Sequence[tuple[int, Scores]]], reps: int, seed: int) -> np.ndarray:
    """(reps, len(arms)): each arm's margin on each bootstrap draw of the questions, the same draw
    for every arm and every top-k point (all were run on the same questions)."""
    a = [np.asarray(arm, dtype=np.float64) for arm in arms]
    pts = {name: [(k, np.asarray(q, dtype=np.float64)) for k, q in rows] for name, rows in curves.items()}
    if any(x.shape != a[0].shape for x in a) or any(q.shape != a[0].shape for rows in pts.values() for _, q in rows):
        raise ValueError("the arm and every top-k point must be scored on the same questions")
    rng = np.random.default_rng(seed)
    draws = np.empty((reps, len(a)))
    for r in range(reps):
        idx = rng.integers(0, len(a[0]), len(a[0]))
        resampled = {name: [{"k": k, "evidence": q[idx, 0].mean(), "tokens": q[idx, 1].mean()} for k, q in rows] for name, rows in pts.items()}
        for j, x in enumerate(a):
            mean = x[idx].mean(axis=0)
            draws[r, j] = margin({"evidence": mean[0], "tokens": mean[1]}, resampled)
    return draws


def margin_interval(
    arm: Scores, curves: Mapping[str, Sequence[tuple[int, Scores]]], *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """A paired bootstrap interval for :func:`margin`: the questions are resampled with replacement,
    the same draw for the arm and for every top-k point (all were run on the same questions), and
    the margin recomputed on the resampled means. ``arm``: the arm's per-question (evidence,
    tokens); ``curves``: each ranking's (k, per-question scores) points."""
    draws = _margin_draws([arm], curves, reps, seed)[:, 0]
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def difference_draws(arm: Scores, other: Scores, curves: Mapping[str, Sequence[tuple[int, Scores]]], *, reps: int = 2000, seed: int = 0) -> np.ndarray:
    """``arm``'s margin minus ``other``'s on each of ``reps`` paired bootstrap draws of the questions
    (the draws behind :func:`difference_interval`)."""
    draws = _margin_draws([arm, other], curves, reps, seed)
    return draws[:, 0] - draws[:, 1]


def difference_interval(
    arm: Scores, other: Scores, curves: Mapping[str, Sequence[tuple[int, Scores]]], *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """A paired bootstrap interval for ``arm``'s margin minus ``other``'s (both over the same
    frontier, on the same questions, each draw shared by both arms and every top-k point)."""
    lo, hi = np.quantile(difference_draws(arm, other, curves, reps=reps, seed=seed), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def gain_interval(
    arm: Sequence[float], baselines: Mapping[str, Sequence[float]], *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """A paired bootstrap interval for the arm's mean minus the best baseline's mean (the memory
    benchmark's gain over the best fill at one budget): the same resampled questions for every
    system, and the best baseline chosen again on each draw."""
    a = np.asarray(arm, dtype=np.float64)
    base = np.asarray([list(v) for v in baselines.values()], dtype=np.float64)
    if base.shape[1:] != a.shape:
        raise ValueError("the arm and every baseline must be scored on the same questions")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), (reps, len(a)))
    draws = a[idx].mean(axis=1) - base[:, idx].mean(axis=2).max(axis=0)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
