"""The recency anchor (issue 64): with ``MemoryConfig()`` the latest exchange is in the rebuilt
context for every short query ("Continue", "Translate to French"), through the core and through the
adapters' shared surface; with ``keep_recent=True`` for every query, cut to its share for a query of
its own subject; a reply longer than the room is cut to the part the query matches (its end for
"Continue")."""

from __future__ import annotations

import pytest

from meve import MemoryConfig
from meve.integration import Message, chat_context
from tests.unit.test_memory import mem

FOLLOW_UPS = [
    "Continue",
    "Summarize your last answer",
    "Go on",
    "Translate to French",
    "Say that again, shorter",
    "Why?",
    "Give me an example",
    "More",
    "ok",
    "Rewrite it as a list",
]
STORY = "The keeper Ivo lit the lamp at dusk and watched the ships pass the northern reef until morning."


def long_chat(m, reply: str = STORY) -> None:
    topics = ["my sister Ana lives in Lisbon", "I bake sourdough on Sundays", "my bike needs new brakes", "I am learning Rust"]
    for i in range(24):
        m.add(f"Tell me something about {topics[i % 4]}, part {i}.", "user")
        m.add(f"Here is part {i} about {topics[i % 4]}; " + "more words about it " * 6, "assistant")
    m.add("Write a two-line story about a lighthouse keeper.", "user")
    m.add(reply, "assistant")


@pytest.mark.parametrize("l_max", [64, 256])
def test_every_follow_up_keeps_the_reply_it_follows_by_default(l_max):
    m = mem()
    long_chat(m)
    for q in FOLLOW_UPS:
        ctx = m.reconstruct(q, l_max=l_max)
        assert STORY in ctx.text, (q, l_max, ctx.recent_reason)
        assert ctx.token_count == m.token_counter.count(ctx.text) <= l_max


def test_the_anchor_is_the_exchange_before_the_one_an_adapter_sends_verbatim():
    # chat_context stores the current message first and sends it verbatim: the anchor is the reply
    # before it, and no budget goes to the current message itself.
    for q in FOLLOW_UPS:
        m = mem()
        long_chat(m)
        history = [Message(t.role, t.text, f"id{t.seq}") for t in m.turns()]
        out = chat_context([*history, Message("user", q, f"now-{q}")], m, l_max=64)
        assert out[-1] == Message("user", q, f"now-{q}")
        assert [x.text for x in out[:-1]][-2:] == ["Write a two-line story about a lighthouse keeper.", STORY], q
        assert sum(x.text == q for x in out) == 1


def test_a_reply_longer_than_the_room_is_cut_to_what_the_query_asks_marked():
    m = mem(l_max=48)
    reply = (
        "Photosynthesis starts in the chloroplast. " + "Light reactions split water and make ATP. " * 20 + "Finally the Calvin cycle fixes carbon into sugar."
    )
    m.add("Explain photosynthesis.", "user")
    m.add(reply, "assistant")
    go_on = m.reconstruct("Continue").turns[-1]
    assert go_on.text.startswith("… ") and "Calvin cycle fixes carbon into sugar." in go_on.text  # its end, where it goes on
    assert go_on.metadata["meve_truncated"] is True and go_on.text.endswith(" […]")
    asked = m.reconstruct("Where does it start, the chloroplast?").turns[-1]
    assert asked.text.startswith("Photosynthesis starts in the chloroplast.") and "Calvin" not in asked.text
    calvin = m.reconstruct("What about the Calvin cycle?").turns[-1]
    assert "Calvin cycle" in calvin.text and "chloroplast" not in calvin.text


UNSAID = [
    "Can you turn that into a checklist, please?",
    "Rewrite the whole thing in a friendlier tone",
    "Make the lighthouse keeper's story rhyme and add a dog",  # its words are in the latest exchange only
]


def test_a_longer_follow_up_that_names_nothing_said_before_keeps_the_reply():
    # Over six words, but no turn before the latest exchange holds one of them, nor comes near: recall
    # has nothing to find, so the query is about what was just said (0.4.0 let the reply compete and lose).
    m = mem()
    long_chat(m)
    for q in UNSAID:
        ctx = m.reconstruct(q, l_max=64)
        assert STORY in ctx.text, (q, ctx.recent_reason)
        assert ctx.recent_reason.startswith("no turn before the latest exchange is near the query"), q
    said = m.reconstruct("Which new brakes does my bike need before the Sunday ride?", l_max=64)
    assert said.recent_reason.startswith("the query has 11 words (over 6) and carries its own subject"), said.recent_reason


def test_the_query_an_adapter_stored_first_is_not_what_was_said_before():
    # Adapters store the current message before the rebuild and skip it: its own words must not
    # make the query look as if it named something said earlier.
    for q in UNSAID:
        m = mem()
        long_chat(m)
        m.add(q, "user", turn_id="now")
        ctx = m.reconstruct(q, l_max=64, skip_ids=["now"])
        assert ctx.recent_reason.startswith("no turn before the latest exchange is near the query"), q
        assert [t.text for t in ctx.turns][-2:] == ["Write a two-line story about a lighthouse keeper.", STORY], q
        history = [Message(t.role, t.text, f"id{t.seq}") for t in m.turns()][:-1]
        out = chat_context([*history, Message("user", q, "now")], m, l_max=64)
        assert [x.text for x in out[:-1]][-2:] == ["Write a two-line story about a lighthouse keeper.", STORY], q


def test_auto_stays_an_option_and_loses_the_reply_for_follow_ups_its_list_misses():
    # What 0.2.0's default did: "Go on" reads as no follow-up, so the reply competes by relevance
    # and loses the budget to turns the query matches no better.
    m = mem()
    long_chat(m)
    contexts = {q: m.reconstruct(q, l_max=64, keep_recent="auto") for q in FOLLOW_UPS}
    lost = [q for q, ctx in contexts.items() if STORY not in ctx.text]
    assert lost and all(contexts[q].recent_reason.startswith("the query stands alone") for q in lost)
    assert MemoryConfig().keep_recent == "short" and MemoryConfig().recent_turns == 2


def test_the_default_is_what_the_memory_benchmark_records_as_shipped():
    from benchmarks.memory_lodo import SHIPPED

    assert all(getattr(MemoryConfig(), k) == v for k, v in SHIPPED.items())


def test_a_query_of_its_own_subject_gets_the_latest_exchange_cut_to_its_share():
    # A long last reply the question does not ask about: it stays in, cut to its share of l_max,
    # and the rest of the budget goes to the turn asked about. A short follow-up gets it whole.
    reply = "Day one: " + "walk the cliff path and rest at the harbour, " * 12 + "then drive home."
    m = mem(keep_recent=True, recent_share=0.125, partner_turns=False)
    long_chat(m, reply=reply)
    ctx = m.reconstruct("In which city does my sister Ana live these days?", l_max=256)
    last = next(t for t in ctx.turns if t.seq == len(m) - 1)
    assert last.metadata["meve_truncated"] is True and m.token_counter.count(last.text) <= 32
    assert any("Ana lives in Lisbon" in t.text for t in ctx.turns if t.seq < len(m) - 2)
    assert "each keeps at most 32 tokens of its text (0.125 of l_max 256)" in ctx.recent_reason
    assert reply in m.reconstruct("Continue", l_max=256).text
    whole = mem(keep_recent=True, recent_share=1.0, partner_turns=False)
    long_chat(whole, reply=reply)
    assert reply in whole.reconstruct("In which city does my sister Ana live these days?", l_max=256).text


@pytest.mark.parametrize("share", [0, -0.1, 1.5, "half", True])
def test_recent_share_is_a_share_of_l_max(share):
    from meve import ConfigError

    with pytest.raises(ConfigError, match="recent_share"):
        MemoryConfig(recent_share=share)


@pytest.mark.parametrize("cosine", [1.5, -2, "0.3", True, float("nan")])
def test_follow_up_cosine_is_a_cosine_or_none(cosine):
    from meve import ConfigError

    with pytest.raises(ConfigError, match=r"follow_up_cosine.*a cosine in \[-1, 1\], or None"):
        MemoryConfig(follow_up_cosine=cosine)
    assert MemoryConfig(follow_up_cosine=None).follow_up_cosine is None
