import json
import random

import numpy as np
import pytest

from meve import ConfigError
from meve.cli.commands import demo_corpus
from meve.retrieval.bm25 import BACKENDS, Bm25sBackend, IncrementalBM25, RankBM25Backend, make_bm25, top_k
from meve.retrieval.terms import stemmed_tokenize, terms_held
from tests.conftest import shared_data


def _corpus():
    return [p["text"] for p in demo_corpus()["passages"]]


def test_incremental_matches_bm25s_scores_after_each_add():
    texts = _corpus()
    inc = IncrementalBM25()
    rng = random.Random(0)
    queries = ["bicycle tyre comfort", "Karl Drais 1817 running machine", "gear chain sprocket", "volcano lava", "nothing matches zzz"]
    for i, t in enumerate(texts):
        inc.add([t])
        ref = Bm25sBackend(texts[: i + 1])
        q = rng.choice(queries)
        assert np.allclose(inc.get_scores(q), ref.get_scores(q), atol=1e-5), (i, q)


def test_incremental_scores_the_same_across_merges_of_its_tail(monkeypatch, tmp_path):
    # New postings go to a tail that is merged into the flat arrays once it is large; a tiny
    # threshold merges every few documents, also over a snapshot loaded memory-mapped.
    from meve.retrieval import bm25
    from meve.retrieval.lexical import LexicalIndex

    monkeypatch.setattr(bm25, "_COMPACT_MIN", 7)
    texts = _corpus()
    queries = ["bicycle tyre comfort", "Karl Drais 1817 running machine", "gear chain sprocket", "the wheel"]
    inc, merges = IncrementalBM25(), 0
    for i, t in enumerate(texts[:12]):
        inc.add([t])
        merges += not inc._tail
        for q in queries:
            np.testing.assert_allclose(inc.get_scores(q), Bm25sBackend(texts[: i + 1]).get_scores(q), atol=1e-5)
    assert merges >= 3
    index = LexicalIndex([f"d{i}" for i in range(12)], texts[:12])
    index.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded is not None
    merges = 0
    for i in range(12, len(texts)):
        loaded.add([f"d{i}"], [texts[i]])
        merges += not loaded.backend._tail
        for q in queries:
            np.testing.assert_allclose(loaded.backend.get_scores(q), IncrementalBM25(texts[: i + 1]).get_scores(q))
    assert merges >= 1  # merged over the mapped arrays


def test_rank_bm25_and_bm25s_agree_on_top_k_of_a_real_corpus():
    data = json.loads(shared_data("hotpotqa", "hotpot_dev_distractor_v1_first103.json").read_text())
    texts = list(dict.fromkeys(" ".join(s) for q in data[:40] for _, s in q["context"]))
    fast = Bm25sBackend(texts, method="robertson")
    ref = RankBM25Backend(texts)
    for q in data[:40]:
        a = [i for i, _ in top_k(fast.get_scores(q["question"]), 10)]
        b = [i for i, _ in top_k(ref.get_scores(q["question"]), 10)]
        assert a == b, q["question"]


def test_backends_by_name_and_unknown_name():
    for name in BACKENDS:
        bm = make_bm25(name, ["alpha beta", "beta gamma", "delta epsilon"])
        assert len(bm) == 3
        assert int(np.argmax(bm.get_scores("gamma"))) == 1
    with pytest.raises(ConfigError, match="'bm25s', 'rank-bm25', 'incremental'"):
        make_bm25("bm26")


def test_top_k_is_deterministic_and_skips_zero():
    assert top_k(np.array([0.0, 2.0, 2.0, 1.0]), 3) == [(1, 2.0), (2, 2.0), (3, 1.0)]
    assert top_k(np.array([0.0, 0.0]), 5) == []


@pytest.mark.parametrize("kind", ["distinct", "few values", "a handful positive", "ascending"])
def test_top_k_over_large_arrays_equals_a_full_sort(kind: str) -> None:
    # top_k selects from a strided sample's bound, not over the whole array: it must still give
    # exactly the full sort's answer, ties at the boundary and adversarial orders included.
    rng = np.random.default_rng(7)
    for _ in range(40):
        n, k = int(rng.integers(4_097, 40_000)), int(rng.integers(1, 80))
        scores = np.zeros(n)
        if kind == "distinct":
            scores = rng.random(n)
        elif kind == "few values":
            hit = rng.random(n) < 0.3
            scores[hit] = rng.integers(1, 4, int(hit.sum())).astype(float)
        elif kind == "a handful positive":
            scores[rng.integers(n, size=3)] = 1.0
        else:  # the best scores all sit between the sample's strides
            scores[np.arange(1, n, n // 4_096)[-k:]] = np.arange(1.0, k + 1.0)
        order = np.lexsort((np.arange(n), -scores))[:k]
        assert top_k(scores, k) == [(int(i), float(scores[i])) for i in order if scores[i] > 0]


# Words whose Snowball stems change their ending (y -> i, dropped e, -ational -> -ate, doubled
# consonants, irregular forms), beside digits, underscores and non-ASCII letters.
TRICKY = (  # noqa: SIM905 - a sentence of words reads better than 50 lines of a list
    "dying die dies lying lie tying tied happy happiness happily estate estates relational relate "
    "hoping hope hopping hop running runs generously generous skies sky news early only gently "
    "7th 888 avenue avenues used uses because user_id naïve naïvely café cafés Zürich zurich "
    "agreed agree agreement nationality national nation die-hard re-used"
).split()


def test_terms_held_is_stemming_every_word_restricted_to_the_query_terms():
    rng = random.Random(7)
    for _ in range(300):
        texts = [" ".join(rng.choice(TRICKY) + rng.choice(["", ",", ".", "'s", "!"]) for _ in range(rng.randint(0, 12))) for _ in range(5)]
        query = stemmed_tokenize(" ".join(rng.sample(TRICKY, 4)))
        expected = [frozenset(stemmed_tokenize(t)) & set(query) for t in texts]
        assert terms_held(query, texts) == expected, (query, texts)
    assert terms_held(["die", "7th"], ["Dying on the 7th day.", "diet", ""]) == [frozenset({"die", "7th"}), frozenset(), frozenset()]
