"""The benchmarks' answer test: whole normalised words, not substrings."""

import pytest

from benchmarks.harness.metrics import answer_in
from meve.core.errors import InputError
from meve.evaluate.metrics import answer_score, check_match
from meve.evaluate.report import Report


def test_a_short_answer_is_not_found_inside_a_longer_word() -> None:
    assert not answer_in(["no"], "It is not known whether the north tower was rebuilt.")
    assert not answer_in(["Ann"], "The annual report names Anne Hathaway.")
    assert not answer_in(["20"], "It opened in 2004 with 120 rooms.")


def test_a_whole_word_answer_is_found_despite_case_punctuation_and_articles() -> None:
    assert answer_in(["no"], "Was it gin? No, it was vodka.")
    assert answer_in(["The Beatles"], "a record by beatles, released in 1969")
    assert answer_in(["U.S. Route 66"], "It ran along U.S. Route 66 until 1985.")
    assert answer_in(["20"], "It had 20 rooms.")


def test_any_of_several_gold_answers_counts_and_an_empty_one_never_does() -> None:
    assert answer_in(["Denver Broncos", "Broncos"], "The Broncos won.")
    assert not answer_in(["", "  "], "anything at all")
    assert not answer_in([], "anything at all")


def test_markdown_code_spans_links_and_snake_case_hold_the_answers_they_show() -> None:
    # Issue 65: "_" counted as a letter, so Markdown emphasis stuck to its words and twelve answers
    # standing in the Rust book's contexts were counted as misses.
    assert answer_in(["test double"], "A _test double_ stands in for another type during testing.")
    assert answer_in(["consuming adapters"], "Methods that call next are called *consuming adapters*.")
    assert answer_in(["Vec::new"], "Create one with `Vec::new()` or the `vec!` macro.")
    assert answer_in(["the Rust book"], "See [the Rust book](https://doc.rust-lang.org/book/) for more.")
    assert answer_in(["snake case"], "Functions use snake_case names.") and answer_in(["snake_case"], "Functions use snake case names.")
    assert answer_in(["**bold**"], "a bold claim")
    assert not answer_in(["case"], "Functions use snakecase names.")  # still whole words only


def test_the_meve_evaluate_matcher_is_the_benchmarks_one() -> None:
    import meve.evaluate.metrics

    assert answer_in is meve.evaluate.metrics.answer_in


def test_an_evidence_passage_with_answers_is_kept_by_its_answer_sentence_so_pruning_is_not_scored_zero() -> None:
    from meve.evaluate.metrics import evidence_recall
    from meve.evaluate.questions import Question, targets

    text = "Karl Drais lived in Mannheim. He built the running machine in 1817. It had no pedals."
    with_answers = Question(text="Who built it?", id="a", line=1, answers=("Karl Drais", "Drais"), evidence_ids=("p",))
    ids_only = Question(text="What had no pedals?", id="b", line=2, evidence_ids=("p",))
    a, b = targets([with_answers, ids_only], {"p": text})
    assert a.evidence == ("Karl Drais lived in Mannheim.",)  # the sentence holding an answer
    assert b.evidence == (text,)  # no answer strings: the whole passage, as before
    pruned = "Karl Drais lived in Mannheim. … It had no pedals."
    assert evidence_recall(a.evidence, pruned) == 1.0 and evidence_recall(b.evidence, pruned) == 0.0


def test_an_answer_with_no_word_left_matches_nothing_and_a_plus_or_hash_stays_in_its_word():
    # Issue 78 (smaller): an empty context "contained" the answer "A"; "C++" matched "Option C".
    from meve.evaluate.metrics import answer_in

    assert not answer_in(["A"], "") and not answer_in(["The"], "The cat sat.") and not answer_in(["."], "Anything.")
    assert not answer_in(["C++"], "Pick Option C.") and answer_in(["C++"], "Rust and C++ both compile ahead of time.")
    assert answer_in(["C#"], "written in C#.") and not answer_in(["C#"], "written in C.")
    assert answer_in(["NADP+"], "It reduces NADP+ to NADPH.") and answer_in(["6.7+"], "a magnitude of 6.7+ was felt")


def test_several_answer_strings_are_alternatives_unless_all_are_asked_for():
    context = "Karl Drais built the running machine in Mannheim."
    assert answer_score(["Karl Drais", "Paris"], context) == 1.0  # "any": one of them is enough
    assert answer_score(["Karl Drais", "Paris"], context, "all") == 0.5  # "all": the share that occur
    assert answer_score(["Karl Drais", "Mannheim"], context, "all") == 1.0
    with pytest.raises(InputError, match=r"answers='every': expected 'any' .* or 'all'"):
        check_match("every")


def test_the_report_leads_with_one_sentence_that_says_better_no_better_or_worse():
    def report(lo: float, hi: float) -> Report:
        arm = {"evidence": 0.8, "tokens": 300.0, "frontier_at_tokens": 0.7, "margin": (lo + hi) / 2, "margin_ci95": [lo, hi]}
        return Report(40, 100, {}, {"this config": arm})

    assert report(0.02, 0.18).verdict().startswith("MeVe (this config) is better than top-k at equal tokens on these 40 questions")
    assert "wholly above zero" in report(0.02, 0.18).verdict()
    assert report(-0.05, 0.25).verdict().startswith("MeVe (this config) is no better or worse than top-k") and "spans zero" in report(-0.05, 0.25).verdict()
    assert report(-0.3, -0.01).verdict().startswith("MeVe (this config) is worse than top-k") and "wholly below zero" in report(-0.3, -0.01).verdict()
    assert report(0.02, 0.18).to_dict()["verdict"] == report(0.02, 0.18).verdict()
