"""The per-query decisions of a rebuild (meve.memory.decide): whether the most recent turn goes in
first, with the reason the trace gives."""

from __future__ import annotations

import pytest

from meve.memory.decide import decide_recent, follow_up_words


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("why?", "why"),
        ("And her sister?", "And"),
        ("what about the second one?", "what about"),
        ("Is it cheaper?", "it"),
        ("Can you say more about that?", "that"),
    ],
)
def test_a_short_query_that_leans_on_the_turn_before_reads_as_a_follow_up(query: str, words: str) -> None:
    assert follow_up_words(query) == words
    keep, why = decide_recent("auto", query)
    assert keep is True and repr(words) in why


@pytest.mark.parametrize(
    "query",
    [
        "What did Caroline research?",
        "What is TARDIS?",
        # a pronoun in a question long enough to carry its own subject
        "When did Caroline go to the LGBTQ support group with her friends from work?",
    ],
)
def test_a_standalone_query_lets_the_recent_turn_compete(query: str) -> None:
    assert follow_up_words(query) is None
    assert decide_recent("auto", query) == (False, "the query stands alone: the most recent turns compete by relevance")


def test_keep_recent_true_and_false_ignore_the_query() -> None:
    assert decide_recent(True, "What is TARDIS?") == (True, "keep_recent=True")
    assert decide_recent(False, "why?") == (False, "keep_recent=False")


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("Continue", True),
        ("Summarize your last answer", True),
        ("Translate to French", True),
        ("Can you turn that into a checklist?", False),
        ("What did I tell you about my sister's job in Lisbon?", False),
    ],
)
def test_short_keeps_the_latest_exchange_for_a_query_of_at_most_six_words(query, kept):
    keep, why = decide_recent("short", query)
    assert keep is kept
    assert why.startswith("the query is short") if kept else "carries its own subject" in why
