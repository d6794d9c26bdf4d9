"""The tune-ceiling study's analysis (benchmarks/tune_ceiling.py) on hand-made per-question scores:
a setting clearly better on dev and on test is found on every draw and beats the default; one that
is clearly better on dev only is found and loses on test; a grid of copies of the default ties.
Its per-question cache round-trips."""

from typing import Any

import numpy as np

from benchmarks import tune_ceiling
from meve.evaluate import frontier
from meve.evaluate.tune import GRID, shipped_default

DEFAULT = next(i for i, s in enumerate(GRID) if s == shipped_default())
SPECIAL = 0 if DEFAULT else 1
N = 120
WIGGLE = np.where(np.arange(N) % 2, 0.1, -0.1)  # per-question spread, so the bootstrap has something to draw


def _split(default: float, special: float | np.ndarray, others: float) -> dict[str, Any]:
    """Every setting at 150 tokens; a dense top-k curve through (100, 0.3), (200, 0.5), (300, 0.6)."""
    evidence = np.full((len(GRID), N), others)
    evidence[DEFAULT], evidence[SPECIAL] = default, special
    arms = np.stack([np.clip(evidence + WIGGLE, 0, 1), np.full_like(evidence, 150.0)], axis=-1)
    points = {
        "dense": [
            (k, np.stack([np.clip(np.full(N, e) + WIGGLE, 0, 1), np.full(N, t)], axis=-1)) for k, e, t in ((1, 0.3, 100.0), (2, 0.5, 200.0), (3, 0.6, 300.0))
        ]
    }
    return {"arms": arms, "points": points}


def _analyse(dev: dict[str, Any], test: dict[str, Any]) -> dict[str, Any]:
    return tune_ceiling.analyse({"s": {"dev": dev, "test": test}}, dev_size=50, draws=4, reps=200)["datasets"]["s"]


def test_a_setting_clearly_better_on_dev_and_test_is_chosen_on_every_draw_and_beats_the_default():
    better = _split(default=0.6, special=0.9, others=0.3)
    d = _analyse(better, better)
    assert d["ceiling"]["setting"] == GRID[SPECIAL] and abs(d["ceiling"]["over_default"] - 0.3) < 1e-6 and d["ceiling"]["ci95"][0] > 0
    assert d["gated_share"] == {"beats": 1.0, "ties": 0.0, "below": 0.0} and d["unchecked_share"]["beats"] == 1.0
    assert d["first_50"]["written"] == GRID[SPECIAL] and d["all_dev"]["setting"] == GRID[SPECIAL] and not d["all_dev"]["kept_default"]
    assert d["settings_above_default_on_test"] == 1
    # the lead-share rules take it too, and on the dev questions outside each draw it leads by the same 0.3
    assert all(d[f"lead_{c}_share"]["beats"] == 1.0 for c in tune_ceiling.LEVELS) and abs(d["gated_holdout_over_default"] - 0.3) < 1e-6


def test_each_set_gets_the_rule_with_the_best_mean_holdout_lead_on_the_other_sets():
    def held(unchecked: float, gated: float) -> dict[str, Any]:
        holdouts = {"unchecked_holdout_over_default": unchecked, "gated_holdout_over_default": gated}
        return {**holdouts, "unchecked_mean_over_default": 0.5, "gated_mean_over_default": -0.5, "unchecked_share": {}, "gated_share": {}}

    out = tune_ceiling._lodo_rule({"datasets": {"a": held(0.9, 0.0), "b": held(0.0, 0.2), "c": held(0.0, 0.2)}})["datasets"]
    assert out["a"]["lodo_rule"]["rule"] == "gated" and out["a"]["lodo_rule"]["test_over_default"] == -0.5  # b and c favour the check
    assert out["b"]["lodo_rule"]["rule"] == "unchecked"  # a and c: 0.45 against 0.1


def test_with_no_more_dev_questions_than_a_draw_there_is_one_draw_and_no_rule_to_choose():
    small = {k: v[:, :40] if k == "arms" else {n: [(kk, q[:40]) for kk, q in pts] for n, pts in v.items()} for k, v in _split(0.6, 0.9, 0.3).items()}
    out = tune_ceiling.analyse({"a": {"dev": small, "test": small}, "b": {"dev": small, "test": small}}, dev_size=50, draws=5, reps=200)
    assert all(d["draws"] == 1 and "lodo_rule" not in d and "gated_holdout_over_default" not in d for d in out["datasets"].values())


def test_the_study_gates_as_the_library_does():
    noisy = _split(default=0.6, special=0.6 + np.where(np.arange(N) % 3 == 0, 0.2, -0.09), others=0.3)
    for idx in (np.arange(50), np.arange(60, 120), np.arange(0, 120, 2)):
        picks = tune_ceiling._choose(noisy, idx, DEFAULT, 300)
        points = {n: [(k, q[idx]) for k, q in pts] for n, pts in noisy["points"].items()}
        lo, _ = frontier.difference_interval(noisy["arms"][picks["unchecked"], idx], noisy["arms"][DEFAULT, idx], points, reps=300)
        assert picks["gated"] == (picks["unchecked"] if lo > 0 and picks["unchecked"] != DEFAULT else DEFAULT)


def test_the_memory_rule_keeps_the_default_unless_the_best_is_clearly_better():
    rows = np.full((19, 60), 0.5)  # 18 settings, then MemoryConfig()
    rows[4] = 0.9
    assert tune_ceiling._memory_choose(rows, np.arange(60), reps=200) == {"gated": 4, "unchecked": 4}
    rows[4] = 0.5 + np.where(np.arange(60) % 2, 0.3, -0.28)  # +0.01 on average, spread 0.29
    assert tune_ceiling._memory_choose(rows, np.arange(60), reps=200) == {"gated": 18, "unchecked": 4}
    rows[4] = 0.5
    assert tune_ceiling._memory_choose(rows, np.arange(60), reps=200)["gated"] == 18  # a tie: the earliest setting, not clearly better


def test_a_lead_within_the_noise_on_dev_keeps_the_default_while_the_unchecked_best_takes_it():
    noisy = 0.6 + np.where(np.arange(N) % 3 == 0, 0.2, -0.09)  # +0.007 on average, spread 0.14
    d = _analyse(_split(default=0.6, special=noisy, others=0.3), _split(default=0.6, special=0.3, others=0.3))
    assert d["gated_share"]["ties"] == 1.0 and d["gated_kept_default"] == 1.0
    assert d["first_50"]["written"] == GRID[DEFAULT] and d["first_50"]["dev_best"] == GRID[SPECIAL]
    # a draw of 50 where the noise happens to lead takes it unchecked (the first 50 do), and then loses on test
    assert d["unchecked_share"]["beats"] == 0.0 and d["unchecked_share"]["below"] > 0


def test_when_every_setting_equals_the_default_every_draw_ties():
    same = _split(default=0.6, special=0.6, others=0.6)
    d = _analyse(same, same)
    assert d["gated_share"]["ties"] == 1.0 and d["unchecked_share"]["ties"] == 1.0 and d["all_dev"]["over_default"] == 0.0


def test_the_per_question_cache_round_trips(tmp_path):
    split = _split(default=0.6, special=0.9, others=0.3)
    tune_ceiling._save(tmp_path / "s.npz", split)
    back = tune_ceiling._load(tmp_path / "s.npz")
    np.testing.assert_array_equal(back["arms"], split["arms"])
    assert [k for k, _ in back["points"]["dense"]] == [1, 2, 3]
    np.testing.assert_array_equal(back["points"]["dense"][2][1], split["points"]["dense"][2][1])
