"""The per-query decisions of a rebuild (meve.memory.decide): whether the most recent turn goes in
first, with the reason the trace gives."""

from __future__ import annotations

import pytest

from meve import MemoryConfig, MomentaryMemory, SentenceTransformerEmbedder
from meve.memory import signals
from meve.memory.decide import Nearby, decide_recent, follow_up_words, leans_on_latest

SUBJECT = (False, "the query has 9 words (over 6) and carries its own subject")


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
    keep, why = decide_recent("auto", query, SUBJECT)
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
    assert decide_recent("auto", query, SUBJECT) == (False, "the query stands alone: the most recent turns compete by relevance")


def test_keep_recent_true_and_false_ignore_the_query() -> None:
    assert decide_recent(True, "What is TARDIS?", SUBJECT) == (True, "keep_recent=True")
    assert decide_recent(False, "why?", (True, "short")) == (False, "keep_recent=False")


@pytest.mark.parametrize(
    ("query", "nearby", "kept", "why"),
    [
        ("Continue", Nearby(True, 0.9), True, "the query is short (1 words, at most 6)"),
        ("Translate to French", Nearby(True, 0.9), True, "the query is short (3 words, at most 6)"),
        # Without a cosine (follow_up_cosine None, or nothing searched) the words decide; with one, the cosine does:
        # "allergy" and "allergic" stem apart, but the fact is near (0.61), so the question carries its own subject.
        ("Can you turn that into a checklist?", Nearby(False, None), True, "no turn before the latest exchange holds a word"),
        ("Which foods must I avoid because of my allergy?", Nearby(False, 0.61), False, "the query has 9 words (over 6) and carries its own subject"),
        (
            "Please rewrite the whole thing in a friendlier tone",
            Nearby(True, 0.18),
            True,
            "no turn before the latest exchange is near the query (best cosine 0.18, under follow_up_cosine 0.3)",
        ),
        ("Please rewrite the whole thing in a friendlier tone", Nearby(True, None), False, "the query has 9 words (over 6) and carries its own subject"),
        ("What did I tell you about my sister's job in Lisbon?", Nearby(True, 0.61), False, "the query has 11 words (over 6) and carries its own subject"),
    ],
)
def test_short_keeps_the_latest_exchange_for_a_query_that_leans_on_it(query, nearby, kept, why):
    leans = leans_on_latest(query, nearby, 0.3)
    keep, reason = decide_recent("short", query, leans)
    assert keep is kept and reason.startswith(why)
    assert reason.endswith("the most recent turns compete by relevance") is not kept


def test_the_cosine_rule_is_off_with_none():
    assert leans_on_latest("Please rewrite the whole thing in a friendlier tone", Nearby(True, 0.05), None)[0] is False


def test_the_default_follow_up_cosine_warns_once_for_an_embedder_not_chosen_on(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signals, "_warned", set())
    default = MemoryConfig()
    with caplog.at_level("WARNING", logger="meve"):
        assert signals.warn_if_unfitted(default, "e5-large-v2")
        assert not signals.warn_if_unfitted(default, "e5-large-v2")  # once per embedder in a process
        assert not signals.warn_if_unfitted(default, "all-MiniLM-L6-v2 (int8)")  # the model it was chosen on
        assert not signals.warn_if_unfitted(MemoryConfig(follow_up_cosine=0.45), "bge-small")  # a value the user set for it
        assert not signals.warn_if_unfitted(MemoryConfig(follow_up_cosine=None), "bge-small")  # the rule off
        assert not signals.warn_if_unfitted(MemoryConfig(keep_recent="auto", user_statements=False), "bge-small")  # the cosine unused
        assert signals.warn_if_unfitted(MemoryConfig(keep_recent="auto"), "bge-small-2")  # the user-statement pass reads it too
        assert signals.warn_if_unfitted(MemoryConfig(keep_recent=True), "bge-small")  # used by True too
    assert caplog.text.count("follow_up_cosine 0.3") == 3 and "'e5-large-v2'" in caplog.text and "None" in caplog.text


def test_a_memory_with_another_embedder_says_the_default_cosine_is_not_its_scale(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signals, "_warned", set())
    with caplog.at_level("WARNING", logger="meve"):  # no model loads until an embedder encodes
        MomentaryMemory("warned", embedders=[SentenceTransformerEmbedder(name="my-embedder")]).close()
        MomentaryMemory("quiet", embedders=[SentenceTransformerEmbedder(name="my-other")], config=MemoryConfig(follow_up_cosine=None)).close()
        MomentaryMemory("default", embedders=[SentenceTransformerEmbedder()]).close()
        cfg = MemoryConfig(keep_recent="auto", user_statements=False)
        auto = MomentaryMemory("auto", embedders=[SentenceTransformerEmbedder(name="per-call")], config=cfg)
        assert "'per-call'" not in caplog.text  # the rule unused by its config
        auto.add("We talked about the garden.")  # a turn to search: the rule compares the query's cosines with it
        assert "'per-call'" not in caplog.text
        auto.reconstruct("What did we say about the garden last week?", keep_recent="short")  # ... until a call applies it
        auto.close()
    assert "'my-embedder'" in caplog.text and "'my-other'" not in caplog.text and "'per-call'" in caplog.text
    assert caplog.text.count("follow_up_cosine 0.3") == 2
