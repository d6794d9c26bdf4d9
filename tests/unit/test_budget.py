from meve.budget import shrink_to_fit
from meve.tokens import CallableTokenCounter

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
