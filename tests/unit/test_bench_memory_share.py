"""benchmarks/memory_share.py's settings patch the relevance fill for the benchmark only, the shipped
form is the library's own, and the choice keeps the follow-up probes' replies (the condition the
module fixes)."""

from __future__ import annotations

from benchmarks import memory_share as share
from meve import MemoryConfig
from meve.memory import select


def test_each_patched_setting_replaces_the_relevance_fill_only_inside_its_block():
    shipped = select._take_in_order
    for name in ("share", "share, best whole, cut misfits"):
        with share.variant(name):
            assert select._take_in_order is not shipped
        assert select._take_in_order is shipped
    for name in ("shipped", "share, best whole"):  # the selection before, and the library's own form
        with share.variant(name):
            assert select._take_in_order is shipped


def test_the_setting_before_is_the_library_with_its_cap_off_and_the_chosen_one_its_default():
    assert MemoryConfig().cap_turns is True
    assert share.FIELDS == {"shipped": {"cap_turns": False}}


def test_a_setting_that_keeps_less_of_a_reply_anywhere_is_not_allowed():
    follow = {
        "beam": {"probes": 30, "256": {"shipped": {"coverage": 0.5}, "share": {"coverage": 0.5}, "cut": {"coverage": 0.49}}},
        "realmem": {"probes": 30, "256": {"shipped": {"coverage": 0.4}, "share": {"coverage": 0.6}, "cut": {"coverage": 0.9}}},
    }
    assert share.allowed(follow, ["shipped", "share", "cut"]) == ["shipped", "share"]
