"""The minimal-context benchmark compares MeVe settings by the knobs that act."""

from benchmarks.common import acting
from benchmarks.minimal import CONFIG_AT_START, GRID


def test_idle_ratios_do_not_make_two_settings_differ() -> None:
    base = {"candidates": "dense", "tau": 0.1, "cut": "none", "n_min": 1, "prune": "none"}
    assert acting({**base, "cut_ratio": 0.5, "prune_ratio": 0.5}) == acting({**base, "cut_ratio": 0.8, "prune_ratio": 0.3}) == base


def test_ratios_that_act_are_kept() -> None:
    cfg = {"candidates": "dense", "tau": 0.3, "cut": "ratio", "cut_ratio": 0.8, "n_min": 3, "prune": "verifier", "prune_ratio": 0.5}
    assert acting(cfg) == cfg
    assert acting(cfg) != acting({**cfg, "cut_ratio": 0.9})


def test_meveconfig_defaults_are_a_setting_of_the_grid() -> None:
    # The shipped default was chosen from the grid, so it must be one of its settings.
    assert acting(CONFIG_AT_START) in [acting(cfg) for cfg in GRID]
