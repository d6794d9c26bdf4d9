"""A long query is also matched sentence by sentence (``MemoryConfig.query_sentences``): the
decision, the score, what it changes in a real rebuild, and that the library's replay (what the
benchmarks and ``meve tune`` measure) rebuilds exactly what ``MomentaryMemory`` does."""

from __future__ import annotations

import time

import pytest

from meve import MemoryConfig, MomentaryMemory, get_token_counter
from meve.evaluate.replay import Replay
from meve.memory.decide import PART_SHARE, decide_parts
from meve.memory.select import sentence_scores
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder
from tests.unit.test_memory import Clock

WORK = [
    ("user", "Work was exhausting today with back to back meetings all afternoon."),
    ("assistant", "Long meeting days at work are draining, so take a short walk between them."),
    ("user", "My manager keeps adding meetings to my calendar at work."),
    ("user", "Biscuit sees the vet on Thursday at four for his vaccinations."),
    ("user", "I felt tired after work and skipped the gym."),
    ("assistant", "Rest is fine after a tiring day at work with meetings."),
]
# Two sentences about the day at work, one asking about the vet: the whole query's vector is
# mostly the day at work.
LONG = (
    "So tired after work again, meetings all day at work. Work meetings, work calls, work everything, I am tired. "
    "Does Biscuit see the vet on Thursday for vaccinations?"
)


def test_only_a_query_of_three_or_more_sentences_is_matched_sentence_by_sentence():
    parts, why = decide_parts(True, "I tried the recipe again. The sauce split like last time. What did you say about the butter?")
    assert parts == ("I tried the recipe again.", "The sauce split like last time.", "What did you say about the butter?")
    assert why.startswith("the query has 3 sentences")
    # Fragments of fewer than three words ("Hi!", "Okay.") are not sentences a turn could match.
    parts, why = decide_parts(True, "Hi! Okay. I tried the recipe again. What about the butter?")
    assert parts == () and why == "the query has 2 sentence(s) of 3+ words: matched whole"
    assert decide_parts(True, "first line says this\nsecond line says that\nthird line asks why")[0] == (
        "first line says this",
        "second line says that",
        "third line asks why",
    )
    assert decide_parts(False, LONG) == ((), "query_sentences=False")


def test_a_turns_vector_score_is_half_the_whole_querys_cosine_and_half_its_best_sentences():
    whole = {0: 0.2, 1: 0.6, 2: 0.5}
    first, second = {0: 0.9, 1: 0.1, 3: 0.7}, {0: 0.1, 1: 0.2, 3: 0.3}
    assert PART_SHARE == 0.5
    scores = sentence_scores([whole, first, second])
    assert scores[0] == pytest.approx(0.5 * 0.2 + 0.5 * 0.9) and scores[1] == pytest.approx(0.5 * 0.6 + 0.5 * 0.2)
    # A search that did not return a turn counts its pool's lowest cosine: turn 3 was not in the
    # whole query's pool (lowest 0.2), turn 2 in no sentence's (lowest 0.1 and 0.1).
    assert scores[3] == pytest.approx(0.5 * 0.2 + 0.5 * 0.7) and scores[2] == pytest.approx(0.5 * 0.5 + 0.5 * 0.1)
    assert sentence_scores([whole]) == whole  # no sentences: the whole query's cosines
    with pytest.raises(ValueError, match="the whole query's hits"):
        sentence_scores([])


def memory(emb: FakeEmbedder, **cfg) -> MomentaryMemory:
    m = MomentaryMemory("s", client=chroma_client(), embedders=[emb], config=MemoryConfig(**cfg), clock=Clock(), collection_prefix=f"t{time.time_ns()}")
    m.add_many([{"text": text, "role": role} for role, text in WORK])
    return m


def test_a_long_query_recalls_the_turn_one_of_its_sentences_asks_for():
    emb = FakeEmbedder()
    vet = WORK[3][1]
    l_max = get_token_counter().count(f"user: {vet}")  # room for one line
    cfg = {"weights": {"dense": 1.0}, "partner_turns": False, "role_cue": False, "dates": False, "keep_recent": False, "l_max": l_max}
    whole = memory(emb, query_sentences=False, **cfg).reconstruct(LONG)
    assert [t.text for t in whole.turns] != [vet] and whole.parts_reason == "query_sentences=False"
    ctx = memory(emb, **cfg).reconstruct(LONG)
    assert [t.text for t in ctx.turns] == [vet] and ctx.parts_reason.startswith("the query has 3 sentences")
    # The trace's vector score is the formula on the embedder's own vectors.
    q = emb.encode([LONG, *decide_parts(True, LONG)[0]])
    v = emb.encode([vet])[0]
    row = next(tr for tr in ctx.trace if tr.seq == 3)
    assert row.dense[emb.name] == pytest.approx(0.5 * float(q[0] @ v) + 0.5 * float(max(q[1:] @ v)), abs=1e-5)
    short = memory(emb, **cfg).reconstruct("Does Biscuit see the vet on Thursday?")
    assert short.parts_reason == "the query has 1 sentence(s) of 3+ words: matched whole"


MORE = [
    ("user", "The plumber fixed the kitchen sink on Monday."),
    ("assistant", "Good, a dripping sink wastes a lot of water."),
    ("user", "Biscuit chewed my work shoes after the vet visit."),
    ("assistant", "Puppies chew when they are anxious; try a chew toy after vet visits."),
    ("user", "My manager moved the meeting to Friday."),
    ("user", "Why?"),
]


@pytest.mark.parametrize("keep_recent", [True, "auto"])
@pytest.mark.parametrize("weights", [{"bm25": 0.5, "dense": 0.5}, {"dense": 1.0}])
@pytest.mark.parametrize(("l_max", "pool"), [(20, 2), (60, 3), (200, 256)])
def test_the_replay_rebuilds_what_the_memory_rebuilds(l_max, pool, weights, keep_recent):
    # A pool of 2 or 3 of the 12 turns: each search returns part of the conversation, so a turn
    # one search missed counts that search's lowest cosine, and the most recent turn, when kept
    # first, is left out of every pool (the memory asks Chroma for room to drop it).
    emb = FakeEmbedder()
    m = MomentaryMemory(
        "s",
        client=chroma_client(),
        embedders=[emb],
        config=MemoryConfig(weights=weights, keep_recent=keep_recent),
        clock=Clock(),
        collection_prefix=f"t{time.time_ns()}",
        candidate_pool=pool,
    )
    m.add_many([{"text": text, "role": role} for role, text in WORK + MORE])
    replay = Replay(m.turns(), get_token_counter(), emb.encode, emb.name)
    queries = [LONG, "Does Biscuit see the vet on Thursday?", "Why am I so tired after work? Meetings again today. What helps with that?"]
    for query in queries:
        _, text = replay.memory(query, emb.encode([query])[0], MemoryConfig(l_max=l_max, weights=weights, keep_recent=keep_recent), pool=pool)
        assert m.reconstruct(query, l_max=l_max).text == text, query
