"""MemoryBank's evidence labels (annotated for meve; the data set ships none) stay consistent with
the data: every user labelled, every label a turn id of the documented form, and (where the
fetched files exist) every label names a real turn and every question keeps its split."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.harness.conversations import EXTERNAL, MEMORYBANK_EVIDENCE, NAMES_A_DATE, memorybank
from benchmarks.harness.splits import MEMORYBANK_USERS, split_of

TURN = re.compile(r"^\d\d-\d\d/\d+[qr]$")


def _labels() -> dict[str, list[list[str]]]:
    return {k: v for k, v in json.loads(MEMORYBANK_EVIDENCE.read_text()).items() if not k.startswith("_")}


def test_every_user_is_labelled_with_turn_ids_of_the_documented_form():
    labels = _labels()
    assert set(labels) == set(MEMORYBANK_USERS)
    assert all(TURN.match(t) for qs in labels.values() for ev in qs for t in ev)
    assert sum(1 for qs in labels.values() for ev in qs if not ev) == 1  # John Zhang's May 5th: no such day


def test_a_question_naming_a_day_or_asking_for_a_date_is_temporal():
    assert NAMES_A_DATE.search("On May 4th, what did you recommend?") and NAMES_A_DATE.search("what was the specific date of that day?")
    assert not NAMES_A_DATE.search("I may have mentioned a park. What did I see there?")


def test_the_loader_keeps_every_labelled_question_in_its_users_split():
    if not (EXTERNAL / "memorybank" / "memory_bank_en.json").exists():
        pytest.skip("needs benchmarks/.cache/external/memorybank (fetched as benchmarks/DATA.md says)")
    sets = memorybank()
    labelled = sum(1 for qs in _labels().values() for ev in qs if ev)
    assert sum(len(c.questions) for part in sets.values() for c in part) == labelled
    for part, convs in sets.items():
        for conv in convs:
            ids = {t.id for t in conv.turns}
            assert [t.timestamp for t in conv.turns] == sorted(t.timestamp for t in conv.turns)
            for q in conv.questions:
                assert split_of(q.id) == part and set(q.evidence) <= ids
