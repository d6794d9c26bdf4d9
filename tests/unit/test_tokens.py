import shutil

import pytest

from meve import InputError, get_token_counter
from meve.core.tokens import CallableTokenCounter, HFTokenCounter, OpenAIEncodingCounter, RegexTokenCounter, count_many
from tests.conftest import shared_data

TEXT = "MeVe verifies, de-duplicates and budgets context — naïve café ✓ 12345."


def test_default_is_o200k_offline():
    c = get_token_counter()
    assert c.name.startswith("o200k_base")
    assert c.count(TEXT) > 5
    assert c.count("") == 0


def test_tiktoken_from_a_prepared_cache_matches_bpe_openai(tmp_path, monkeypatch):
    src = shared_data("tiktoken", "o200k_base.tiktoken")
    shutil.copy(src, tmp_path / "fb374d419588a4632f3f557e76b4b70aebbca790")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tk = OpenAIEncodingCounter("o200k_base")
    assert tk.backend == "tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    offline = OpenAIEncodingCounter("o200k_base")
    assert offline.backend == "bpe-openai"
    for text in (TEXT, "hello world", "def f(x):\n    return x ** 2\n"):
        assert tk.encode(text) == offline.encode(text)


def test_model_names_map_to_encodings():
    assert OpenAIEncodingCounter("gpt-4o").encoding_name == "o200k_base"
    assert OpenAIEncodingCounter("gpt-4").encoding_name == "cl100k_base"
    with pytest.raises(InputError, match="not-a-model"):
        OpenAIEncodingCounter("not-a-model")


@pytest.mark.parametrize("counter", [get_token_counter(), RegexTokenCounter(), CallableTokenCounter(lambda t: len(t.split()))])
def test_truncate_fits(counter):
    text = TEXT + " 漢字テスト🙂🙂"
    for n in range(1, counter.count(text) + 1):  # every cut, including inside multi-byte characters
        cut = counter.truncate(text, n)
        assert counter.count(cut) <= n
        assert text.startswith(cut)
    assert counter.truncate(TEXT, 10_000) == TEXT


def test_hf_tokenizer_and_callable_specs():
    from transformers import AutoTokenizer

    from meve.scoring.registry import default_model_path

    hf = get_token_counter(AutoTokenizer.from_pretrained(default_model_path()))
    assert isinstance(hf, HFTokenCounter) and hf.count("hello world") == 2
    assert get_token_counter(len).count("abc") == 3
    with pytest.raises(InputError, match="token_counter=3"):
        get_token_counter(3)


@pytest.mark.parametrize("n", [3, 300])
def test_count_many_matches_count_below_and_above_the_batch_threshold(n):
    counter = get_token_counter("o200k_base")
    texts = [f"passage {i}: " + "word " * (i % 17) for i in range(n)]
    assert count_many(counter, texts) == [counter.count(t) for t in texts]


def test_a_stamp_holds_its_count_only_for_the_text_it_counted():
    from meve.core.tokens import read_stamp, stamp, stamp_key

    text = "Oxygen is a chemical element with symbol O."
    kept = stamp(text, 11)
    assert read_stamp(kept, text) == 11
    assert read_stamp(kept, text + " Edited.") is None  # edited since: recount
    assert read_stamp(kept, text.replace("O.", "0.")) is None  # same length, other text
    for bad in (None, 11, "", "x:y", f"-1:{kept.split(':')[1]}"):
        assert read_stamp(bad, text) is None
    # Only counters whose name pins their counts are stamped; both backends of one encoding share a key.
    assert stamp_key(get_token_counter("o200k_base")) == "meve:tokens:o200k_base"
    assert stamp_key(RegexTokenCounter()) == "meve:tokens:regex"
    assert stamp_key(CallableTokenCounter(lambda t: len(t.split()))) is None
