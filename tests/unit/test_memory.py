"""MomentaryMemory over real Chroma with FakeEmbedder (tests/fakes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meve import ConfigError, InputError, MemoryConfig, MomentaryMemory, StoreError
from meve.integration import recall
from meve.memory.render import TRUNCATION_MARKER
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def mem(session="s1", client=None, path=None, **cfg):
    # In-memory Chroma clients share one store per process: a fresh prefix keeps tests apart.
    if client is None and path is None:
        client = chroma_client()
    return MomentaryMemory(
        session, client=client, path=path, config=MemoryConfig(**cfg), embedders=[FakeEmbedder()], clock=Clock(), collection_prefix=f"t{time.time_ns()}"
    )


CHAT = [
    ("user", "My dog is called Rex and he is a beagle."),
    ("assistant", "Rex sounds lovely. Beagles are curious hounds."),
    ("user", "I work as a nurse at the hospital in Lyon."),
    ("assistant", "Nursing in Lyon must keep you busy."),
    ("user", "My favourite food is pizza with anchovies."),
    ("assistant", "Anchovies are a bold pizza topping."),
    ("user", "What breed is my dog again?"),
]


def two_handles(session):
    """Two handles on one session, standing for two processes: neither holds the other's in-memory state."""
    client, prefix, clock = chroma_client(), f"t{time.time_ns()}", Clock()
    return tuple(MomentaryMemory(session, client=client, embedders=[FakeEmbedder()], clock=clock, collection_prefix=prefix) for _ in range(2))


def filled(**cfg):
    m = mem(**cfg)
    m.add_many([{"role": r, "text": t} for r, t in CHAT])
    return m


def test_add_turns_len_and_idempotent_ids():
    m = mem()
    t = m.add("hello there", "user", turn_id="t-1", metadata={"lang": "en"})
    assert (t.id, t.role, t.text, t.seq, t.metadata) == ("t-1", "user", "hello there", 0, {"lang": "en"})
    again = m.add("hello there", "user", turn_id="t-1")
    assert again == t and len(m) == 1
    with pytest.raises(InputError, match=r"turn_id='t-1' is already stored as user: 'hello there'.*own turn_id"):
        m.add("different text", "user", turn_id="t-1")
    with pytest.raises(InputError, match="already stored as user"):
        m.add("hello there", "assistant", turn_id="t-1")
    assert [x.text for x in m.turns()] == ["hello there"]
    m.add("second", "assistant")
    assert [x.text for x in m.turns()] == ["hello there", "second"]
    assert m.turns()[1].timestamp > m.turns()[0].timestamp


def test_reconstruct_keeps_recent_turn_relevant_turns_and_time_order():
    m = filled(top_k=2, l_max=200, keep_recent=True)  # the paper's rule: the most recent turn for every query
    ctx = m.reconstruct("what breed is my dog Rex beagle")
    ids = [t.seq for t in ctx.turns]
    assert ids[-1] == 6  # the most recent turn, always
    assert 0 in ids  # "Rex ... beagle" is relevant
    assert ids == sorted(ids)  # chronological
    assert ctx.token_count == m.token_counter.count(ctx.text) <= 200
    last = m.turns()[-1]
    assert ctx.text.splitlines()[-1] == f"user: {last.text}"  # dates="auto": no dates for a question not about time
    dated = m.reconstruct("when did I get my dog Rex")
    # Every turn is on one day: the date opens the first line only, and the trace says why it is there.
    assert dated.text.splitlines()[0].startswith(f"[{last.timestamp:%Y-%m-%d}] ")
    assert dated.text.splitlines()[-1] == f"user: {last.text}" and dated.text.count("[20") == 1
    assert dated.dates_reason == "the query asks about time ('when')" and ctx.dates_reason == "the query does not ask about time"
    assert sum(1 for tr in ctx.trace if tr.included) == len(ctx.turns)
    recent = next(tr for tr in ctx.trace if tr.seq == 6)
    assert recent.reason.startswith("most recent turn")
    rel = next(tr for tr in ctx.trace if tr.seq == 0)
    assert rel.bm25 is not None and "fake-bow" in rel.dense and rel.fused is not None


def test_l_max_cut_by_priority_and_recent_truncation_marker():
    m = filled(top_k=5, l_max=30)
    ctx = m.reconstruct("dog beagle pizza nurse")
    assert ctx.token_count == m.token_counter.count(ctx.text) <= 30
    assert any(not tr.included and "left of l_max 30" in tr.reason for tr in ctx.trace)
    m.add("word " * 400, "user")
    small = m.reconstruct("anything", l_max=40, keep_recent=True)
    assert small.token_count == m.token_counter.count(small.text) <= 40
    # Earlier turns are about "anything" too, so the long turn keeps half of l_max and another turn fits beside it.
    cut = [t for t in small.turns if t.metadata.get("meve_truncated")]
    assert len(cut) == 1 and cut[0].text.endswith(TRUNCATION_MARKER) and len(small.turns) == 2
    reason = next(tr.reason for tr in small.trace if tr.id == cut[0].id)
    assert "truncated to" in reason and "its share of l_max (20 tokens of text)" in reason


def test_with_keep_recent_auto_the_recent_turn_goes_in_first_only_for_a_follow_up():
    m = filled(keep_recent="auto", recent_turns=1)
    # A standalone question: the most recent turn ("What breed is my dog again?") competes by
    # relevance, and the two pizza turns the query asks about take the budget (room for them only).
    pizza = "\n".join(f"{r}: {t}" for r, t in CHAT[4:6])
    alone = m.reconstruct("favourite pizza topping anchovies", l_max=m.token_counter.count(pizza) + 2)
    assert alone.recent_reason == "the query stands alone: the most recent turns compete by relevance"
    last = next(tr for tr in alone.trace if tr.seq == 6)
    assert not last.reason.startswith("most recent turn") and {4, 5} <= {t.seq for t in alone.turns}
    assert 6 not in {t.seq for t in alone.turns}
    # A follow-up keeps it first, whatever it scores, and says why.
    follow = m.reconstruct("is it a good one?", l_max=40)
    assert follow.recent_reason.startswith("the query reads as a follow-up ('it')")
    assert next(tr for tr in follow.trace if tr.seq == 6).reason.startswith("most recent turn") and 6 in {t.seq for t in follow.turns}
    assert m.reconstruct("favourite pizza topping anchovies", keep_recent=True).recent_reason.startswith("keep_recent=True")


def test_fusion_and_weights_are_adjustable_per_call():
    m = filled(top_k=1, l_max=500)
    lexical = m.reconstruct("Lyon hospital", weights={"bm25": 1.0, "dense": 0.0})
    assert any(t.seq == 2 for t in lexical.turns)
    r = m.reconstruct("Lyon hospital", fusion="rrf")
    assert r.fusion == "rrf" and any(t.seq == 2 for t in r.turns)
    with pytest.raises(ConfigError, match="fusion='mix'"):
        m.reconstruct("x", fusion="mix")
    with pytest.raises(ConfigError, match="sum is a finite number > 0"):
        m.reconstruct("x", weights={"bm25": 0, "dense": 0})
    with pytest.raises(ConfigError, match="weights\\['other'\\]"):
        m.reconstruct("x", weights={"other": 1.0})


def test_several_embedders_each_get_a_collection_and_a_weight():
    client = chroma_client()
    m = MomentaryMemory(
        "multi",
        client=client,
        collection_prefix=f"t{time.time_ns()}",
        embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")],
        config=MemoryConfig(weights={"bm25": 0.2, "a": 0.5, "b": 0.3}),
    )
    m.add_many([t for _, t in CHAT])
    ctx = m.reconstruct("dog beagle")
    assert {k for tr in ctx.trace for k in tr.dense} == {"a", "b"}
    stem = m._store.collections[0].name.rsplit("-", 1)[0]
    assert {n for n in (c.name for c in client.list_collections()) if n.startswith(stem)} == {f"{stem}-a", f"{stem}-b", f"{stem}.heads"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text": ""}, "empty"),
        ({"text": "   "}, "empty"),
        ({"text": None}, "text must be a str"),
        ({"text": 5}, "text must be a str"),
        ({"text": "hi", "role": "robot"}, "role='robot'"),
        ({"text": "hi", "timestamp": "yesterday"}, "not ISO-8601"),
        ({"text": "hi", "timestamp": datetime(2024, 1, 1)}, "no timezone"),
        ({"text": "hi", "timestamp": "2000-01-01T00:00:00+00:00"}, "earlier than the latest turn"),
        ({"text": "hi", "metadata": {"role": "x"}}, "reserved"),
    ],
)
def test_bad_turns_are_rejected_and_nothing_is_stored(kwargs, match):
    m = mem()
    m.add("first turn", "user")
    with pytest.raises(InputError, match=match):
        m.add(**kwargs)
    assert len(m) == 1 and [t.text for t in m.turns()] == ["first turn"]


def test_one_megabyte_turn_is_stored_verbatim_and_over_limit_is_refused():
    m = mem(max_turn_chars=2_000_000)
    big = ("memory " * 150_000)[:1_048_576]
    m.add(big)
    assert m.turns()[0].text == big
    ctx = m.reconstruct("memory", l_max=64)
    assert ctx.token_count == m.token_counter.count(ctx.text) <= 64
    with pytest.raises(InputError, match="max_turn_chars=2000000"):
        m.add("x" * 2_000_001)


@pytest.mark.parametrize("sid", ["", "  ", None, 3, "a\nb", "x" * 300])
def test_session_id_is_validated(sid):
    with pytest.raises(InputError, match="session_id"):
        mem(session=sid)


def test_clear_only_touches_its_own_session():
    client = chroma_client()
    a, b = mem("alice", client=client), mem("bob", client=client)
    a.add("alice secret")
    b.add("bob secret")
    a.clear()
    assert len(a) == 0 and [t.text for t in b.turns()] == ["bob secret"]


def test_clear_with_turn_ids_deletes_only_those_and_skips_ids_not_stored():
    # The LangChain middleware deletes every turn a RemoveMessage took from the state in one reload.
    m = mem("some")
    for i in range(4):
        m.add(f"turn {i} about herons", turn_id=f"t{i}")
    m.clear(["t1", "t3", "never-stored"])
    assert [t.id for t in m.turns()] == ["t0", "t2"]
    assert "turn 1" not in m.reconstruct("herons", l_max=500).text
    for bad in ("t0", [7]):  # one string would be read as ids "t" and "0"
        with pytest.raises(InputError, match="turn"):
            m.clear(bad)
    assert [t.id for t in m.turns()] == ["t0", "t2"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    sessions=st.dictionaries(
        st.sampled_from(["s-a", "s-b", "s-c", "u:1", "ü ser"]),
        st.lists(st.sampled_from(["dog", "cat", "lyon", "pizza", "nurse", "rex beagle"]), min_size=1, max_size=6),
        min_size=2,
        max_size=4,
    ),
    query=st.sampled_from(["dog", "pizza nurse", "lyon cat", "anything"]),
)
def test_property_sessions_never_see_each_other(sessions, query):
    client = chroma_client()
    prefix = f"iso{time.time_ns()}"
    mems = {}
    for sid, texts in sessions.items():
        m = MomentaryMemory(sid, client=client, embedders=[FakeEmbedder()], clock=Clock(), collection_prefix=prefix)
        m.add_many([f"{sid} says {t}" for t in texts])
        mems[sid] = m
    for sid, m in mems.items():
        ctx = m.reconstruct(query, top_k=10, l_max=10_000)
        assert all(t.text.startswith(f"{sid} says") for t in ctx.turns)
        assert len(m.turns()) == len(sessions[sid])
        reopened = MomentaryMemory(sid, client=client, embedders=[FakeEmbedder()], collection_prefix=prefix)
        assert [t.text for t in reopened.turns()] == [t.text for t in m.turns()]


def test_concurrent_adds_from_eight_threads_lose_nothing():
    prefix = f"t{time.time_ns()}"
    m = MomentaryMemory("threads", client=chroma_client(), embedders=[FakeEmbedder()], collection_prefix=prefix)
    errors = []

    def worker(w):
        try:
            for i in range(25):
                m.add(f"worker {w} turn {i}", "user", turn_id=f"w{w}-{i}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    turns = m.turns()
    assert len(turns) == 200 and len({t.id for t in turns}) == 200
    assert [t.seq for t in turns] == list(range(200))
    again = MomentaryMemory("threads", client=m.client, embedders=[FakeEmbedder()], collection_prefix=prefix)
    assert {t.id for t in again.turns()} == {f"w{w}-{i}" for w in range(8) for i in range(25)}


CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from meve import MomentaryMemory
from tests.fakes import FakeEmbedder
m = MomentaryMemory("crash", path={path!r}, embedders=[FakeEmbedder()])
i = 0
while True:
    m.add(f"turn number {{i}}", "user", turn_id=f"t{{i}}")
    print(f"ack t{{i}}", flush=True)
    i += 1
"""


def test_sigkill_while_adding_keeps_every_acknowledged_turn(tmp_path):
    path = str(tmp_path / "db")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=root, path=path)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    acked = []
    assert proc.stdout is not None
    deadline = time.time() + 120
    while len(acked) < 40 and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        acked.append(line.split()[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(acked) >= 40, "the child did not get going"
    reopened = MomentaryMemory("crash", path=path, embedders=[FakeEmbedder()])
    ids = [t.id for t in reopened.turns()]
    assert set(acked) <= set(ids)
    assert [t.seq for t in reopened.turns()] == list(range(len(ids)))
    reopened.add("after the crash", "user")
    assert reopened.turns()[-1].text == "after the crash"


def test_reopen_in_a_new_process_gives_identical_reconstructions(tmp_path):
    path = str(tmp_path / "db")
    m = MomentaryMemory("persist", path=path, embedders=[FakeEmbedder()], clock=Clock(), config=MemoryConfig(top_k=2, l_max=80))
    m.add_many([{"role": r, "text": t} for r, t in CHAT])
    expected = m.reconstruct("dog breed").to_dict()
    root = str(Path(__file__).resolve().parents[2])
    code = (
        f"import sys, json; sys.path.insert(0, {root!r})\n"
        "from meve import MomentaryMemory, MemoryConfig\nfrom tests.fakes import FakeEmbedder\n"
        f"m = MomentaryMemory('persist', path={path!r}, embedders=[FakeEmbedder()], config=MemoryConfig(top_k=2, l_max=80))\n"
        "d = m.reconstruct('dog breed').to_dict(); d.pop('ms'); print(json.dumps(d))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    import json

    got = json.loads(out.strip().splitlines()[-1])
    expected.pop("ms")
    assert got == json.loads(json.dumps(expected))


async def test_async_variants():
    m = mem()
    t = await m.aadd("async hello", "user")
    assert t.text == "async hello"
    await m.aadd_many(["second async"])
    ctx = await m.areconstruct("hello")
    assert ctx.turns[-1].text == "second async"


def test_reconstruct_rejects_an_empty_query_like_meve_run():
    m = mem()
    m.add("hello there", "user")
    for bad in ("", "   ", None):
        with pytest.raises(InputError, match="query"):
            m.reconstruct(bad)


def test_a_timestamp_from_the_future_is_refused_and_one_turn_can_be_deleted():
    m = mem(max_clock_skew_s=60)
    m.add("first", "user")
    far = m.clock() + timedelta(days=365)
    with pytest.raises(InputError, match=r"more than max_clock_skew_s=60(\.0)? s ahead of the clock"):
        m.add("from the future", "user", timestamp=far)
    keep = m.add("second", "assistant", turn_id="keep")
    gone = m.add("third", "user", turn_id="gone")
    assert m.delete("gone") == gone
    assert [t.text for t in m.turns()] == ["first", "second"] and m.turns()[-1] == keep
    assert "third" not in [t.text for t in m.reconstruct("third", l_max=500).turns]
    with pytest.raises(InputError, match="turn_id='gone' is not stored"):
        m.delete("gone")
    m.add("fourth", "user")  # still writable


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"x": float("nan")}, "Chroma drops NaN"),
        ({"x": float("inf")}, "Chroma drops NaN and infinite"),
        ({"x": 2**63}, "outside int64"),
        ({"": 1}, "keys must be non-empty"),
        ({"x": "bad \ud800 text"}, "lone surrogate"),
    ],
)
def test_metadata_that_storage_would_change_is_refused(metadata, message):
    m = mem()
    with pytest.raises(InputError, match=message):
        m.add("hello", "user", metadata=metadata)
    with pytest.raises(InputError, match="lone surrogate"):
        m.add("text with \ud800 in it", "user")
    assert len(m) == 0


def test_add_many_is_all_or_nothing_when_chroma_fails_mid_batch(monkeypatch):
    import meve.memory.session

    m = mem()
    m.add("already there", "user")
    monkeypatch.setattr(meve.memory.session, "PAGE", 2)  # 5 turns -> 3 writes per collection
    col = m._store.collections[0]
    real_add = col.add
    calls = {"n": 0}

    def failing_add(**kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk full")
        return real_add(**kwargs)

    monkeypatch.setattr(col, "add", failing_add)
    with pytest.raises(StoreError, match=r"none of the 5 turn\(s\) of this batch is stored"):
        m.add_many([f"turn {i}" for i in range(5)])
    assert len(m) == 1 and col.count() == 1  # the first chunk was deleted again
    monkeypatch.setattr(col, "add", real_add)
    added = m.add_many([f"turn {i}" for i in range(5)])
    assert [t.seq for t in added] == [1, 2, 3, 4, 5] and len(m) == 6


def test_two_handles_on_one_session_see_each_others_turns_in_time_order():
    # Two handles stand for two processes: neither holds the other's in-memory state.
    a, b = two_handles("shared")
    a.add("alpha writes about zebras", "user")
    b.add("beta writes about walruses", "user")
    a.add("alpha again about kiwis", "user")
    assert [t.text for t in b.turns()] == ["alpha writes about zebras", "beta writes about walruses", "alpha again about kiwis"]
    ctx = b.reconstruct("zebras", l_max=500)
    assert "alpha writes about zebras" in [t.text for t in ctx.turns]  # found by BM25 and dense, though b never wrote it
    assert any(tr.bm25 for tr in ctx.trace if tr.id == a.turns()[0].id)
    assert [t.text for t in a.turns()] == [t.text for t in b.turns()]


def test_reconstruct_does_not_wait_for_a_stuck_add():
    release = threading.Event()

    class SlowForOneText(FakeEmbedder):
        def encode(self, texts):
            if any("STUCK" in t for t in texts):
                release.wait(timeout=30)
            return super().encode(texts)

    m = MomentaryMemory("stuck", client=chroma_client(), embedders=[SlowForOneText()], clock=Clock(), collection_prefix=f"t{time.time_ns()}")
    m.add("an earlier turn about trains", "user")
    writer = threading.Thread(target=m.add, args=("STUCK turn",))
    writer.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    ctx = m.reconstruct("trains", l_max=200)
    waited = time.perf_counter() - t0
    release.set()
    writer.join(timeout=30)
    assert waited < 5 and [t.text for t in ctx.turns] == ["an earlier turn about trains"]
    assert len(m) == 2


def test_a_session_of_more_than_32767_turns_reopens(tmp_path):
    # One unpaginated get() of 32,767+ rows fails in Chroma's SQLite ("too many SQL variables").
    path = str(tmp_path / "big")
    m = MomentaryMemory("big", path=path, embedders=[FakeEmbedder(dimension=8)], clock=Clock())
    for start in range(0, 33_000, 5_500):
        m.add_many([f"turn {i}" for i in range(start, min(start + 5_500, 33_000))])
    reopened = MomentaryMemory("big", path=path, embedders=[FakeEmbedder(dimension=8)])
    assert len(reopened) == 33_000 and reopened.turns()[-1].text == "turn 32999"


@given(
    texts=st.lists(
        st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=120).filter(str.strip), min_size=1, max_size=12
    ),
    l_max=st.integers(min_value=12, max_value=120),
    dates=st.booleans(),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_rendered_context_never_exceeds_l_max(texts, l_max, dates):
    m = mem()
    m.add_many([{"text": t, "role": "user" if i % 2 == 0 else "assistant"} for i, t in enumerate(texts)])
    ctx = m.reconstruct("remember what I said", l_max=l_max, dates=dates)
    assert m.token_counter.count(ctx.text) == ctx.token_count <= l_max


def test_dates_put_each_turns_day_on_its_line_and_in_the_budget():
    m = mem(l_max=4000)
    day = [T0 - timedelta(days=d) for d in (40, 3, 0)]
    m.add_many([{"text": t, "role": r, "timestamp": ts} for (r, t), ts in zip(CHAT[:2] + CHAT[-1:], day, strict=True)])
    plain = m.reconstruct("beagle", dates=False)
    dated = m.reconstruct("beagle", dates=True)
    assert plain.turns == dated.turns and dated.dates and not plain.dates
    assert dated.text.splitlines() == [f"[{ts:%Y-%m-%d}] {r}: {t}" for (r, t), ts in zip(CHAT[:2] + CHAT[-1:], day, strict=True)]
    assert dated.token_count == m.token_counter.count(dated.text) > plain.token_count
    assert dated.content_of(dated.turns[0]) == f"[2024-03-22] {CHAT[0][1]}"
    # At a budget the undated context just fits, the dates push the lowest-priority turn out.
    tight = m.reconstruct("beagle", l_max=plain.token_count, dates=True)
    assert tight.token_count == m.token_counter.count(tight.text) <= plain.token_count and len(tight.turns) < len(plain.turns)
    with pytest.raises(ConfigError, match="dates"):
        MemoryConfig(dates="yes")


def test_recalled_messages_are_dated_as_the_budget_counts_them():
    # One day's turns: the context dates its first line only; a date on every message would cost
    # ~8 tokens a message beyond token_count (issue 76: the count covers what the adapters send).
    m = mem(l_max=4000)
    m.add_many([{"text": t, "role": r, "timestamp": T0 + timedelta(minutes=i)} for i, (r, t) in enumerate(CHAT)])
    m.add("What did we talk about today?", "user", turn_id="now", timestamp=T0 + timedelta(minutes=len(CHAT)))
    ctx = m.reconstruct("beagle pizza nurse", dates=True)
    assert len(ctx.turns) > 3 and [c.startswith("[2024-05-01] ") for c in ctx.contents()] == [True] + [False] * (len(ctx.turns) - 1)
    messages = recall(m, "What did we talk about today?", exclude=["now"])
    assert messages[0].text.startswith("[2024-05-01] ") and not any(x.text.startswith("[") for x in messages[1:])
    sent = sum(m.token_counter.count(x.text) for x in messages)
    assert sent <= m.reconstruct("What did we talk about today?", skip_roles=("system",), skip_ids=["now"]).token_count


def test_kept_roles_count_against_the_budget_after_the_recent_turn():
    m = mem(dates=False, keep_recent=True)
    m.add("You are a terse assistant. Never mention pizza.", "system")
    for i in range(20):
        m.add(f"filler remark number {i} about the weather", "user")
    ctx = m.reconstruct("weather", l_max=60, keep_roles=("system",))
    assert ctx.turns[0].role == "system" and ctx.token_count == m.token_counter.count(ctx.text) <= 60
    tight = m.reconstruct("weather", l_max=15, keep_roles=("system",))
    assert [t.role for t in tight.turns] == ["user"]  # the most recent turn comes first; the system turn did not fit
    assert any("keep_roles, but it needs" in tr.reason for tr in tight.trace)
    with pytest.raises(InputError, match="keep_roles='system'"):
        m.reconstruct("weather", keep_roles="system")


def test_skipped_roles_are_never_chosen_nor_count_against_the_budget():
    m = mem(dates=False)
    m.add("System note: the weather station reports about the weather daily.", "system")
    for i in range(6):
        m.add(f"filler remark number {i} about the weather", "user")
    ranked = m.reconstruct("weather station reports", l_max=200)
    assert "system" in [t.role for t in ranked.turns]  # relevant, so chosen without skip_roles
    skipped = m.reconstruct("weather station reports", l_max=200, skip_roles=("system",))
    assert [t.role for t in skipped.turns] == ["user"] * 6 and skipped.token_count == m.token_counter.count(skipped.text)
    with pytest.raises(InputError, match="skip_roles=\\('boss',\\)"):
        m.reconstruct("weather", skip_roles=("boss",))


def test_stemming_lets_bm25_match_word_forms():
    def build(stemming):
        m = mem(stemming=stemming, weights={"bm25": 1.0, "dense": 0.0})
        m.add("I went to a support group for new parents.", "user")
        for i in range(8):
            m.add(f"Unrelated remark {i} about the weather.", "assistant" if i % 2 else "user")
        return m

    plain = build(False).reconstruct("Who was supportive?", l_max=40)
    stemmed = build(True).reconstruct("Who was supportive?", l_max=40)
    assert "I went to a support group for new parents." not in [t.text for t in plain.turns]
    assert "I went to a support group for new parents." in [t.text for t in stemmed.turns]


def test_partner_turns_bring_the_reply_of_a_recalled_turn():
    m = mem(partner_turns=True, weights={"bm25": 1.0, "dense": 0.0})
    m.add("What is the name of your dog?", "user")
    m.add("He is called Biscuit.", "assistant")
    for i in range(8):
        m.add(f"Unrelated remark {i} about trains.", "user" if i % 2 == 0 else "assistant")
    ctx = m.reconstruct("name of the dog", l_max=60)
    texts = [t.text for t in ctx.turns]
    assert "What is the name of your dog?" in texts and "He is called Biscuit." in texts
    reply = next(tr for tr in ctx.trace if tr.included and tr.seq == 1)
    assert reply.reason.startswith("partner turn of relevance rank 1 (worth 0.5 x ")
    without = m.reconstruct("name of the dog", l_max=60, top_k=1)
    assert m.config.partner_turns and "He is called Biscuit." in [t.text for t in without.turns]  # a partner is not capped by top_k
    off = mem(weights={"bm25": 1.0, "dense": 0.0}, partner_turns=False)
    off.add_many([{"text": t.text, "role": t.role} for t in m.turns()])
    assert "He is called Biscuit." not in [t.text for t in off.reconstruct("name of the dog", l_max=60, top_k=1).turns]


def test_the_partner_of_a_turn_too_long_to_fit_is_still_tried():
    m = mem(weights={"bm25": 1.0, "dense": 0.0})
    m.add("Tell me, at great length, " + "and with many digressions about everything, " * 20 + "what is the name of your dog?", "user")
    m.add("Biscuit.", "assistant")
    for i in range(6):
        m.add(f"Unrelated remark {i} about trains.", "user" if i % 2 == 0 else "assistant")
    ctx = m.reconstruct("name of the dog", l_max=40)
    assert "Biscuit." in [t.text for t in ctx.turns]
    assert any(not tr.included and tr.reason.startswith("relevance rank 1 (score 1.000): needs") for tr in ctx.trace)
    assert any(tr.included and tr.reason.startswith("partner turn of relevance rank 1 (worth") for tr in ctx.trace)


def test_a_read_with_nothing_new_reads_the_heads_rows_and_counts_no_turns(monkeypatch):
    a, b = two_handles("heads")
    a.add("alpha writes about zebras", "user")
    b.add("beta writes about walruses", "user")
    counts = []
    real_count = a._store.collections[0].count
    monkeypatch.setattr(a._store.collections[0], "count", lambda: counts.append(1) or real_count())
    a.reconstruct("walruses")  # b's write changed b's heads row: a reconciles once
    assert len(counts) == 1
    a.reconstruct("zebras")
    a.add("alpha again about kiwis", "user")  # a's own write does not make a recount
    a.reconstruct("kiwis")
    assert len(counts) == 1
    b.add("beta again about otters", "user")
    assert "beta again about otters" in [t.text for t in a.reconstruct("otters", l_max=500).turns]
    assert len(counts) == 2


def test_another_handles_delete_and_add_that_keep_the_count_are_both_seen():
    # A delete then an add leave count() unchanged: only the epoch row tells the reader to reload.
    a, b = two_handles("epoch")
    gone = a.add("a turn about zebras that is deleted", "user")
    a.add("a turn about walruses that stays", "user")
    assert len(b) == 2
    a.delete(gone.id)
    a.add("a new turn about kiwis", "user")
    assert [t.text for t in b.turns()] == ["a turn about walruses that stays", "a new turn about kiwis"]
    assert "zebras" not in b.reconstruct("zebras", l_max=500).text


def test_auto_dates_date_the_lines_only_for_a_question_about_time():
    m = mem(dates="auto")
    m.add("I adopted a beagle called Biscuit.", "user")
    m.add("Lovely name.", "assistant")
    m.add("Anything else?", "user")
    plain = m.reconstruct("What is my dog called?", l_max=200)
    timed = m.reconstruct("When did I adopt my dog?", l_max=200)
    assert not plain.dates and "[20" not in plain.text
    # One day: the date opens the first line; the lines after it are that day's.
    lines = timed.text.splitlines()
    assert timed.dates and lines[0].startswith("[20") and not any(line.startswith("[20") for line in lines[1:])
    assert timed.token_count == m.token_counter.count(timed.text) <= 200


def test_an_edit_supersedes_the_stored_turn_in_chroma_bm25_and_every_handle(tmp_path):
    # An edited or regenerated message keeps its id and changes its text (LangGraph replaces it in place).
    path = str(tmp_path / "db")
    clock = Clock()
    m = MomentaryMemory("edits", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=clock, config=MemoryConfig(l_max=500))
    other = MomentaryMemory("edits", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=clock)
    m.add_many([{"text": t, "role": r, "turn_id": f"t{i}"} for i, (r, t) in enumerate(CHAT)])
    before = m.turns()[1]
    assert len(other) == len(CHAT)  # the other handle has read the session, old text included
    out = m.add_many([{"text": "Rex sounds lovely. Dachshunds are stubborn hounds.", "role": "assistant", "turn_id": "t1"}, "a new turn"], supersede=True)
    assert [t.id for t in out] == ["t1", out[1].id] and out[0].text.startswith("Rex sounds lovely. Dachshunds")
    edited = m.turns()[1]
    # The turn keeps its place in time; only its text changed, and when is recorded.
    assert (edited.id, edited.timestamp, edited.seq) == (before.id, before.timestamp, before.seq) and edited.edited is not None
    assert len(m) == len(CHAT) + 1 and [t.text for t in m.turns()][-1] == "a new turn"
    for handle in (m, other, MomentaryMemory("edits", path=path, embedders=[FakeEmbedder(48, "b")], clock=clock)):
        texts = [t.text for t in handle.turns()]
        assert "Rex sounds lovely. Beagles are curious hounds." not in texts and edited.text in texts
        ctx = handle.reconstruct("curious beagles", l_max=500, weights={"bm25": 1.0, "dense": 0.0})
        assert "Beagles are curious" not in ctx.text  # BM25 no longer knows the old words
    ctx = m.reconstruct("stubborn dachshunds", l_max=500, weights={"bm25": 1.0, "dense": 0.0})
    row = next(tr for tr in ctx.trace if tr.id == "t1")
    assert row.included and row.edited == edited.edited.isoformat() and m.turns()[0].edited is None
    assert next(t for t in ctx.turns if t.id == "t1").text == edited.text


def test_an_edit_is_refused_without_supersede_and_checked_like_a_new_turn():
    m = mem()
    m.add("first words", "user", turn_id="u1")
    with pytest.raises(InputError, match=r"turn_id='u1' is already stored.*unless supersede=True"):
        m.add("other words", "user", turn_id="u1")
    with pytest.raises(InputError, match="text is empty"):
        m.add("   ", "user", turn_id="u1", supersede=True)
    with pytest.raises(InputError, match=r"an edit keeps the turn's place"):
        m.add("other words", "user", turn_id="u1", supersede=True, timestamp=T0 + timedelta(days=1))
    assert [t.text for t in m.turns()] == ["first words"] and m.turns()[0].edited is None
    again = m.add("other words", "user", turn_id="u1", supersede=True)
    assert again.edited is not None and m.add("other words", "user", turn_id="u1", supersede=True) == again  # the same edit twice is one edit


def test_a_failed_edit_leaves_the_stored_turn_as_it_was(monkeypatch):
    m = mem()
    m.add_many([{"text": "the old text about otters", "turn_id": "x"}, {"text": "another turn", "turn_id": "y"}])
    col = m._store.collections[0]
    real = col.add

    def failing_add(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(col, "add", failing_add)  # the new turn of the batch fails after the edit was written
    with pytest.raises(StoreError, match="disk full"):
        m.add_many([{"text": "the new text about seals", "turn_id": "x"}, "a new turn"], supersede=True)
    monkeypatch.setattr(col, "add", real)
    reopened = MomentaryMemory("s1", client=m.client, embedders=[FakeEmbedder()], collection_prefix=m._store.collections[0].name.split("-")[0])
    for handle in (m, reopened):
        assert [t.text for t in handle.turns()] == ["the old text about otters", "another turn"]
        assert "otters" in handle.reconstruct("otters", weights={"bm25": 1.0, "dense": 0.0}).text


def test_the_context_says_whose_turns_a_query_asks_about():
    m = mem(weights={"bm25": 1.0, "dense": 0.0}, partner_turns=False, keep_recent=False)  # every turn scored
    m.add("My favourite colour is teal.", "user")
    m.add("Teal is a lovely favourite colour.", "assistant")
    m.add("Unrelated remark about trains.", "user")
    ctx = m.reconstruct("What is my favourite colour?", l_max=1000)
    assert ctx.role_reason.startswith("the query asks about the user's own turns (first person: 'my')")
    assert ctx.to_dict()["role_reason"] == ctx.role_reason
    # The assistant's reply counts half: its fused score is half what the same reply scores without the cue.
    reply = next(tr for tr in ctx.trace if tr.seq == 1)
    off = mem(weights={"bm25": 1.0, "dense": 0.0}, partner_turns=False, role_cue=False, keep_recent=False)
    off.add_many([{"text": t.text, "role": t.role} for t in m.turns()])
    plain = off.reconstruct("What is my favourite colour?", l_max=1000)
    assert plain.role_reason == "role_cue=False"
    assert reply.fused == pytest.approx(0.5 * next(tr for tr in plain.trace if tr.seq == 1).fused)
    with pytest.raises(ConfigError, match="role_cue"):
        MemoryConfig(role_cue="yes")


def test_undoing_a_failed_edit_writes_under_the_directory_lock_and_counts_the_write(tmp_path, monkeypatch):
    import struct

    from meve.retrieval.directory import LOCK_FILE, lock_at

    path = tmp_path / "db"
    m = MomentaryMemory("undo", path=str(path), embedders=[FakeEmbedder()], clock=Clock())
    m.add_many([{"text": "the old text about otters", "turn_id": "x"}])
    col = m._store.collections[0]
    real_add, real_upsert = col.add, col.upsert
    lock = lock_at(path)
    seen: list[tuple[int, int]] = []  # (lock depth, write count) at each upsert: the edit's, then the undo's

    def counted() -> int:
        return struct.unpack("<Q", (path / LOCK_FILE).read_bytes()[:8])[0]

    def upsert(self, **kwargs):  # bound to the collection, and named so, as Chroma's own method is
        seen.append((lock._depth, counted()))
        return real_upsert(**kwargs)

    def failing_add(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(col, "upsert", types.MethodType(upsert, col))
    monkeypatch.setattr(col, "add", failing_add)
    with pytest.raises(StoreError, match="disk full"):
        m.add_many([{"text": "the new text about seals", "turn_id": "x"}, "a new turn"], supersede=True)
    monkeypatch.setattr(col, "add", real_add)
    assert len(seen) == 2 and all(depth > 0 for depth, _ in seen)  # the undo, too, holds the lock other processes wait on
    assert seen[1][1] > seen[0][1]  # and is counted, so they reload after it
    assert [t.text for t in m.turns()] == ["the old text about otters"]


def _format_1_session(path: str, session: str, items: list[tuple[str, str, str]]) -> None:
    """A session as meve 0.1.0 left it: turns (role, text, id) in time order, and no format in the
    collections' metadata (the rows' fields were the same)."""
    old = MomentaryMemory(session, path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=Clock())
    old.add_many([{"text": text, "role": role, "turn_id": tid} for role, text, tid in items])
    for col in old._store.collections:
        meta = {k: v for k, v in (col.metadata or {}).items() if k != "meve:format" and not k.startswith("hnsw:")}
        col.modify(metadata=meta)
    old.close()


def _by_position(thread: list[tuple[str, str]], stored: list[int]) -> list[tuple[str, str, str]]:
    from meve.memory.ids import position_id

    return [(thread[i][0], thread[i][1], position_id(thread[i][0], i, thread[i][1])) for i in stored]


def test_a_session_recorded_before_0_2_0_is_re_keyed_once_and_recording_the_thread_again_adds_nothing(tmp_path, caplog):
    from meve.integration import Message, chat_context

    path = str(tmp_path / "db")
    thread = [("system", "Be brief."), ("user", "ok"), ("assistant", "Noted."), ("user", "ok"), ("user", "What did I say first?")]
    _format_1_session(path, "old", _by_position(thread, [1, 2, 3]))
    later = Clock()
    later.now += timedelta(days=1)
    with caplog.at_level("WARNING", logger="meve"):
        m = MomentaryMemory("old", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=later)
    assert "3 turn(s) re-keyed" in caplog.text and len(m) == 3
    assert (m._store.collections[0].metadata or {})["meve:format"] == 2
    messages = [Message(role, text) for role, text in thread]
    out = chat_context(messages, m, l_max=500)
    assert len(m) == 4  # the three stored turns are the same three (the two "ok"s stay two), the question is new
    history = [msg for msg in out if msg.id and msg.id.startswith("meve-")]
    assert "What did I say first?" not in [msg.text for msg in history]  # the current question is not recalled as history
    for handle in (m, MomentaryMemory("old", path=path, embedders=[FakeEmbedder(48, "b")], clock=Clock())):
        assert sorted(t.text for t in handle.turns()) == sorted(["ok", "Noted.", "ok", "What did I say first?"])
    second = m._store.collections[1]
    assert sorted(second.get()["ids"]) == sorted(t.id for t in m.turns())  # the secondary collection was re-keyed too


def test_a_session_keyed_by_content_before_the_marker_is_left_as_it_is(tmp_path):
    from meve.integration import Message, _turn_ids

    path = str(tmp_path / "db")
    thread = [("user", "ok"), ("assistant", "Noted."), ("user", "ok"), ("user", "ok")]
    ids = _turn_ids([Message(r, t) for r, t in thread])
    _format_1_session(path, "content", [(r, t, i) for (r, t), i in zip(thread, ids, strict=True)])
    m = MomentaryMemory("content", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=Clock())
    assert [t.id for t in m.turns()] == ids


def test_turns_stored_twice_by_an_upgrade_without_migration_become_one(tmp_path):
    from meve.integration import Message, _turn_ids

    path = str(tmp_path / "db")
    thread = [("user", "Book a table for two."), ("assistant", "Done: 8 pm."), ("user", "Book a table for two.")]
    ids = _turn_ids([Message(r, t) for r, t in thread])
    # 0.1.0 before the id change stored the thread by position; 0.1.0 after it recorded it again by content.
    _format_1_session(path, "twice", [*_by_position(thread, [0, 1, 2]), *[(r, t, i) for (r, t), i in zip(thread, ids, strict=True)]])
    raw = MomentaryMemory("twice", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=Clock(), create=False)
    assert len(raw) == 5 and raw._store.format == 1  # a read-only open reads it as it is, changing nothing
    raw.close()
    m = MomentaryMemory("twice", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=Clock())
    assert sorted(t.id for t in m.turns()) == sorted(ids)


def test_a_session_of_a_newer_meve_is_refused(tmp_path):
    from meve.core.formats import FormatError

    path = str(tmp_path / "db")
    m = MomentaryMemory("new", path=path, embedders=[FakeEmbedder()], clock=Clock())
    m.add("hello")
    col = m._store.collections[0]
    col.modify(metadata={**{k: v for k, v in col.metadata.items() if not k.startswith("hnsw:")}, "meve:format": 9})
    m.close()
    with pytest.raises(FormatError, match="newer meve"):
        MomentaryMemory("new", path=path, embedders=[FakeEmbedder()], clock=Clock())


KILLED_MID_SESSION_MIGRATION = """
import os, signal, sys
sys.path[:0] = [{shared!r}, {root!r}]
from meve import MomentaryMemory
from meve.memory import session
from tests.fakes import FakeEmbedder

real = session.SessionStore.delete

def die(self, col, ids):  # the primary's new rows are written, its old ones not yet deleted
    if col is self.collections[0] and ids:
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, col, ids)

session.SessionStore.delete = die
MomentaryMemory("old", path={path!r}, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")])
"""


def test_a_session_migration_killed_midway_leaves_each_turn_once_when_opened_again(tmp_path):
    # "ok" twice: its second copy's new id is the first copy's old one (occurrence 1 and position 1 hash
    # alike), so after the kill the old and new rows could not be told apart by their ids alone.
    import subprocess
    import sys

    from meve.integration import Message, _turn_ids, chat_context

    path = str(tmp_path / "db")
    thread = [("system", "Be brief."), ("user", "ok"), ("assistant", "Noted."), ("user", "ok"), ("user", "What did I say first?")]
    _format_1_session(path, "old", _by_position(thread, [1, 2, 3]))
    root = Path(__file__).resolve().parents[2]
    code = KILLED_MID_SESSION_MIGRATION.format(shared=str(root / "shared"), root=str(root), path=path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert out.returncode == -9, out.stderr[-2000:]
    later = Clock()
    later.now += timedelta(days=1)
    m = MomentaryMemory("old", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=later)
    messages = [Message(role, text) for role, text in thread]
    expected = [tid for (role, _), tid in zip(thread, _turn_ids(messages), strict=True) if role != "system"][:3]
    assert sorted(t.id for t in m.turns()) == sorted(expected) and sorted(t.text for t in m.turns()) == ["Noted.", "ok", "ok"]
    assert sorted(m._store.collections[1].get()["ids"]) == sorted(expected)
    chat_context(messages, m, l_max=500)
    assert len(m) == 4  # recording the thread again adds only the question
