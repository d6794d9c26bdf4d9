"""The replay that ``evaluate_memory``, ``tune_memory`` and the memory benchmarks measure
(:class:`meve.evaluate.replay.Replay`) chooses what :class:`meve.MomentaryMemory` chooses, because
it runs the memory's own rebuild (:mod:`meve.memory.rebuild`): the same turns, the same text and
the same reasons, with the real MiniLM and a real Chroma session (issue 78: the replay was a
second implementation, without the roles the chat adapters skip or keep)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from meve import MemoryConfig, MomentaryMemory, get_token_counter
from meve.evaluate.replay import Replay
from meve.retrieval.chroma import chroma_client

pytestmark = pytest.mark.integration

CONVERSATION = [
    ("system", "You are a helpful cooking and travel assistant; suggest one thing at a time."),
    ("user", "My hollandaise sauce split again last night."),
    ("assistant", "I suggest whisking in a spoon of warm water and adding the butter more slowly."),
    ("user", "I also want to visit Lisbon in May with my sister."),
    ("assistant", "I suggest the Alfama district and a day trip to Sintra."),
    ("user", "My sister is vegetarian, by the way."),
    ("assistant", "Then try the vegetarian tascas near Principe Real."),
    ("user", "What wine goes with grilled sardines?"),
    ("assistant", "A crisp Vinho Verde suits grilled sardines."),
    ("user", "I bought a new cast iron pan yesterday."),
    ("assistant", "Season it with a thin layer of oil before the first use."),
]
QUERIES = [
    "what did you suggest",  # second person alone: the assistant's turns count fully, the user's half
    "What did I say about my sister?",  # first person alone
    "What did you suggest for my sauce?",  # both persons: every role alike
    "Why?",  # a follow-up: the latest exchange first
    "When did I buy the pan?",  # asks about time: dated lines
    "I made the sauce again tonight. It split once more. What did you suggest for it last time?",  # matched sentence by sentence
]
# As the chat adapters call it (meve.integration.chat_context: system turns skipped), with system
# turns kept first, and with a top_k whose candidate pool is 4 x top_k, over a small pool.
CALLS = [
    ({}, {}),
    ({}, {"skip_roles": ("system",)}),
    ({}, {"keep_roles": ("system",)}),
    ({"top_k": 3, "l_max": 40}, {}),
    ({"keep_recent": True, "l_max": 80}, {"skip_roles": ("system",)}),
]


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self.now += timedelta(hours=7)
        return self.now


@pytest.mark.parametrize(("config", "roles"), CALLS, ids=["default", "skip-system", "keep-system", "top_k", "keep-recent-skip-system"])
def test_the_replay_chooses_what_the_memory_chooses(minilm, config, roles):
    cfg = MemoryConfig(**config)
    prefix = f"t{time.time_ns()}"
    memory = MomentaryMemory("replayed", client=chroma_client(), embedders=[minilm], config=cfg, clock=Clock(), collection_prefix=prefix, candidate_pool=2)
    memory.add_many([{"text": text, "role": role} for role, text in CONVERSATION])
    replay = Replay(memory.turns(), get_token_counter(), minilm.encode, minilm.name)
    cues = set()
    for query in QUERIES:
        real = memory.reconstruct(query, **roles)
        chosen, text = replay.memory(query, minilm.encode([query])[0], cfg, pool=2, **roles)
        assert [t.id for t in chosen.turns] == [t.id for t in real.turns], query
        assert text == real.text, query
        mine = replay.candidates(query, minilm.encode([query])[0], cfg, pool=2, **roles).decided.reasons()
        assert mine == {k: getattr(real, k) for k in mine}, query
        cues.add(real.role_reason.split(" (")[0])
    # The queries exercise every role decision.
    assert cues == {"the query asks about the assistant's turns", "the query asks about the user's own turns", "the query names no one side"}


def test_the_replay_ranks_by_the_vector_it_is_given_for_a_query_it_has_seen(minilm):
    # Kept per question: a second vector for the same text (another embedder, a query adapter) once
    # got the first vector's ranking back.
    from meve.memory.records import Turn

    t0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
    turns = [Turn(f"t{i}", role, text, t0 + timedelta(minutes=i), i) for i, (role, text) in enumerate(CONVERSATION)]
    rp = Replay(turns, get_token_counter(), minilm.encode, minilm.name)
    query = "What wine goes with sardines?"
    near, far = (minilm.encode([text])[0] for text in (query, "cast iron pan seasoning"))
    assert rp.ranking(query, near, "dense")[0] == 7  # the sardines question
    assert rp.ranking(query, far, "dense")[0] in (9, 10)  # the pan
    cfg = MemoryConfig(l_max=200, keep_recent=False, weights={"dense": 1.0}, user_statements=False)
    assert next(iter(rp.memory(query, near, cfg)[0].picked)) == 7  # the memory's first pick, by the vector given
    assert next(iter(rp.memory(query, far, cfg)[0].picked)) in (9, 10)
