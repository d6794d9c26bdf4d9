"""benchmarks/memory_follow.py: the classifier stands in for the cosine bar only, a short query
still leans by its length, and the rule that would ship it reads margins, vetoes and reply coverage."""

from __future__ import annotations

import numpy as np

from benchmarks import memory_follow as mf
from meve.memory.decide import Nearby


def model(nearest_weight: float, bias: float) -> mf.Model:
    return mf.Model(np.zeros(4), np.ones(4), np.asarray([0.0, 0.0, nearest_weight, 0.0]), bias, {})


def test_a_short_query_leans_by_its_length_whatever_the_classifier_says():
    never = mf.learned_leans(model(0.0, -50.0))  # P(follow-up) ~ 0 for every long query
    assert never("Continue", Nearby(True, 1.0), 0.3)[0] is True
    long = "Can you summarize what you just said in a few lines?"
    assert never(long, Nearby(True, 0.1), 0.3) == (False, "the learned follow-up classifier gives 0.00")
    assert never(long, Nearby(False, 0.1), None)[0] is True  # no cosine to read: the words decide, as shipped
    near = mf.learned_leans(model(-20.0, 6.0))
    assert near(long, Nearby(True, 0.1), 0.3)[0] is True and near(long, Nearby(True, 0.6), 0.3)[0] is False


def test_the_rule_ships_only_without_a_lower_mean_a_veto_or_less_reply_kept():
    def row(margin, ci_hi, cov_before, cov_after, before_margin=0.1):
        return {
            "shipped": {"margin": before_margin, "probe_coverage": cov_before},
            "learned": {"margin": margin, "vs_shipped_ci95": [-0.1, ci_hi], "probe_coverage": cov_after},
        }

    good = {"a": {"256": row(0.12, 0.05, 0.5, 0.6)}, "b": {"256": row(0.1, 0.0, 1.0, 1.0)}}
    assert mf.verdict(good)["ships"] is True
    assert mf.verdict({"a": {"256": row(0.09, 0.05, 0.5, 0.9)}})["ships"] is False  # a lower mean margin
    assert mf.verdict({"a": {"256": row(0.2, -0.01, 0.5, 0.9)}})["vetoed_by"] == ["a at 256"]
    assert mf.verdict({"a": {"256": row(0.2, 0.05, 0.5, 0.4)}})["less_reply_kept"] == ["a at 256"]
