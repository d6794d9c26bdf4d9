import numpy as np
import pytest

from meve.phases import drop_redundant, fallback, novelty_select, pack_budget, verify
from meve.records import Passage


def p(pid, vec=None, **kw):
    return Passage(id=pid, text=f"text {pid}", embedding=None if vec is None else np.asarray(vec, dtype=np.float32), **kw)


def test_verify_keeps_at_or_above_tau_sorted_and_does_not_mutate():
    cands = (p("a", dense_score=0.9), p("b", dense_score=0.8), p("c", dense_score=0.7))
    out = verify(cands, [0.2, 0.9, 0.5], tau=0.5)
    assert [c.id for c in out.kept] == ["b", "c"]
    assert [c.relevance for c in out.kept] == [0.9, 0.5]
    assert [d.id for d in out.dropped] == ["a"] and "0.200 < tau 0.5" in out.dropped[0].reason
    assert all(c.relevance is None for c in cands)


def test_verify_rejects_mismatched_scores():
    with pytest.raises(ValueError, match="2 scores for 1"):
        verify((p("a"),), [0.1, 0.2], 0.5)


def test_fallback_only_when_too_few_and_without_duplicates():
    verified = (p("a", relevance=0.9),)
    lexical = [p("a", bm25_score=3.0), p("x", bm25_score=2.0), p("y", bm25_score=1.0), p("z", bm25_score=0.5)]
    out = fallback(verified, lexical, n_min=3, fallback_k=2)
    assert [c.id for c in out.kept] == ["a", "x", "y"]
    assert [c.source for c in out.kept] == ["retrieved", "fallback", "fallback"]
    assert out.info["already_verified"] == ["a"]
    enough = fallback(verified, lexical, n_min=1, fallback_k=2)
    assert [c.id for c in enough.kept] == ["a"] and enough.info["triggered"] is False


def test_fallback_needs_lexical_evidence_and_skips_what_the_verifier_rejected():
    lexical = [p("x", bm25_score=2.0), p("r", bm25_score=1.5), p("y", bm25_score=1.0), p("zero", bm25_score=0.0), p("z", bm25_score=0.8)]
    out = fallback((), lexical, n_min=3, fallback_k=3, min_bm25=0.9, rejected={"r": 0.05})
    assert [c.id for c in out.kept] == ["x", "y"]
    reasons = {d.id: d.reason for d in out.dropped}
    assert "rejected by the verifier (relevance 0.050)" in reasons["r"]
    assert "no lexical evidence: BM25 0.00 <= fallback_min_bm25 0.9" in reasons["zero"]
    assert "BM25 0.80 <= fallback_min_bm25 0.9" in reasons["z"]


def test_redundancy_keeps_the_higher_ranked_of_a_pair():
    cands = (p("first", [1, 0, 0]), p("dup", [0.99, 0.1, 0]), p("other", [0, 1, 0]))
    out = drop_redundant(cands, theta=0.9)
    assert [c.id for c in out.kept] == ["first", "other"]
    assert out.dropped[0].id == "dup" and "near-duplicate of first" in out.dropped[0].reason
    # Reversed ranking: the (now) higher-ranked duplicate survives instead.
    out2 = drop_redundant(tuple(reversed(cands)), theta=0.9)
    assert [c.id for c in out2.kept] == ["other", "dup"]


def test_redundancy_needs_embeddings():
    with pytest.raises(ValueError, match="has no embedding"):
        drop_redundant((p("a"),), 0.9)


def test_novelty_prefers_new_information_over_a_more_relevant_duplicate():
    cands = (p("best", [1, 0, 0], relevance=0.95), p("dup", [0.97, 0.2, 0], relevance=0.9), p("new", [0, 1, 0], relevance=0.6))
    out = novelty_select(cands, lam=0.5, theta=0.99)
    assert [c.id for c in out.kept][:2] == ["best", "new"]
    only_rel = novelty_select(cands, lam=1.0, theta=0.99)
    assert [c.id for c in only_rel.kept] == ["best", "dup", "new"]
    strict = novelty_select(cands, lam=0.5, theta=0.9)
    assert "dup" in [d.id for d in strict.dropped]


def test_pack_budget_never_exceeds_and_fills_with_smaller_later_passages():
    cands = (p("a"), p("b"), p("c"), p("d"))
    out = pack_budget(cands, [40, 70, 20, 10], t_max=75, separator_tokens=1)
    assert [c.id for c in out.kept] == ["a", "c", "d"]
    assert out.info["packed_tokens"] == 40 + 21 + 11
    assert out.dropped[0].id == "b" and "over budget" in out.dropped[0].reason
    assert [c.tokens for c in out.kept] == [40, 20, 10]
    assert pack_budget(cands, [100, 100, 100, 100], t_max=50, separator_tokens=1).kept == ()


def test_pack_budget_caps_the_number_of_passages():
    cands = (p("a"), p("b"), p("c"))
    out = pack_budget(cands, [1, 1, 1], t_max=100, separator_tokens=0, max_passages=2)
    assert [c.id for c in out.kept] == ["a", "b"] and "max_passages 2" in out.dropped[0].reason
