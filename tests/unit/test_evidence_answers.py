"""The benchmarks' answer test: whole normalised words, not substrings."""

from benchmarks.harness.metrics import answer_in


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
