"""benchmarks/memory_share.py's settings patch the relevance fill for the benchmark only, the shipped
form is the library's own, and the choice keeps the follow-up probes' replies (the condition the
module fixes)."""

from __future__ import annotations

from unittest import mock

import pytest

from benchmarks import memory_share as share
from meve import MemoryConfig, get_token_counter
from meve.memory import select
from tests.unit.test_memory_select import LONG, fits, neighbour, snapshot

COUNTER = get_token_counter()


def test_each_patched_setting_replaces_the_relevance_fill_only_inside_its_block():
    shipped = select._take_in_order
    for name in ("share", "share, best whole, cut misfits"):
        with share.variant(name):
            assert select._take_in_order is not shipped
        assert select._take_in_order is shipped
    for name in ("shipped", "share, best whole"):  # the selection before, and the library's own form
        with share.variant(name):
            assert select._take_in_order is shipped


@pytest.mark.parametrize("ranked", [[2, 3, 0, 1], [3, 2, 0, 1]])  # the long turn (3) second, then first
@pytest.mark.parametrize("l_max_of", [lambda full: full + 6, lambda full: full // 2, lambda full: 2 * full])
def test_the_librarys_cap_is_the_measured_form_share_best_whole(l_max_of, ranked):
    # The module measured "share, best whole" as a patch first, then as the library's cap_turns=True: the same choices.
    snap = snapshot(LONG)
    l_max = l_max_of(fits(snap, [0, 2, 3, 4]))
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    kw = {"recent": [4], "pinned": [], "ranked": ranked, "partner": neighbour(snap), "query": LONG[4][1]}
    library = select.select_turns(snap, cfg, COUNTER, **kw)
    with mock.patch.object(select, "_take_in_order", share.sharing(True, False)):
        patched = select.select_turns(snap, cfg, COUNTER, **kw)
    assert [(t.id, t.text) for t in library.turns] == [(t.id, t.text) for t in patched.turns]
    assert share.FIELDS == {"shipped": {"cap_turns": False}}  # the selection before: the library with its cap off


def test_a_setting_that_keeps_less_of_a_reply_anywhere_is_not_allowed():
    follow = {
        "beam": {"probes": 30, "256": {"shipped": {"coverage": 0.5}, "share": {"coverage": 0.5}, "cut": {"coverage": 0.49}}},
        "realmem": {"probes": 30, "256": {"shipped": {"coverage": 0.4}, "share": {"coverage": 0.6}, "cut": {"coverage": 0.9}}},
    }
    assert share.allowed(follow, ["shipped", "share", "cut"]) == ["shipped", "share"]
