import re

import pytest

from meve.core.text import chunk_spans, chunk_text
from meve.core.tokens import RegexTokenCounter, get_token_counter


@pytest.mark.parametrize("counter", [RegexTokenCounter(), get_token_counter()], ids=["regex", "bpe"])
def test_a_sentence_longer_than_a_chunk_is_split_not_cut(counter):
    long = "Then " + " ".join(f"word{i}, and then é{i}" for i in range(200)) + "."
    text = f"Short one. {long} Tail sentence here."
    assert counter.count(long) > 100
    chunks = chunk_text(text, 64, counter)
    assert all(counter.count(c) <= 64 for c in chunks)
    # Every non-space character of the text is in exactly one chunk, in order.
    assert re.sub(r"\s", "", "".join(chunks)) == re.sub(r"\s", "", text)
    assert chunks[0] == "Short one." and chunks[-1] == "Tail sentence here."


def test_short_sentences_are_grouped_up_to_the_budget():
    counter = RegexTokenCounter()
    text = "One two three. Four five six. Seven eight nine."
    spans = list(chunk_spans(text, 9, counter))  # 4 + 1 + 4 tokens
    assert [text[a:b] for a, b in spans] == ["One two three. Four five six.", "Seven eight nine."]
