"""The per-query arms of benchmarks/memory_weights.py decide what their docstring says."""

from __future__ import annotations

import pytest

from benchmarks.memory_weights import addressed_role, names_something, verdicts
from meve.memory.decide import decide_role


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("When did Caroline go to the support group?", True),
        ("What did I buy in 2023?", True),
        ('What did you say about "the long walk"?', True),
        ("Can you suggest some furniture for my living room?", False),
        ("I'm moving soon. Where should I look for flats?", False),  # "I'm" and a sentence's first word name nothing
    ],
)
def test_names_something(query: str, named: bool) -> None:
    assert names_something(query) is named


def test_the_addressee_of_a_request_is_not_the_assistants_turns() -> None:
    request = "Can you recommend some action games for me to try?"
    assert decide_role(True, request)[0] is None  # the library reads both persons
    assert addressed_role(True, request)[0] == "user"
    assert addressed_role(True, "Can you remind me what you suggested?")[0] is None  # "you suggested" still counts
    assert addressed_role(False, request)[0] is None


def test_verdicts_apply_the_rule() -> None:
    def row(shipped: float, other: float) -> dict[str, object]:
        return {"best_fill": 0.5, "margins": {"0.5": shipped, "unnamed at 0.35": other, "unnamed at 0.2": other, "addressee": shipped + 0.01}}

    v = verdicts({"a": {"256": row(0.1, 0.2), "512": row(0.1, 0.09)}})
    assert v["unnamed at 0.35"]["rows_below"] == 1 and not v["unnamed at 0.35"]["kept"]
    assert v["addressee"]["rows_below"] == 0 and v["addressee"]["kept"]
