"""The per-query arms of benchmarks/memory_weights.py decide what their docstring says."""

from __future__ import annotations

import pytest

from benchmarks.memory_weights import addressed_role, lift_tops, names_something, verdicts
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


def test_lift_tops_puts_each_signals_first_pick_at_the_fused_top_in_their_own_order() -> None:
    fused = {0: 0.9, 1: 0.5, 2: 0.2, 3: 0.1}
    dense = {2: 0.8, 3: 0.7, 0: 0.1}
    bm25 = {3: 12.0, 0: 3.0}
    out = lift_tops(fused, [dense, bm25])
    assert sorted(out, key=lambda i: -out[i]) == [2, 3, 0, 1]  # 2 and 3 above 0, 2 over 3 as fused had them
    assert out[1] == fused[1] and fused == {0: 0.9, 1: 0.5, 2: 0.2, 3: 0.1}  # the rest, and the input, unchanged
    same = lift_tops(fused, [{0: 0.9}])  # the fused top already: the order stays
    assert sorted(same, key=lambda i: -same[i]) == [0, 1, 2, 3]
    assert lift_tops(fused, [{}]) == fused
