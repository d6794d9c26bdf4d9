"""BENCHMARKS.md's lines for issue 77 #1 (the budget that keeps the best): the rule each left-out set
gets is the one with the higher mean dev margin over the other sets, and a target reads MET only
when its figure holds."""

from __future__ import annotations

from benchmarks.long_budget import choose, rule
from benchmarks.report import long_budget_facts
from meve.pipeline import runner


def _arm(margin: float) -> dict[str, float]:
    return {"evidence": 0.5, "tokens": 400.0, "margin": margin, "empty_rate": 0.0, "cut_rate": 0.1}


def _results(diff_ci: tuple[float, float]) -> dict:
    dev = {"passages": {s: {"arms": {"skip": _arm(m), "keep_best": _arm(m + d)}} for s, m, d in (("a", 0.1, 0.02), ("b", 0.2, -0.01), ("c", 0.0, 0.03))}}
    test_arms = {"skip": _arm(0.1), "keep_best": _arm(0.1), "paper": _arm(0.05), "no_verification": _arm(-0.2)}
    test = {"passages": {s: {"arms": test_arms, "keep_best_less_skip": {"mean": sum(diff_ci) / 2, "ci95": list(diff_ci)}} for s in "abc"}}
    return {"dev": dev, "test": test, "choices": {s: choose(dev, s) for s in "abc"}}


def test_each_left_out_set_gets_the_rule_with_the_higher_mean_dev_margin_over_the_others():
    d = _results((-0.01, 0.02))
    # Left out "c": a +0.02 and b -0.01 -> keep_best +0.005 above skip on average; left out "a": b -0.01, c +0.03 -> +0.01.
    assert d["choices"]["c"]["rule"] == "keep_best" and d["choices"]["a"]["rule"] == "keep_best"
    dev = {"passages": {s: {"arms": {"skip": _arm(0.1), "keep_best": _arm(0.1 + x)}} for s, x in (("a", -0.02), ("b", 0.01))}}
    assert choose(dev, "b")["rule"] == "skip"  # only a's dev margin counts, and it fell
    assert choose({"passages": {"a": {"arms": {"skip": _arm(0.1), "keep_best": _arm(0.1)}}}}, "b")["rule"] == "skip"  # a tie keeps the old rule


def test_a_short_passage_row_reads_met_only_when_its_interval_is_not_wholly_below_zero():
    assert all(t.startswith("- MET") for t in long_budget_facts(_results((-0.01, 0.02)))["targets"][:3])
    assert all(t.startswith("- MISSED") for t in long_budget_facts(_results((-0.03, -0.001)))["targets"][:3])


def test_the_rule_switch_restores_the_librarys_own_budget_phase():
    shipped = runner.budget_step
    with rule("skip"):
        assert runner.budget_step is not shipped
    assert runner.budget_step is shipped
