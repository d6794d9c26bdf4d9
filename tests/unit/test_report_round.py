"""BENCHMARKS.md facts for the round's memory and neighbours results: what the lines say follows the figures."""

from __future__ import annotations

from benchmarks.report_round import long_neighbours_facts, memory_fresh_facts, memory_paired_facts, memory_ranker_facts, memory_statements_facts


def _ranker(chosen: str) -> dict:
    row = {"best_fill": {"answerable": 0.5}, "shipped": {"margin": 0.02, "vs_shipped_ci95": [0.0, 0.0]}}
    row["ranker l2=0.001 whole"] = {"margin": 0.03, "vs_shipped_ci95": [-0.01, 0.02]}
    verdicts = {"shipped": {"mean_margin": 0.02, "vetoed_by": []}, "ranker l2=0.001 whole": {"mean_margin": 0.03, "vetoed_by": ["a at 256"]}}
    return {
        "settings": ["shipped", "ranker l2=0.001 whole"],
        "dev": {"a": {"256": row}},
        "rule": {"verdicts": verdicts, "chosen": chosen, "settings_tried": 2},
        "evidence_among_candidates": {"a": 1.0},
    }


def test_the_ranker_target_is_met_only_when_a_ranker_is_chosen():
    assert memory_ranker_facts(_ranker("shipped"))["target"].startswith("- MISSED")
    met = memory_ranker_facts(_ranker("ranker l2=0.001 whole"))
    assert met["target"].startswith("- MET") and "a at 256" in met["verdicts"] and "(-0.010 to +0.020)" in met["rows"]


def test_the_paired_memory_rows_give_each_change_and_the_mean_margins():
    before = {"a": {"256": {"answerable": 0.5, "best_fill": 0.4}, "512": {"answerable": 0.6, "best_fill": 0.6}}}
    after = {"a": {"256": {"answerable": 0.55, "best_fill": 0.4}, "512": {"answerable": 0.6, "best_fill": 0.6}}}
    facts = memory_paired_facts(before, after)
    assert (facts["before"], facts["after"]) == ("+0.0500", "+0.0750") and "+0.0500 |" in facts["rows"]


def test_the_neighbours_rows_show_both_settings_the_difference_and_the_joins():
    arm = {"evidence": 0.8, "tokens": 480.0, "margin": 0.3, "joins": 0, "joined_rate": 0.0}
    on = {**arm, "evidence": 0.81, "joins": 3, "joined_rate": 0.015}
    budget = {"arms": {"off": arm, "on": on}, "on_less_off": {"mean": 0.01, "ci95": [0.0, 0.02]}}
    d = {
        "test": {"llamaindex-1024": {"squad": {"budgets": {"three_chunks": budget}}}},
        "choices": {"squad": {"setting": "on", "dev_mean_margin": {"off": 0.1, "on": 0.11}}},
    }
    facts = long_neighbours_facts(d)
    assert "3 (0.01)" in facts["rows"] and "+0.0100 (+0.0000 to +0.0200)" in facts["rows"] and facts["choices"] == {"SQuAD": "on (off +0.1000, on +0.1100)"}


def test_the_statement_rows_give_the_test_change_with_its_interval_and_the_rules_verdicts():
    arm = {"answerable": 0.7, "margin": -0.1, "vs_before_ci95": [0.0, 0.0]}
    test = {"best_fill": 0.8, "before": arm, "shipped": {"answerable": 0.75, "margin": -0.05, "vs_before_ci95": [0.01, 0.09]}}
    verdicts = {"before": {"mean_margin": 0.02, "vetoed_by": []}, "H": {"mean_margin": 0.03, "vetoed_by": ["locomo at 256"]}}
    d = {"rule": {"verdicts": verdicts, "chosen": "before"}, "shipped_on_dev": {"shipped": {"mean_margin": 0.029}}, "test": {"prefeval": {"256": test}}}
    facts = memory_statements_facts(d)
    assert "+0.0500 (+0.010 to +0.090)" in facts["rows"] and "locomo at 256" in facts["verdicts"] and facts["shipped_dev"] == "+0.0290"


def test_the_fresh_set_rows_give_each_arms_margin_and_the_passs_change():
    arm = {"answerable": 0.4, "margin": -0.1, "vs_before_ci95": [0.0, 0.0]}
    shipped = {"answerable": 0.45, "margin": -0.05, "vs_before_ci95": [0.0, 0.1]}
    r = {"best_fill": 0.5, "before": arm, "paper": {**arm, "answerable": 0.3, "margin": -0.2}, "shipped": shipped}
    facts = memory_fresh_facts({"budgets": {"256": r}, "dropped": {"memorycode: no token": 3}})
    assert "0.4500 (-0.0500)" in facts["rows"] and "+0.0500 (+0.000 to +0.100)" in facts["rows"] and facts["dropped"] == "no token: 3"
