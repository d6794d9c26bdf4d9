"""benchmarks/long_neighbours.py (issue 77 #2): each left-out set gets the setting with the higher
mean dev margin over the other sets, and the harness's plain chunks get the places their
frameworks would give them, so consecutive chunks join back into their document."""

from __future__ import annotations

import pytest

from benchmarks.harness.data import Dataset, Split, long_variant, pack
from benchmarks.long_neighbours import choose, places
from meve import get_token_counter
from meve.pipeline.neighbours import link, seam

COUNTER = get_token_counter()


def _set(off: float, on: float, three: tuple[float, float] | None = None) -> dict:
    """One set's dev row: the two settings' margins at t_max 512 and (default the same) at three chunks."""
    three = three or (off, on)
    arms = {"t_max_512": (off, on), "three_chunks": three}
    return {"budgets": {b: {"arms": {"off": {"margin": m[0]}, "on": {"margin": m[1]}}} for b, m in arms.items()}}


def test_each_left_out_set_gets_the_setting_with_the_higher_mean_dev_margin_over_the_others():
    dev = {
        "llamaindex-1024": {s: _set(m, m, (m, m + d)) for s, m, d in (("a", 0.1, 0.04), ("b", 0.2, -0.02), ("c", 0.0, 0.06))},
        "langchain-1000": {s: _set(0.1, 0.1) for s in "abc"},
    }
    # Left out "c": a +0.04 and b -0.02 at three chunks, nothing elsewhere -> on is 0.0025 higher on average; left out "a": -0.02 and +0.06.
    assert choose(dev, "c")["setting"] == "on" and choose(dev, "a")["setting"] == "on"
    assert choose(dev, "c")["dev_mean_margin"] == {"off": 0.125, "on": 0.1275}  # eight rows each: two sets, two variants, two budgets
    only_b = {"llamaindex-1024": {"a": _set(0.1, 0.15), "b": _set(0.1, 0.1, (0.1, 0.09))}}
    assert choose(only_b, "a")["setting"] == "off"  # only b's dev margins count, and one fell
    assert choose({"v": {"a": _set(0.1, 0.1)}}, "b")["setting"] == "off"  # a tie keeps the shipped setting


@pytest.mark.parametrize("variant", ["langchain-1000", "llamaindex-1024"])
def test_the_chunks_of_a_long_document_are_placed_in_it_and_join_back_into_it(variant):
    text = " ".join(f"Sentence {i} is about topic {i} and says a few more words on it." for i in range(300))
    short = "A short document of one sentence."
    ds = Dataset("toy", "none", "made here", {"dev": Split(documents=[("long", text), ("short", short)])})
    part = long_variant(ds, variant, COUNTER).splits["dev"]
    assert len(part.ids) > 3  # the long document is cut in several chunks, the short one packed after it or alone
    where = places(part, variant, COUNTER)
    linked = link(where, dict(zip(part.ids, part.texts, strict=True)))
    chain = [pid for pid in part.ids if pid.startswith("long#")]
    assert [linked[p].next for p in chain[:-1]] == chain[1:] and [linked[p].prev for p in chain[1:]] == chain[:-1]
    joined, at = part.texts[0], linked[chain[0]]
    for pid in chain[1:]:
        joined, _ = seam(joined, at, part.texts[part.ids.index(pid)], linked[pid])
    assert joined == dict(pack(ds.splits["dev"].documents, int(variant.split("-")[1]), COUNTER))["long"]  # the overlaps once, nothing lost
