"""Neighbours of a split answer (issue 77 #2), the pure part: where chunks sit (offsets linked as
LangChain's ``start_index`` gives them), one text for two chunks with their overlap once, which
boundary a best sentence touches, and the join itself within t_max, displacing nothing."""

from __future__ import annotations

import math

from meve import Passage, get_token_counter
from meve.pipeline.neighbours import Place, facing, join_neighbours, link, metadata_place, seam

COUNTER = get_token_counter()
SOURCE = "The harbour town sits at the mouth of a river. The great storm of 1893 destroyed the northern pier and the fish market. Both were rebuilt."
A_END = SOURCE.index("the northern pier") + len("the northern pier")  # chunk a ends inside the answer
B_START = SOURCE.index("destroyed")  # chunk b opens with the last words of a: a splitter's overlap
A, B = SOURCE[:A_END], SOURCE[B_START:]
ANSWER = "The great storm of 1893 destroyed the northern pier and the fish market."


def tokens(passages) -> int:
    return COUNTER.count("\n\n".join(p.text for p in passages))


def _join(kept, places, pool=None, sides=None, t_max=512):
    pool = pool or {p.id: p for p in kept}
    sides = sides if sides is not None else {p.id: frozenset({"next", "prev"}) for p in kept}
    return join_neighbours(kept, link(places, {pid: p.text for pid, p in pool.items()}), pool, sides, tokens, t_max)


def test_offsets_link_the_chunks_of_one_source_that_meet_or_overlap_and_nothing_else():
    places = {
        "a": Place("doc", 0),
        "b": Place("doc", B_START),  # starts inside a
        "c": Place("doc", len(SOURCE) + 5),  # a gap after b: what lies in it is not known
        "x": Place("other", B_START),  # the same offsets in another source
        "inside": Place("doc", 2),  # within a: runs no further, so it continues nothing
    }
    texts = {"a": A, "b": B, "c": "Both were rebuilt.", "x": B, "inside": A[2:10]}
    got = link(places, texts)
    assert (got["a"].next, got["b"].prev, got["b"].next, got["c"].prev) == ("b", "a", None, None)
    assert (got["x"].prev, got["x"].next, got["inside"].prev, got["inside"].next) == (None, None, None, None)
    given = {"p": Place("doc", 0, next="q"), "q": Place("doc", 999, prev="p")}  # the framework's own links (LlamaIndex) are kept
    assert link(given, {"p": A, "q": B}) == given


def test_a_seam_holds_the_overlap_once_by_offsets_or_else_by_text_between_word_boundaries():
    text, shared = seam(A, Place("doc", 0), B, Place("doc", B_START))
    assert text == SOURCE and shared == A_END - B_START
    assert seam(A, Place("doc"), B, Place("doc")) == (SOURCE, A_END - B_START)  # no offsets: found in the texts
    assert seam(A, Place("doc", 0), B, Place("doc", B_START + 3))[0] == SOURCE  # offsets that disagree with the texts are not believed
    assert seam("one cat", Place("d"), "the dog", Place("d"))[0] == "one cat the dog"  # "t" is shared by chance, not overlap
    assert seam("one two", Place("d", 0), "three", Place("d", 7))[0] == "one twothree"  # they meet: end to end
    assert seam("one two.", Place("d", 0), "Three.", Place("d", 9))[0] == "one two. Three."  # a gap: the whitespace a splitter drops
    head = "file_path: harbour.txt\n\n"  # LlamaIndex's metadata lines before each node's text: the first's lead, the second's go
    assert seam(head + A, Place("doc", 0, head=len(head)), head + B, Place("doc", B_START, head=len(head)))[0] == head + SOURCE


def test_a_best_sentence_faces_the_boundary_it_touches():
    assert facing([0.1, 0.2, 0.9]) == {"next"} and facing([0.9, 0.2, 0.1]) == {"prev"}
    assert facing([0.1, 0.9, 0.2]) == frozenset() and facing([0.7]) == {"prev", "next"}
    assert facing([math.nan, math.nan]) == frozenset() and facing([math.nan, 0.3]) == {"next"}  # NaN is no evidence


def test_the_chunk_after_joins_the_one_it_continues_as_one_passage_with_the_overlap_once():
    a, b = Passage(id="a", text=A, relevance=0.98), Passage(id="b", text=B, relevance=0.26)
    out = _join([a], {"a": Place("doc", 0), "b": Place("doc", B_START)}, pool={"a": a, "b": b})
    (got,) = out.kept
    assert got.text == SOURCE and ANSWER in got.text and got.text.count("destroyed") == 1
    assert (got.id, got.score, got.joined, got.tokens) == ("a", 0.98, ("a", "b"), COUNTER.count(SOURCE))
    (made,) = out.info["joined"]["a"]
    assert made["neighbour"] == "b" and made["side"] == "next" and made["shared_chars"] == A_END - B_START and made["kept"] is False
    assert made["tokens_added"] == tokens(out.kept) - tokens([a]) and out.info["context_tokens"] == tokens(out.kept)


def test_a_join_is_made_only_where_the_room_left_holds_it_and_the_trace_says_why_not():
    a, b = Passage(id="a", text=A), Passage(id="b", text=B)
    places = {"a": Place("doc", 0), "b": Place("doc", B_START)}
    t_max = COUNTER.count(A) + 3
    out = _join([a], places, pool={"a": a, "b": b}, t_max=t_max)
    assert out.kept[0].text == A and out.info["joined"] == {} and out.info["context_tokens"] <= t_max
    (why,) = out.info["not_joined"]
    assert why["neighbour"] == "b" and why["reason"] == f"needs {COUNTER.count(SOURCE) - COUNTER.count(A)} more tokens, 3 left in t_max {t_max}"
    out = _join([a], places, pool={"a": a, "b": b}, sides={"a": frozenset({"prev"})})  # its best sentence opens it
    assert out.kept[0].text == A and "does not touch the boundary with the passage after it" in out.info["not_joined"][0]["reason"]
    cut = a.with_(text=A[:20], spans=((0, 20),))
    assert "pruned or cut" in _join([cut], places, pool={"a": a, "b": b}).info["not_joined"][0]["reason"]  # linked by its whole text
    linked = {"a": Place("doc", 0, next="b")}  # LlamaIndex names the node after it, which is not at hand
    assert "not among the candidates" in join_neighbours([a], linked, {"a": a}, {"a": frozenset({"next"})}, tokens, 512).info["not_joined"][0]["reason"]


def test_a_neighbour_from_another_source_is_never_joined():
    a, b = Passage(id="a", text=A), Passage(id="b", text=B)
    out = _join([a], {"a": Place("doc", 0, next="b"), "b": Place("elsewhere", B_START, prev="a")}, pool={"a": a, "b": b})
    assert out.kept == (a,) and out.info["not_joined"][0]["reason"] == "from another source ('elsewhere', not 'doc')"
    assert _join([a], {"a": Place("doc", 0), "b": Place("elsewhere", B_START)}, pool={"a": a, "b": b}).info["not_joined"] == []  # never linked


def test_a_kept_neighbour_ranked_lower_is_absorbed_and_nothing_ranked_higher_moves():
    top, a, b = Passage(id="top", text="Sourdough needs wild yeast."), Passage(id="a", text=A), Passage(id="b", text=B)
    places = {"a": Place("doc", 0), "b": Place("doc", B_START)}
    out = _join([top, a, b], places)
    assert [p.id for p in out.kept] == ["top", "a"] and out.kept[1].text == SOURCE and out.kept[1].joined == ("a", "b")
    assert out.info["joined"]["a"][0]["kept"] is True and out.info["joined"]["a"][0]["tokens_added"] < 0  # the overlap and a separator go
    out = _join([top, a, b], places, sides={"a": frozenset(), "b": frozenset({"prev"})})  # only b faces a, and a ranks higher
    assert [p.id for p in out.kept] == ["top", "a", "b"] and out.info["not_joined"][1]["reason"] == "already in the context, ranked higher"


def test_langchain_metadata_gives_a_place_only_with_both_its_source_and_its_start():
    assert metadata_place({"source": "a.txt", "start_index": 40}) == Place("a.txt", 40)
    assert metadata_place({"start_index": 40}) is None and metadata_place({"source": "a.txt"}) is None
    assert metadata_place({"source": "a.txt", "start_index": True}) is None
