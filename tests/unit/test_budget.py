from meve.core.budget import Ledger, shrink_to_fit
from meve.core.records import Passage
from meve.core.tokens import CallableTokenCounter
from meve.pipeline.phases import pack_budget

# A fake counter, named as one: words, plus 4 once a text holds two or more paragraph breaks.
FAKE = CallableTokenCounter(lambda t: len(t.split()) + (4 if t.count("\n\n") >= 2 else 0), "fake-words")


def render(items):
    return "\n\n".join(f"w{i} x y" for i in items)


def test_drops_from_the_end_of_priority_until_the_rendered_text_fits():
    kept, dropped, text, total = shrink_to_fit([3, 1, 2], render, FAKE, 10)
    assert kept == [3, 1] and dropped == [(2, 13)] and total == FAKE.count(text) == 6


def test_never_drops_what_must_stay_and_stops_when_only_that_is_left():
    kept, dropped, _, total = shrink_to_fit([3, 1, 2], render, FAKE, 2, keep={3})
    assert kept == [3] and [k for k, _ in dropped] == [2, 1] and total == 3  # over the limit: the kept item alone is 3
    assert shrink_to_fit([], render, FAKE, 0) == ([], [], "", 0)


def test_the_ledger_charges_a_separator_from_the_second_item_and_refuses_without_side_effects():
    ledger = Ledger(limit=10, separator=2)
    assert ledger.take(4) == 4  # the first item has no separator before it
    assert ledger.cost(4) == 6 and ledger.take(5) is None  # 5 + 2 > 6 left: refused
    assert (ledger.used, ledger.items, ledger.left) == (4, 1, 6)
    assert ledger.take(4) == 6 and ledger.left == 0 and ledger.take(0) is None  # even an empty item needs its separator


def test_passage_packing_accounts_as_the_ledger_does():
    passages = [Passage(id=f"p{i}", text="x") for i in range(4)]
    out = pack_budget(passages, [4, 5, 4, 1], t_max=10, separator_tokens=2)
    # p0 (4), p1 refused (7 > 6 left), p2 (4 + 2 = 6), p3 refused (1 + 2 > 0 left): what memory's ledger would do.
    assert [p.id for p in out.kept] == ["p0", "p2"] and out.info["packed_tokens"] == 10
    assert [d.id for d in out.dropped] == ["p1", "p3"] and "needs 7 tokens, 6 left" in out.dropped[0].reason
