import numpy as np
import pytest

from meve.core.records import Passage
from meve.core.text import sentence_spans
from meve.core.tokens import get_token_counter
from meve.pipeline.phases import cover_query, drop_redundant, fallback, head_threshold, novelty_select, pack_budget, verify
from meve.pipeline.prune import GAP_MARK, cut_to_fit, prune_sentences


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


def _cover(texts, rel, query, coverage, floor=0.0, **verify_kw):
    from meve.retrieval.terms import stemmed_tokenize

    cands = tuple(Passage(id=pid, text=t) for pid, t in texts.items())
    out = verify(cands, rel, **verify_kw)
    return cover_query(out, cands, rel, stemmed_tokenize(query), [frozenset(stemmed_tokenize(c.text)) for c in cands], coverage, floor=floor)


TWO_THINGS = {
    "tower": "Random House Tower is a 52-story tower in New York City used for offices and apartments.",
    "avenue": "888 7th Avenue is an office skyscraper in Midtown Manhattan owned by a real estate trust.",
    "imprint": "Villard is an imprint of Random House, the publisher based in New York City.",
    "city": "New York City is the most populous city in the United States.",
}
TWO_THINGS_Q = "Are Random House Tower and 888 7th Avenue both used for real estate?"


def test_coverage_keeps_the_passage_about_the_other_half_of_the_question():
    out = _cover(TWO_THINGS, [0.9, 0.3, 0.05, 0.02], TWO_THINGS_Q, 0.2, tau=0.1, cut="ratio", cut_ratio=0.8)
    assert [(c.id, c.source) for c in out.kept] == [("tower", "verified"), ("avenue", "covered")]
    assert out.kept[1].relevance == 0.3  # its verifier score stays, so prioritisation ranks it as scored
    assert set(out.info["covered"]["avenue"]["terms"]) >= {"888", "7th"} and out.info["covered"]["avenue"]["share"] >= 0.2
    # Neither passage holding only terms the kept one already has is brought back, and none is both kept and dropped.
    assert {d.id for d in out.dropped} == {"imprint", "city"} and out.info["cut"] == []
    # Without coverage the same scores keep the first passage alone (the ratio cut drops the second).
    plain = _cover(TWO_THINGS, [0.9, 0.3, 0.05, 0.02], TWO_THINGS_Q, 0.0, tau=0.1, cut="ratio", cut_ratio=0.8)
    assert [c.id for c in plain.kept] == ["tower"] and "covered" not in plain.info


def test_coverage_needs_a_share_of_the_query_and_something_verified():
    # A high bar: "avenue" adds less than 90% of the query's weight, so nothing is added.
    strict = _cover(TWO_THINGS, [0.9, 0.3, 0.05, 0.02], TWO_THINGS_Q, 0.9, tau=0.1, cut="ratio", cut_ratio=0.8)
    assert [c.id for c in strict.kept] == ["tower"] and strict.info["covered"] == {}
    # Nothing passed tau: coverage completes verified evidence and never stands in for it.
    none = _cover(TWO_THINGS, [0.05, 0.04, 0.03, 0.02], TWO_THINGS_Q, 0.1, tau=0.1)
    assert none.kept == () and "covered" not in none.info


def test_coverage_never_keeps_a_passage_scored_below_its_floor():
    args = (TWO_THINGS, [0.9, 0.3, 0.05, 0.02], TWO_THINGS_Q, 0.2)
    at = _cover(*args, floor=0.3, tau=0.1, cut="ratio", cut_ratio=0.8)
    assert [(c.id, c.source) for c in at.kept] == [("tower", "verified"), ("avenue", "covered")]  # the floor is inclusive
    above = _cover(*args, floor=0.31, tau=0.1, cut="ratio", cut_ratio=0.8)
    assert [c.id for c in above.kept] == ["tower"] and above.info["covered"] == {}
    assert "avenue" in {d.id for d in above.dropped}


def test_coverage_gives_terms_every_candidate_shares_no_weight():
    texts = {
        "a": "Paris is the capital of France and its largest city.",
        "b": "The Paris metro has sixteen lines; the capital also has trams.",
        "c": "Paris hosted the Olympic Games in 1900, 1924 and 2024.",
    }
    # "paris" is in every candidate (idf ~0) and "capital" already covered by "a": "c" adds only "olymp".
    out = _cover(texts, [0.9, 0.05, 0.04], "Paris capital Olympic", 0.3, tau=0.5)
    assert [c.id for c in out.kept] == ["a", "c"] and out.info["covered"]["c"]["terms"] == ["olymp"]


def test_coverage_rejects_mismatched_terms():
    with pytest.raises(ValueError, match="1 term sets and 2 scores for 2 candidates"):
        cover_query(verify((p("a"), p("b")), [0.9, 0.1], 0.5), [p("a"), p("b")], [0.9, 0.1], ["x"], [frozenset()], 0.2)


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


def test_pack_budget_cuts_the_first_passage_that_does_not_fit_rather_than_pass_it_over():
    # Issue 77: a 0.99 passage of 1,000 tokens before a 0.87 one of 400 at t_max 512 was dropped
    # for the worse one, which fitted whole. Offered to ``cut`` with the room left, it keeps its best part.
    cands = (p("best", relevance=0.99), p("worse", relevance=0.87), p("small", relevance=0.5))
    offered: list[tuple[str, int, int, bool]] = []

    def cut(passage, tokens, room, alone):
        offered.append((passage.id, tokens, room, alone))
        return passage.with_(text="best part", tokens=room - 12)

    out = pack_budget(cands, [1000, 400, 10], t_max=512, separator_tokens=1, cut=cut)
    assert offered == [("best", 1000, 512, True)]  # once, with the whole budget as its room, nothing else taken yet
    assert [c.id for c in out.kept] == ["best", "small"] and out.kept[0].text == "best part"
    assert out.info["cut"] == {"best": {"tokens_whole": 1000, "tokens_kept": 500}} and out.info["packed_tokens"] == 500 + 11
    assert [d.id for d in out.dropped] == ["worse"]
    # A passage whose best part does not fit is skipped, and the next that does not fit whole is offered.
    offered.clear()
    four = (*cands, p("tiny"))
    out = pack_budget(four, [300, 400, 600, 10], t_max=512, separator_tokens=1, cut=lambda c, n, room, alone: offered.append((c.id, n, room, alone)) or None)
    assert [c.id for c in out.kept] == ["best", "tiny"] and offered == [("worse", 400, 211, False), ("small", 600, 211, False)]


def test_pack_budget_caps_the_number_of_passages():
    cands = (p("a"), p("b"), p("c"))
    out = pack_budget(cands, [1, 1, 1], t_max=100, separator_tokens=0, max_passages=2)
    assert [c.id for c in out.kept] == ["a", "b"] and "max_passages 2" in out.dropped[0].reason


def test_gap_cut_keeps_only_the_head_above_the_largest_drop():
    cands = tuple(p(x) for x in "abcde")
    out = verify(cands, [0.95, 0.93, 0.60, 0.58, 0.55], tau=0.5, cut="gap")
    assert [c.id for c in out.kept] == ["a", "b"]
    assert out.info["cut"] == ["c", "d", "e"] and out.info["head_threshold"] == 0.93
    assert all("largest score gap (0.930 -> 0.600)" in d.reason for d in out.dropped)


def test_ratio_cut_is_relative_to_the_best_score_and_tau_still_applies():
    cands = tuple(p(x) for x in "abcd")
    out = verify(cands, [0.9, 0.75, 0.7, 0.3], tau=0.5, cut="ratio", cut_ratio=0.8)
    assert [c.id for c in out.kept] == ["a", "b"]  # 0.7 < 0.8 * 0.9
    reasons = {d.id: d.reason for d in out.dropped}
    assert "< tau 0.5" in reasons["d"] and "outside the head" in reasons["c"]
    assert out.info["cut"] == ["c"]
    # Without a cut, only tau decides.
    assert [c.id for c in verify(cands, [0.9, 0.75, 0.7, 0.3], tau=0.5).kept] == ["a", "b", "c"]


def test_head_threshold_of_one_score_or_no_cut_is_none():
    assert head_threshold([0.9], "gap", 0.5) is None
    assert head_threshold([0.9, 0.1], "none", 0.5) is None
    with pytest.raises(ValueError, match="cut='median'"):
        head_threshold([0.9, 0.1], "median", 0.5)


TEXT = "Dunlop was a vet. He lived in Belfast. Rain fell that year. Belfast builds ships. Cats sleep."


def sentences(text):
    from meve.core.text import sentence_spans

    return sentence_spans(text)


def test_prune_keeps_whole_sentences_in_order_with_offsets_and_names_each_removed_one():
    cand = Passage(id="d1", text=TEXT, relevance=0.9, tokens=20)
    sp = sentences(TEXT)
    out = prune_sentences((cand,), [sp], [[0.2, 0.1, 0.05, 0.9, 0.6]], ratio=0.5)
    (kept,) = out.kept
    assert kept.id == "d1" and kept.tokens is None and kept.relevance == 0.9
    assert kept.spans == ((sp[3][0], sp[4][1]),)
    assert kept.text == "Belfast builds ships. Cats sleep."
    assert [d.id for d in out.dropped] == [f"d1@{a}-{b}" for a, b in sp[:3]]
    assert "0.200 < 0.5 x passage best 0.900" in out.dropped[0].reason and "Dunlop was a vet." in out.dropped[0].reason
    assert out.info["sentences_in"] == 5 and out.info["sentences_kept"] == 2
    # The trace says, per passage, every sentence it scored, its score and whether it stayed.
    assert out.info["sentences"]["d1"] == [[a, b, s, k] for (a, b), s, k in zip(sp, [0.2, 0.1, 0.05, 0.9, 0.6], [False, False, False, True, True], strict=True)]


def test_prune_keeps_the_sentence_before_a_leading_pronoun_and_marks_gaps():
    cand = Passage(id="d1", text=TEXT)
    sp = sentences(TEXT)
    out = prune_sentences((cand,), [sp], [[0.1, 0.9, 0.1, 0.1, 0.8]], ratio=0.5)
    (kept,) = out.kept
    # "He lived in Belfast." pulls in "Dunlop was a vet."; "Cats sleep." is not adjacent.
    assert kept.text == "Dunlop was a vet. He lived in Belfast." + GAP_MARK + "Cats sleep."
    assert kept.spans == ((sp[0][0], sp[1][1]), sp[4])
    assert out.info["kept_for_context"] == 1
    assert [TEXT[a:b] for a, b in kept.spans] == ["Dunlop was a vet. He lived in Belfast.", "Cats sleep."]


def test_prune_leaves_single_sentence_and_fully_kept_passages_untouched():
    one = Passage(id="a", text="Only one sentence here.")
    full = Passage(id="b", text=TEXT)
    out = prune_sentences((one, full), [sentences(one.text), sentences(TEXT)], [[0.1], [0.9, 0.8, 0.9, 0.9, 0.9]], ratio=0.5)
    assert out.kept == (one, full) and out.dropped == ()
    with pytest.raises(ValueError, match="2 scores for 5 sentences"):
        prune_sentences((full,), [sentences(TEXT)], [[0.1, 0.2]], ratio=0.5)


def test_prune_gate_leaves_a_passage_whole_where_no_sentence_reaches_it():
    located = Passage(id="a", text=TEXT)
    unlocated = Passage(id="b", text=TEXT)
    scores = [[0.2, 0.1, 0.05, 0.9, 0.6], [0.02, 0.01, 0.1, 0.03, 0.01]]
    out = prune_sentences((located, unlocated), [sentences(TEXT)] * 2, scores, ratio=0.5, gate=0.3)
    pruned, whole = out.kept
    assert pruned.text == "Belfast builds ships. Cats sleep." and whole == unlocated
    assert out.info["whole_below_gate"] == ["b"] and out.info["gate"] == 0.3
    assert {d.id.split("@")[0] for d in out.dropped} == {"a"}
    # A best exactly at the gate is pruned; with no gate, the low-scoring passage is pruned too.
    at_gate = prune_sentences((unlocated,), [sentences(TEXT)], [scores[1]], ratio=0.5, gate=0.1)
    assert at_gate.kept[0].text != TEXT and at_gate.info["whole_below_gate"] == []
    assert prune_sentences((unlocated,), [sentences(TEXT)], [scores[1]], ratio=0.5).kept[0].text != TEXT


def test_prune_keeps_the_sentence_before_a_pronoun_anywhere_in_a_kept_sentence():
    text = "Dunlop was a vet in Belfast. Rain fell. In 1888 his son rode a tricycle. Cats sleep."
    sp = sentences(text)
    out = prune_sentences((Passage(id="d", text=text),), [sp], [[0.1, 0.1, 0.9, 0.1]], ratio=0.5)
    # "his" pulls in "Rain fell." (no pronoun), and the walk stops there: the subject is one sentence further back.
    assert out.kept[0].text == "Rain fell. In 1888 his son rode a tricycle."
    assert out.info["kept_for_context"] == 1


def test_passage_with_copies_and_refuses_a_field_it_does_not_have():
    # with_ copies the fields directly (no dataclasses.replace): the original must stay as it was,
    # and a misspelt field must fail as replace() would.
    p = Passage(id="a", text="Drais built it.", metadata={"src": "x"}, dense_score=0.4)
    q = p.with_(relevance=0.9, dense_score=0.5)
    assert (q.id, q.text, q.metadata, q.relevance, q.dense_score) == ("a", "Drais built it.", {"src": "x"}, 0.9, 0.5)
    assert (p.relevance, p.dense_score) == (None, 0.4)
    with pytest.raises(TypeError, match="relevnce"):
        p.with_(relevnce=0.9)
    with pytest.raises(AttributeError):
        q.id = "b"  # type: ignore[misc]  # still frozen


NAN = float("nan")


@pytest.mark.parametrize("cut", ["none", "ratio", "gap"])
def test_a_nan_score_ranks_lowest_and_every_candidate_is_kept_or_dropped(cut):
    cands = tuple(p(x) for x in "abcde")
    out = verify(cands, [0.9, NAN, 0.85, 0.3, 0.88], tau=0.5, cut=cut, cut_ratio=0.5)
    assert [c.id for c in out.kept] == ["a", "e", "c"]  # the NaN does not poison the head's threshold
    assert sorted([c.id for c in out.kept] + [d.id for d in out.dropped]) == list("abcde")
    reasons = {d.id: d.reason for d in out.dropped}
    assert "NaN" in reasons["b"] and "< tau 0.5" in reasons["d"]
    if cut != "none":
        assert not np.isnan(out.info["head_threshold"])


def test_a_nan_sentence_score_never_wins_the_pruning():
    cand = Passage(id="d1", text=TEXT, relevance=0.9)
    sp = sentences(TEXT)
    out = prune_sentences((cand,), [sp], [[NAN, 0.1, 0.05, 0.9, 0.2]], ratio=0.5)
    (kept,) = out.kept
    assert kept.text == "Belfast builds ships."
    assert f"d1@{sp[0][0]}-{sp[0][1]}" in [d.id for d in out.dropped]
    # Only NaN scores: no sentence is evidence, so the passage stays whole (below the gate).
    whole = prune_sentences((cand,), [sp], [[NAN] * 5], ratio=0.5, gate=0.0)
    assert whole.kept[0].text == TEXT and whole.info["whole_below_gate"] == ["d1"]


def test_a_nan_relevance_is_chosen_last_by_novelty_and_padding():
    from meve.pipeline.phases import PhaseOutput, pad

    cands = (p("a", [1, 0, 0], relevance=NAN), p("b", [0, 1, 0], relevance=0.4), p("c", [0, 0, 1], relevance=0.6))
    assert novelty_select(cands, lam=0.7, theta=0.99).info["order"] == ["c", "b", "a"]
    assert novelty_select(cands, lam=0.0, theta=0.99).info["order"][-1] == "a"  # 0 x -inf is a NaN: it still ranks lowest
    padded = pad(PhaseOutput(()), cands, {"a": NAN, "b": 0.4, "c": 0.6}, min_keep=2)
    assert [c.id for c in padded.kept] == ["c", "b"]


def test_the_cut_counts_each_sentence_a_bounded_number_of_times_and_fits_exactly():
    # Issue 78: the cut grew its run by recounting the whole run at each step, quadratic in sentences
    # (2.8 s at t_max 8192). Now each sentence is counted once bare and once with the gap before it, then the run once.
    text = " ".join(f"Sentence number {i} says little." for i in range(400))
    spans = sentence_spans(text)
    calls: list[str] = []
    counter = get_token_counter()

    def count(t: str) -> int:
        calls.append(t)
        return counter.count(t)

    scores = np.zeros(len(spans))
    scores[200] = 1.0
    cut = cut_to_fit(Passage(id="long", text=text), spans, scores, 1000, count)
    assert cut is not None and cut.tokens == counter.count(cut.text) <= 1000
    assert cut.text.startswith("Sentence number ") and "Sentence number 200 says little." in cut.text
    a, b = cut.spans[0]
    assert counter.count(text[a : b + len(" Sentence number 999 says little.")]) > 1000  # one more sentence would not fit
    assert sum(map(len, calls)) <= 3 * len(text)  # what was tokenised: each character about twice, once more for the run chosen
