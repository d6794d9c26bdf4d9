"""The minimal-context benchmark compares MeVe settings by the knobs that act, and picks a default by one rule."""

from benchmarks.common import acting
from benchmarks.minimal import CONFIG_AT_START, GRID


def test_idle_ratios_do_not_make_two_settings_differ() -> None:
    base = {"candidates": "dense", "tau": 0.1, "cut": "none", "n_min": 1, "prune": "none"}
    assert acting({**base, "cut_ratio": 0.5, "prune_ratio": 0.5}) == acting({**base, "cut_ratio": 0.8, "prune_ratio": 0.3}) == base


def test_ratios_that_act_are_kept() -> None:
    cfg = {"candidates": "dense", "tau": 0.3, "cut": "ratio", "cut_ratio": 0.8, "n_min": 3, "prune": "scorer", "prune_ratio": 0.5}
    assert acting(cfg) == cfg
    assert acting(cfg) != acting({**cfg, "cut_ratio": 0.9})


def test_meveconfig_defaults_are_a_setting_of_the_grid() -> None:
    # The shipped default was chosen from the grid, so it must be one of its settings.
    assert acting(CONFIG_AT_START) in [acting(cfg) for cfg in GRID]


def _dev(doc_rate: float, doc_tokens: float, flat_rate: float, flat_tokens: float) -> dict:
    dev = {
        "rule_metric": "answer_in_context",
        "reference": {"answer_in_context": 0.9, "tokens": 500.0},
        "meve_default": {"answer_in_context": doc_rate, "tokens": doc_tokens},
        "flat_default": {"answer_in_context": flat_rate, "tokens": flat_tokens},
    }
    return {"datasets": {"squad": {"dev": dev}}}


def test_dev_rule_between_documents_and_flat() -> None:
    from benchmarks.report import _dev_rule_between

    # Both meet the rule: fewer tokens wins.
    assert _dev_rule_between(_dev(0.9, 200, 0.95, 300)).endswith("prefers MeVe over documents.")
    # Only the flat default meets it: it wins despite more tokens.
    assert _dev_rule_between(_dev(0.8, 200, 0.95, 300)).endswith("prefers the flat default.")
    # Neither meets it: the smaller shortfall wins, then fewer tokens.
    assert _dev_rule_between(_dev(0.7, 200, 0.8, 300)).endswith("prefers the flat default.")
    assert _dev_rule_between(_dev(0.8, 300, 0.8, 200)).endswith("prefers the flat default.")


def _grid(*rows: tuple[float, float]) -> dict:
    ref = {"answer_in_context": None, "sent_recall": 0.95, "tokens": 600.0}
    return {"dev": {"reference": ref, "meve_grid": [{"answer_in_context": None, "sent_recall": r, "tokens": t} for r, t in rows]}}


def test_dev_reach_says_whether_tuning_could_meet_a_target() -> None:
    from benchmarks.report import _dev_reach

    # HotpotQA: within 1 point of the reference's dev rate, with <= 50% of its tokens.
    none = _dev_reach("hotpotqa", _grid((0.8, 700), (0.7, 200)))
    assert "none of the 2 settings tried reaches the rate at any token count: the best is 0.800 (700 tokens)" in none
    assert "1 of the 2 settings tried reach the rate, none within the token share (the fewest tokens among them: 67%)" in _dev_reach(
        "hotpotqa", _grid((0.945, 400), (0.7, 200))
    )
    met = _dev_reach("hotpotqa", _grid((0.945, 400), (0.96, 290), (0.95, 250)))
    assert "2 of the 3 settings tried meet both conditions (the fewest tokens: 250, 42% of the reference's, at +0.000)" in met
    assert _dev_reach("hotpotqa", {"dev": {}}) == ""
