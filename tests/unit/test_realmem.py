"""RealMem's loader, on small files in RealMem's format written here (so it needs no fetched data).
A query is asked mid-history, so the loader cuts each persona's history and asks each query of
the history before its cut; these tests pin that rule: a query goes to the last cut at or before
its session, and only when all its evidence lies before that cut; the evidence is the turn whose
speaker and text match the memory point's snapshot (a placeholder point with the wrong speaker
makes its query unusable); empty turns are dropped; a second session on one day follows the
first. The last test checks the fetched files, where they exist."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.conversations import EXTERNAL, realmem
from benchmarks.harness.splits import REALMEM_PERSONAS, split_of

R_PLAN = "Start with dplyr basics: filter, select and mutate, one a day."
BUDGET = "My budget for the Kyoto trip is 2000 euros."


def _memory(uuid: str, content: Any, role: str, snapshot: str, turn: int) -> dict[str, Any]:
    return {
        "index": f"{uuid}-01",
        "type": "Dynamic",
        "content": content,
        "source_turn": turn,
        "source_content_snapshot": snapshot,
        "source_role_snapshot": role,
        "session_uuid": uuid,
    }


def _query(qid: str, text: str, category: str, kind: str, used: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    ask = {"speaker": "User", "is_query": True, "content": text, "query_id": qid, "topic": "T", "category_name": category, "session_type": kind}
    reply = {"speaker": "Assistant", "is_query": False, "content": "Here is what we said.", "query_id": None}
    reply["memory_used"] = [{"session_uuid": u, "content": c} for u, c in used]
    reply["memory_session_uuids"] = [u for u, _ in used]
    return [ask, reply]


def _turns(*said: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"speaker": who, "is_query": False, "content": text, "query_id": None} for who, text in said]


def _session(i: int, day: str, turns: list[dict[str, Any]], memory: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "session_identifier": f"T:S{i}",
        "session_uuid": f"u{i}",
        "current_time": f"{day} (Friday)",
        "dialogue_turns": turns,
        "extracted_memory": memory or [],
    }


def _persona() -> dict[str, Any]:
    plan = ("u0", "【Plan】 dplyr basics first")
    budget = ("u1", {"trip": "Kyoto", "budget": "2000 EUR"})  # a few points hold a dict
    wish = ("u1", "【Hotel】 a quiet ryokan")  # a placeholder: the user's first turn, said to be the assistant's
    mood = ("u5", "【Mood】 tired of crowds")
    late = ("u6", "【Late】 said in session 6")
    sessions = [
        _session(0, "2025-12-19", _turns(("User", "I want to learn R for my thesis."), ("Assistant", R_PLAN)), [_memory(*plan, "Assistant", R_PLAN, 2)]),
        _session(
            1,
            "2025-12-19",
            _turns(("User", BUDGET), ("Assistant", "Noted."))
            + _query("Q-0000", "Too early: asked before the first cut.", "Dynamic Incremental", "single_session", [plan]),
            [_memory(*budget, "User", BUDGET, 0), _memory(*wish, "Assistant", BUDGET, 0)],
        ),
        _session(2, "2025-12-20", _turns(("User", " "), ("Assistant", "Are you there?"))),
        _session(3, "2025-12-22", _query("Q-0001", "What should I do next in R?", "Dynamic Incremental", "single_session", [plan])),
        _session(4, "2025-12-23", _query("Q-0002", "Has my trip budget changed?", "Dynamic Updating", "multi_session", [plan, budget])),
        _session(
            5,
            "2025-12-24",
            _turns(("User", "Crowds tire me."), ("Assistant", "Ok.")) + _query("Q-0003", "Any hotel ideas?", "Implicit Preference", "single_session", [wish]),
            [_memory(*mood, "User", "Crowds tire me.", 1)],
        ),
        _session(
            6,
            "2025-12-26",
            _turns(("User", "I said this late."), ("Assistant", "Ok."))
            + _query("Q-0004", "Where should I go?", "Implicit Preference", "single_session", [mood]),
            [_memory(*late, "User", "I said this late.", 1)],
        ),
        _session(7, "2025-12-27", _query("Q-0005", "What did I say late?", "Temporal-reasoning", "single_session", [late])),
        _session(8, "2025-12-28", _turns(("User", "Bye."), ("Assistant", "Bye."))),
        _session(9, "2025-12-29", _turns(("User", "Hello again."), ("Assistant", "Hi."))),
    ]
    return {"_metadata": {"person_name": "P", "total_sessions": len(sessions), "total_tokens": 0}, "dialogues": sessions}


def test_each_query_is_asked_of_the_history_before_its_cut_with_the_evidence_its_memory_came_from(tmp_path: Path):
    for person in REALMEM_PERSONAS:
        (tmp_path / f"{person}_dialogues_256k.json").write_text(json.dumps(_persona()))
    sets = realmem(root=tmp_path, parts=5)  # cuts before sessions 2, 4, 6 and 8
    assert [len(sets[side]) for side in ("dev", "test")] == [15, 15]
    convs = {c.name: c for part in sets.values() for c in part if c.name.startswith("realmem-Pak_Budi-")}
    assert sorted(convs) == ["realmem-Pak_Budi-1of5", "realmem-Pak_Budi-2of5", "realmem-Pak_Budi-3of5"]
    first, second, third = (convs[f"realmem-Pak_Budi-{k}of5"] for k in (1, 2, 3))
    # Q-0000 comes before the first cut; Q-0003's only point is a placeholder; Q-0005's evidence is
    # in session 6, its own cut's first session, so no history before the cut holds it.
    assert [[q.id for q in c.questions] for c in (first, second, third)] == [
        ["realmem:Pak_Budi:Q-0001"],
        ["realmem:Pak_Budi:Q-0002"],
        ["realmem:Pak_Budi:Q-0004"],
    ]
    assert [t.id for t in first.turns] == ["u0/0", "u0/1", "u1/0", "u1/1", "u1/2", "u1/3"]
    assert "u2/0" not in {t.id for t in second.turns} and "u2/1" in {t.id for t in second.turns}  # the blank turn is dropped
    assert [(q.evidence, q.category) for c in (first, second, third) for q in c.questions] == [
        (("u0/1",), "single-hop"),
        (("u0/1", "u1/0"), "knowledge-update"),
        (("u5/0",), "preference"),
    ]
    assert first.turns[2].timestamp == datetime(2025, 12, 19, 9, 2, tzinfo=timezone.utc)  # after the day's first session
    assert [t.role for t in first.turns[:2]] == ["user", "assistant"]
    assert len(third.turns) == len(second.turns) + 2 + 4  # sessions 4 and 5 joined the history
    for side, part in sets.items():
        assert all(split_of(q.id) == side for c in part for q in c.questions)


def test_a_missing_persona_stops_the_loader_with_where_to_get_it(tmp_path: Path):
    (tmp_path / "Adeleke_Okonjo_dialogues_256k.json").write_text(json.dumps(_persona()))
    with pytest.raises(SystemExit, match=r"Ethan_Hunt_dialogues_256k\.json is missing"):
        realmem(root=tmp_path)


def test_the_fetched_personas_load_with_evidence_before_every_question():
    if not (EXTERNAL / "realmem" / "Pak_Budi_dialogues_256k.json").exists():
        pytest.skip("needs benchmarks/.cache/external/realmem (fetched as benchmarks/DATA.md says)")
    sets = realmem()
    questions = [q.id for part in sets.values() for c in part for q in c.questions]
    assert len(questions) == len(set(questions)) == 214
    for part, convs in sets.items():
        for conv in convs:
            ids = {t.id for t in conv.turns}
            assert [t.timestamp for t in conv.turns] == sorted(t.timestamp for t in conv.turns) and len(ids) == len(conv.turns)
            assert all(split_of(q.id) == part and q.evidence and set(q.evidence) <= ids for q in conv.questions)
