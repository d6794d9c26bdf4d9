"""Issue 78 #7: migrating an unmarked (format 1) chat session over real Chroma, with FakeEmbedder.

Two writers left unmarked sessions: builds before the 0.1.0 release (7d57c2a) keyed an id-less
message by its position in the thread; 0.1.0 as released (49180b1) keyed it by content and
occurrence, as today. Every position-keyed turn must be re-keyed, wherever in the thread it
stood, and a content-keyed one never.
"""

from __future__ import annotations

from datetime import timedelta

from meve import MomentaryMemory
from meve.integration import Message, _turn_ids, record_messages
from meve.memory import migrate
from meve.memory.ids import position_id
from meve.memory.migrate import rekeyed
from meve.memory.records import Turn
from tests.fakes import FakeEmbedder
from tests.unit.test_memory import T0, Clock, _format_1_session


def _open(path: str) -> MomentaryMemory:
    later = Clock()
    later.now += timedelta(days=1)  # after every turn the old session holds
    return MomentaryMemory("old", path=path, embedders=[FakeEmbedder(32, "a"), FakeEmbedder(48, "b")], clock=later)


def _agent_thread(exchanges: int, calls: int) -> list[Message]:
    """A system prompt, then per exchange: the question, a system note, ``calls`` tool calls each
    with its result (none of these stored by either writer), and the answer: 2 stored turns in
    3 + 2 * calls messages."""
    thread = [Message("system", "You are a travel agent with tools.")]
    for i in range(exchanges):
        thread.append(Message("user", f"Question {i}: which trains run from Oslo to Bergen on day {i}?"))
        thread.append(Message("system", f"Today is day {i}."))
        for c in range(calls):
            thread.append(Message("assistant", "", tool_calls=True))
            thread.append(Message("tool", f"timetable page {c} for day {i}"))
        thread.append(Message("assistant", f"Answer {i}: the {7 + i % 12}:05 train, platform {i % 5}."))
    return thread


def test_every_position_keyed_turn_of_a_long_agent_thread_is_re_keyed_once(tmp_path, caplog):
    # 150 exchanges of 13 messages: the last answer stands at position 1950, past the old search's
    # 4 * 300 + 512 = 1712, which left 37 turns under their position ids.
    path = str(tmp_path / "db")
    thread = _agent_thread(150, 5)
    stored = [i for i, m in enumerate(thread) if m.role in ("user", "assistant") and m.text]
    assert len(stored) == 300 and stored[-1] == 1950
    _format_1_session(path, "old", [(thread[i].role, thread[i].text, position_id(thread[i].role, i, thread[i].text)) for i in stored])
    with caplog.at_level("WARNING", logger="meve"):
        m = _open(path)
    record_messages(thread, m, tools=False)  # the adapters recording the whole thread again
    assert len(m) == 300  # 337 before: the turns left under position ids were stored a second time
    expected = [tid for i, tid in enumerate(_turn_ids(thread)) if i in set(stored)]
    assert sorted(t.id for t in m.turns()) == sorted(expected)  # each turn once, under the id the adapters give it now
    assert sorted(m._store.collections[1].get()["ids"]) == sorted(expected)
    assert "300 turn(s) re-keyed" in caplog.text and "keyed by position" in caplog.text


def test_a_session_released_0_1_0_keyed_by_content_keeps_every_id_and_says_so(tmp_path, caplog):
    # 0.1.0 counted occurrences over every id-less message, tool calls included: the second
    # "Let me check." is occurrence 1 though it is the first stored. Read as a position (1, past
    # the previous one), it was re-keyed to occurrence 0, and recording the thread again stored it twice.
    path = str(tmp_path / "db")
    thread = [
        Message("user", "Find me a flight to Oslo on Friday."),
        Message("assistant", "Let me check.", tool_calls=True),
        Message("tool", "SK4035 08:10, DY1303 17:45"),
        Message("assistant", "SK4035 leaves at 08:10 and DY1303 at 17:45."),
        Message("user", "And a hotel near the station?"),
        Message("assistant", "Let me check."),
        Message("user", "Thanks, book the morning flight."),
        Message("assistant", "Booked SK4035."),
    ]
    ids = _turn_ids(thread)
    kept = [(m.role, m.text, tid) for m, tid in zip(thread, ids, strict=True) if m.role != "tool" and not m.tool_calls]
    _format_1_session(path, "old", kept)
    with caplog.at_level("WARNING", logger="meve"):
        m = _open(path)
    assert sorted(t.id for t in m.turns()) == sorted(tid for _, _, tid in kept)
    assert "keyed by position" not in caplog.text and "keyed by content" in caplog.text
    record_messages(thread, m, tools=False)
    assert len(m) == len(kept) == 6  # 7 before: "Let me check." stored again under its own id


def _turns(items: list[tuple[str, str, str]]) -> list[Turn]:
    return [Turn(id=tid, role=role, text=text, timestamp=T0 + timedelta(minutes=i), seq=i) for i, (role, text, tid) in enumerate(items)]


def test_a_migration_cut_short_is_finished_past_the_turns_it_moved():
    # A kill mid-write leaves the first turns under content ids and the rest under position ids:
    # the moved ones do not end the thread's positions, each later one is still re-keyed.
    thread = _agent_thread(40, 3)
    stored = [i for i, m in enumerate(thread) if m.role in ("user", "assistant") and m.text]
    content = dict(zip(range(len(thread)), _turn_ids(thread), strict=True))
    items = [(thread[i].role, thread[i].text, content[i] if k < 30 else position_id(thread[i].role, i, thread[i].text)) for k, i in enumerate(stored)]
    plan = rekeyed(_turns(items))
    assert plan == {tid: content[i] for k, ((_, _, tid), i) in enumerate(zip(items, stored, strict=True)) if k >= 30}


def test_an_id_shaped_like_meves_but_not_one_is_kept_and_named(monkeypatch, caplog):
    monkeypatch.setattr(migrate, "SEARCH_GUARD", 5_000)
    thread = ["Hello there.", "Hi! How can I help?", "Book a table."]
    items = [
        ("user" if i % 2 == 0 else "assistant", text, position_id("user" if i % 2 == 0 else "assistant", 3 * i + 1, text)) for i, text in enumerate(thread)
    ]
    items.insert(1, ("user", "A note of the caller's.", "msg-" + "0" * 24))
    with caplog.at_level("WARNING", logger="meve"):
        plan = rekeyed(_turns(items))
    assert "msg-000000000000000000000000" in caplog.text and "msg-" + "0" * 24 not in plan
    assert sorted(plan) == sorted(tid for _, _, tid in items if tid != "msg-" + "0" * 24)
