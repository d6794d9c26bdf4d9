"""LongMemEval's loader, on small files in LongMemEval's format written here with their own
sample list (so it needs no fetched data): each question is one conversation, its sessions in
date order whatever the file's order, its evidence the turns marked ``has_answer``, a session held
twice kept with its own ids, blank turns dropped, the type mapped to the shared names, and each
question on the side of the split its id gives. The last test checks the fetched sample."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.conversations import EXTERNAL, LONGMEMEVAL_HELDOUT, LONGMEMEVAL_SAMPLE, longmemeval
from benchmarks.harness.splits import split_of

TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session", "temporal-reasoning", "knowledge-update")


def _item(qid: str, qtype: str) -> dict[str, Any]:
    chat = [{"role": "user", "content": "Any tips for sourdough?"}, {"role": "assistant", "content": "Feed the starter daily."}]
    answer = [
        {"role": "user", "content": "I moved to Zurich in March.", "has_answer": True},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "Zurich is lovely."},
    ]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "Where did I move?",
        "question_date": "2023/05/30 (Tue) 23:40",
        "answer": "Zurich",
        "answer_session_ids": ["answer_1"],
        # Out of date order on purpose, and one distractor session held twice.
        "haystack_dates": ["2023/05/21 (Sun) 10:00", "2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 09:00"],
        "haystack_session_ids": ["bake_0", "answer_1", "bake_0"],
        "haystack_sessions": [chat, answer, chat],
    }


def _write(folder: Path, items: list[dict[str, Any]]) -> Path:
    lines = []
    for item in items:
        name = f"3_{item['question_id']}.json"
        (folder / name).write_text(json.dumps(item))
        lines.append(f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}")
    sample = folder / "sample.sha256"
    sample.write_text("\n".join(lines) + "\n")
    return sample


def test_each_question_is_a_dated_history_with_the_turns_it_marks_as_evidence(tmp_path: Path):
    items = [_item(f"q{i:03d}", TYPES[i % len(TYPES)]) for i in range(12)]
    sets = longmemeval(root=tmp_path, sample=_write(tmp_path, items))
    convs = {c.name: c for part in sets.values() for c in part}
    assert len(convs) == 12 and all(sets[side] for side in ("dev", "test"))
    conv = convs["longmemeval-q003"]
    assert [t.id for t in conv.turns] == ["answer_1/0", "answer_1/2", "bake_0/0", "bake_0/1", "bake_0~2/0", "bake_0~2/1"]
    assert [t.role for t in conv.turns[:2]] == ["user", "assistant"]
    assert conv.turns[0].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc)
    assert conv.turns[1].timestamp == datetime(2023, 5, 20, 2, 23, tzinfo=timezone.utc)  # its place in the session, the blank turn dropped
    (q,) = conv.questions
    assert (q.id, q.text, q.evidence, q.category) == ("longmemeval:q003:q003", "Where did I move?", ("answer_1/0",), "multi-hop")
    categories = [convs[f"longmemeval-q{i:03d}"].questions[0].category for i in range(6)]
    assert categories == ["single-hop", "single-hop-assistant", "preference", "multi-hop", "temporal", "knowledge-update"]
    for side, part in sets.items():
        assert all(split_of(q.id) == side for c in part for q in c.questions)


def test_a_question_with_no_marked_turn_is_refused_not_scored_as_empty(tmp_path: Path):
    item = _item("q_abs", "multi-session")
    item["haystack_sessions"][1][0].pop("has_answer")
    with pytest.raises(ValueError, match="q_abs marks no turn has_answer"):
        longmemeval(root=tmp_path, sample=_write(tmp_path, [item]))


def test_the_fetched_sample_loads_ten_questions_of_each_type():
    first = LONGMEMEVAL_SAMPLE.read_text().split()[1]
    if not (EXTERNAL / "longmemeval" / first).exists():
        pytest.skip("needs benchmarks/.cache/external/longmemeval (fetched as benchmarks/DATA.md says)")
    sets = longmemeval()
    questions = [q for part in sets.values() for c in part for q in c.questions]
    kinds = ("single-hop", "single-hop-assistant", "preference", "multi-hop", "temporal", "knowledge-update")
    assert Counter(q.category for q in questions) == dict.fromkeys(kinds, 10)
    for part, convs in sets.items():
        for conv in convs:
            ids = {t.id for t in conv.turns}
            assert [t.timestamp for t in conv.turns] == sorted(t.timestamp for t in conv.turns) and len(ids) == len(conv.turns)
            assert all(split_of(q.id) == part and set(q.evidence) <= ids for q in conv.questions)


def test_the_held_out_sample_shares_no_question_with_the_lodo_sample():
    names = [{line.split()[1] for line in f.read_text().splitlines()} for f in (LONGMEMEVAL_SAMPLE, LONGMEMEVAL_HELDOUT)]
    assert [len(n) for n in names] == [60, 60] and not names[0] & names[1]
    ids = [{n.split("_")[-1] for n in ns} for ns in names]  # the question id ends the file name
    assert not ids[0] & ids[1]


def test_the_fetched_held_out_sample_loads_ten_questions_of_each_type():
    first = LONGMEMEVAL_HELDOUT.read_text().split()[1]
    if not (EXTERNAL / "longmemeval" / first).exists():
        pytest.skip("needs benchmarks/.cache/external/longmemeval with the held-out files (benchmarks/DATA.md)")
    questions = [q for part in longmemeval(sample=LONGMEMEVAL_HELDOUT).values() for c in part for q in c.questions]
    kinds = ("single-hop", "single-hop-assistant", "preference", "multi-hop", "temporal", "knowledge-update")
    assert Counter(q.category for q in questions) == dict.fromkeys(kinds, 10)
