"""The leave-one-dataset-out arithmetic the context benchmark reports with: the frontier, a
setting's margin over it, and the margin's paired bootstrap interval."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.harness.lodo import frontier_at, gain_interval, margin, margin_interval
from meve.evaluate.frontier import difference_interval


def _curve(per_k: list[list[tuple[float, float]]]) -> list[tuple[int, list[tuple[float, float]]]]:
    return [(k + 1, scores) for k, scores in enumerate(per_k)]


def _means(points: list[tuple[int, list[tuple[float, float]]]]) -> list[dict[str, float]]:
    return [{"k": k, "evidence": float(np.mean([e for e, _ in q])), "tokens": float(np.mean([t for _, t in q]))} for k, q in points]


def test_the_frontier_interpolates_between_top_k_points_and_takes_the_best_curve():
    dense = [{"k": 1, "evidence": 0.4, "tokens": 100.0}, {"k": 2, "evidence": 0.6, "tokens": 200.0}]
    curves = {"dense": dense, "bm25": [{"k": 1, "evidence": 0.5, "tokens": 150.0}]}
    assert frontier_at(curves, 50.0) == pytest.approx(0.2)  # dense, from (0, 0) to its top-1
    assert frontier_at(curves, 160.0) == pytest.approx(0.52)  # dense between its points beats bm25's 0.5
    assert margin({"evidence": 0.7, "tokens": 200.0}, curves) == pytest.approx(0.1)


def test_an_arm_on_the_curve_question_by_question_has_a_zero_interval():
    rng = np.random.default_rng(1)
    top1 = [(float(rng.integers(0, 2)), float(t)) for t in rng.integers(80, 120, 60)]
    top2 = [(max(e, float(rng.integers(0, 2))), t * 2) for e, t in top1]
    points = {"dense": _curve([top1, top2])}
    lo, hi = margin_interval(top2, points, reps=300)
    assert lo == pytest.approx(0.0) and hi == pytest.approx(0.0)


def test_the_interval_brackets_the_margin_and_excludes_zero_only_when_the_gain_is_steady():
    rng = np.random.default_rng(2)
    tokens = [float(t) for t in rng.integers(90, 110, 200)]
    top1 = [(float(rng.random() < 0.4), t) for t in tokens]
    points = {"dense": _curve([top1])}
    steady = [(1.0 if e == 1.0 or rng.random() < 0.5 else 0.0, t) for e, t in top1]  # never below top-1, often above
    lo, hi = margin_interval(steady, points, reps=500)
    point = margin(_means([(1, steady)])[0], {"dense": _means(points["dense"])})
    assert 0.0 < lo <= point <= hi
    noisy = [(float(rng.random() < 0.4), t) for t in tokens]  # same rate, other questions: no steady gain
    lo, hi = margin_interval(noisy, points, reps=500)
    assert lo < 0.0 < hi


def test_scores_on_other_questions_are_refused():
    with pytest.raises(ValueError, match="same questions"):
        margin_interval([(1.0, 10.0)] * 3, {"dense": _curve([[(1.0, 10.0)] * 4])}, reps=10)
    with pytest.raises(ValueError, match="same questions"):
        difference_interval([(1.0, 10.0)] * 4, [(1.0, 10.0)] * 3, {"dense": _curve([[(1.0, 10.0)] * 4])}, reps=10)


def test_the_difference_of_two_margins_is_paired_and_excludes_zero_only_for_a_steady_gain():
    rng = np.random.default_rng(4)
    tokens = [float(t) for t in rng.integers(90, 110, 200)]
    top1 = [(float(rng.random() < 0.4), t) for t in tokens]
    points = {"dense": _curve([top1])}
    assert difference_interval(top1, top1, points, reps=200) == (0.0, 0.0)  # an arm against itself, on every draw
    steady = [(1.0 if e == 1.0 or rng.random() < 0.5 else 0.0, t) for e, t in top1]
    lo, hi = difference_interval(steady, top1, points, reps=500)
    assert 0.0 < lo < hi and difference_interval(top1, steady, points, reps=500) == pytest.approx((-hi, -lo))
    noisy = [(float(rng.random() < 0.4), t) for t in tokens]  # as good on average, on other questions
    lo, hi = difference_interval(noisy, top1, points, reps=500)
    assert lo < 0.0 < hi
    # paired: the margin of each arm alone is wider than the difference between two arms that share their errors
    shifted = [(1.0 if e == 1.0 or i % 10 == 0 else 0.0, t) for i, (e, t) in enumerate(steady)]
    d_lo, d_hi = difference_interval(shifted, steady, points, reps=500)
    m_lo, m_hi = margin_interval(shifted, points, reps=500)
    assert d_hi - d_lo < m_hi - m_lo


def test_a_gain_over_the_best_fill_takes_the_best_fill_again_on_every_draw():
    rng = np.random.default_rng(3)
    fill_a = [float(x) for x in rng.random(150) < 0.6]
    fill_b = [float(x) for x in rng.random(150) < 0.6]  # as good on average: the max over two noisy fills is biased up
    lo, hi = gain_interval(fill_a, {"a": fill_a, "b": fill_b}, reps=500)
    assert hi <= 0.0  # the arm is one of the fills: it never beats the best of them
    better = [max(x, float(rng.random() < 0.5)) for x in fill_a]
    lo, hi = gain_interval(better, {"a": fill_a, "b": fill_b}, reps=500)
    assert 0.0 < lo < hi
    with pytest.raises(ValueError, match="same questions"):
        gain_interval([1.0, 0.0], {"a": [1.0, 0.0, 1.0]})
