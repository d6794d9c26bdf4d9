"""benchmarks/memory_lean.py's settings patch the shipped rule for the benchmark only, and the choice
respects the condition the module fixes (a long follow-up keeps a reply that fits)."""

from __future__ import annotations

from benchmarks import memory_lean as lean
from meve.memory import decide, select


def test_each_setting_patches_only_inside_its_block():
    before = (decide.decide_recent_cap, decide.leans_on_latest, select._recent)
    with lean.variant("capped"):
        assert decide.decide_recent_cap is lean.capped_cap and select._recent is before[2]
    with lean.variant("cut half"):
        assert select._recent is lean.half_recent and decide.leans_on_latest is before[1]
    with lean.variant("shipped"):
        assert (decide.decide_recent_cap, decide.leans_on_latest, select._recent) == before
    assert (decide.decide_recent_cap, decide.leans_on_latest, select._recent) == before


def test_capped_cuts_a_long_querys_reply_and_compete_lets_it_compete():
    query = "Can you suggest some fulfilling career paths that involve helping others?"
    assert decide.decide_recent_cap(0.0625, 256, query, True, False) == (None, "")
    assert lean.capped_cap(0.0625, 256, query, True, False)[0] == 128
    assert lean.capped_cap(0.0625, 256, "Continue", True, False) == (None, "")  # a short query keeps all the room
    assert lean.compete_leans(query, decide.Nearby(True, 0.1), 0.3)[0] is False
    assert lean.compete_leans("Continue", decide.Nearby(True, 0.1), 0.3)[0] is True
    assert set(lean.KEEP_FOLLOW_UPS) == {"shipped", "cut half"}
