"""REALTALK's loader, on small files in REALTALK's format written here (so it needs no fetched
data): every message is a turn timed as sent, the file's first speaker is "user", a shared image
is described in the turn, an evidence string holding two ids, or a range, gives each, ids the
chat lacks are dropped (and a question left with none), categories get the shared names, and a chat's questions
stay on its side of the split. The last test checks the fetched files, where they exist."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks.harness.conversations import EXTERNAL, realtalk
from benchmarks.harness.splits import REALTALK_CHATS, split_of


def _message(speaker: str, text: str, when: str, dia: str, caption: str | None = None) -> dict[str, object]:
    m: dict[str, object] = {"clean_text": text, "speaker": speaker, "date_time": when, "img_file": [], "img_url": [], "dia_id": dia}
    if caption:
        m["img_file"], m["blip_caption"] = ["x.jpg"], caption
    return m


def _chat(name: str) -> dict[str, object]:
    a, b = name.split("_")[2:4]
    return {
        "name": {"speaker_1": a, "speaker_2": b},
        "session_1": [
            _message(a, "Hey! How are you?", "29.12.2023, 22:42:04", "D1:1"),
            _message(b, "Good! I am off to a bar in Miami tonight.", "30.12.2023, 00:32:20", "D1:2"),
            _message(b, "Look at this view", "30.12.2023, 00:33:00", "D1:3", caption="a beach at sunset"),
        ],
        "session_1_date_time": "29.12.2023, 22:42:04",
        "session_2": [_message(a, "I started skiing ten years ago.", "02.01.2024, 18:13:08", "D2:1")],
        "session_2_date_time": "02.01.2024, 18:13:08",
        "qa": [
            {"question": f"Where did {b} go out?", "answer": "Miami", "evidence": ["D1:2. D1:3"], "category": 1},
            {"question": f"When did {a} start skiing?", "answer": "2014", "evidence": ["D2:1", "D9:9"], "category": 2},
            {"question": "Which photo was missing?", "answer": "?", "evidence": ["D7:7", "D58", ""], "category": 3},
            {"question": f"What could {b} buy?", "answer": "art", "evidence": ["D1:3"], "category": 3},
            {"question": "What was said first?", "answer": "hello", "evidence": ["D1:1-D1:3"], "category": 1},
        ],
    }


def _write(folder: Path) -> None:
    for name in REALTALK_CHATS:
        (folder / f"{name}.json").write_text(json.dumps(_chat(name)))


def test_messages_become_timed_turns_and_questions_keep_the_evidence_they_name(tmp_path: Path):
    _write(tmp_path)
    sets = realtalk(root=tmp_path)
    convs = {c.name: c for part in sets.values() for c in part}
    assert len(convs) == 10 and all(len(sets[side]) == 5 for side in ("dev", "test"))
    conv = convs["realtalk-Chat_1_Emi_Elise"]
    assert [(t.id, t.role) for t in conv.turns] == [("D1:1", "user"), ("D1:2", "assistant"), ("D1:3", "assistant"), ("D2:1", "user")]
    assert conv.turns[0].text == "Emi: Hey! How are you?"
    assert conv.turns[2].text == "Elise: Look at this view [shares an image: a beach at sunset]"
    assert conv.turns[1].timestamp == datetime(2023, 12, 30, 0, 32, 20, tzinfo=timezone.utc)
    assert [(q.evidence, q.category) for q in conv.questions] == [
        (("D1:2", "D1:3"), "multi-hop"),
        (("D2:1",), "temporal"),
        (("D1:3",), "open-domain"),
        (("D1:1", "D1:2", "D1:3"), "multi-hop"),  # a range within a session names every message in it
    ]
    assert [q.id.rsplit(":", 1)[1] for q in conv.questions] == ["0", "1", "3", "4"]  # question 2 names no turn the chat has
    for side, part in sets.items():
        assert all(split_of(q.id) == side for c in part for q in c.questions)


def test_a_missing_chat_stops_the_loader_with_where_to_get_it(tmp_path: Path):
    _write(tmp_path)
    (tmp_path / "Chat_7_Nebraas_Vanessa.json").unlink()
    with pytest.raises(SystemExit, match=r"Chat_7_Nebraas_Vanessa\.json is missing"):
        realtalk(root=tmp_path)


def test_the_fetched_chats_load_in_time_order_with_evidence_among_their_turns():
    if not (EXTERNAL / "realtalk" / "Chat_1_Emi_Elise.json").exists():
        pytest.skip("needs benchmarks/.cache/external/realtalk (fetched as benchmarks/DATA.md says)")
    sets = realtalk()
    assert sum(len(c.questions) for part in sets.values() for c in part) == 705
    for part, convs in sets.items():
        for conv in convs:
            ids = {t.id for t in conv.turns}
            assert [t.timestamp for t in conv.turns] == sorted(t.timestamp for t in conv.turns) and len(ids) == len(conv.turns)
            assert all(split_of(q.id) == part and q.evidence and set(q.evidence) <= ids for q in conv.questions)
