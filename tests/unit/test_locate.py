"""MindRef pieces: exact localisation (oracle-tested against naive search), document and passage stages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meve import ConfigError, InputError, MeVe, MeVeConfig, get_token_counter
from meve.mindref.documents import DEFAULT_DOC_WEIGHTS, Document, TitleIndex, check_doc_weights, sentence_windows, title_key
from meve.mindref.locate import ExactIndex, Span, naive_locate
from meve.pipeline.prune import GAP_MARK
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder, FakeScorer

ALPHABET = "abé c.\n"


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.text(alphabet=ALPHABET, min_size=0, max_size=60), min_size=1, max_size=6),
    needle=st.text(alphabet=ALPHABET, min_size=1, max_size=4),
)
def test_exact_index_matches_naive_search(docs, needle):
    documents = [(f"d{i}", t) for i, t in enumerate(docs)]
    index = ExactIndex.from_documents(documents)
    got = [(s.doc_id, s.start) for s in index.locate(needle)]
    assert sorted(got) == sorted(naive_locate(documents, needle))
    assert index.count(needle) == len(got)
    for s in index.locate(needle):
        assert s.text == needle == index.texts[s.doc_id][s.start : s.end]


def test_passage_expands_from_the_hit_and_quotes_can_be_checked():
    body = "Intro sentence here. The Eiffel Tower was completed in 1889 for the World's Fair. It is made of wrought iron. " * 3
    index = ExactIndex.from_documents([("eiffel", body), ("other", "Nothing to see.")])
    spans = index.locate("The Eiffel Tower was completed")
    assert [s.doc_id for s in spans] == ["eiffel"] * 3
    p = index.passage(spans[0], tokens=20)
    assert p.text.startswith("The Eiffel Tower was completed") and p.text.endswith(".")
    assert get_token_counter().count(p.text) <= 20
    assert index.locate("completed in 1890") == []  # a misquote is not grounded
    with pytest.raises(InputError):
        index.locate("")
    with pytest.raises(InputError, match="duplicate doc_id"):
        ExactIndex.from_documents([("a", "x"), ("a", "y")])
    assert isinstance(spans[0], Span)


def test_sentence_windows_cover_the_text_within_the_budget():
    counter = get_token_counter()
    # " 12" is a token of its own where "12" at a sentence start is not: a window's count is more than its sentences' sum.
    text = " ".join(f"{i + 10} is the number of this sentence." for i in range(20))
    for budget in range(20, 41):
        wins = sentence_windows(text, budget, counter)
        assert wins[0][0] == 0 and wins[-1][1] == len(text)
        assert all(counter.count(text[a:b]) <= budget for a, b in wins), budget


DOCS = [
    Document("eiffel", "Eiffel Tower", "The Eiffel Tower is in Paris. It was completed in 1889. Gustave Eiffel's company built it."),
    Document("banana", "Banana", "Bananas are rich in potassium. They grow in tropical climates. Bananas are yellow when ripe."),
    Document("everest", "Mount Everest", "Everest is the highest mountain on Earth. It lies in the Himalayas. Climbers attempt it in May."),
]


def test_hierarchical_meve_picks_documents_then_passages_with_offsets():
    m = MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer(), config=MeVeConfig(k_docs=1, k_init=3, tau=0.0, t_max=100, prune="none"))
    r = m.run("When was the Eiffel Tower completed?")
    assert r.phase("retrieve").info["documents"] == ["eiffel"]
    top = r.documents[0]
    assert top.metadata["doc_id"] == "eiffel" and top.source == "verified"
    body = DOCS[0].text
    assert body[top.metadata["start"] : top.metadata["end"]] == top.text
    # A pruned window keeps its window's offsets in the document; its spans lie inside the window.
    pruned = m.run("When was the Eiffel Tower completed?", prune="scorer", prune_gate=0.0).documents[0]
    start = pruned.metadata["start"]
    assert pruned.spans and pruned.text != top.text
    assert GAP_MARK.join(body[start + a : start + b] for a, b in pruned.spans) == pruned.text
    assert r.token_count <= 100
    with pytest.raises(ConfigError, match="retrieval='dense'"):
        m.run("x", retrieval="dense")
    flat = MeVe.from_texts(["a text"], embedder=FakeEmbedder(), scorer=FakeScorer())
    with pytest.raises(ConfigError, match="from_documents"):
        flat.run("a", retrieval="hierarchical")


def test_hierarchical_fallback_uses_bm25_over_every_document():
    m = MeVe.from_documents(
        [(d.id, d.title, d.text) for d in DOCS], embedder=FakeEmbedder(), scorer=FakeScorer(), config=MeVeConfig(k_docs=1, tau=0.99, n_min=2)
    )
    r = m.run("Himalayas climbers potassium")
    assert r.phase("fallback").info["triggered"] is True
    assert {d.metadata["doc_id"] for d in r.documents} >= {"everest", "banana"} - {r.phase("retrieve").info["documents"][0]}


def test_bad_documents():
    with pytest.raises(InputError, match="must be"):
        MeVe.from_documents([("only", "two")], embedder=FakeEmbedder(), scorer=FakeScorer())
    with pytest.raises(InputError, match="duplicate document ids"):
        MeVe.from_documents([("a", "t", "x"), ("a", "t", "y")], embedder=FakeEmbedder(), scorer=FakeScorer())
    with pytest.raises(InputError, match="documents is empty"):
        MeVe.from_documents([], embedder=FakeEmbedder(), scorer=FakeScorer())


def test_a_query_embeds_once_and_windows_live_in_chroma_with_offsets():
    emb = FakeEmbedder()
    m = MeVe.from_documents(DOCS, embedder=emb, scorer=FakeScorer(), config=MeVeConfig(k_docs=2, tau=0.0))
    assert m.hierarchy is not None
    _, windows = m.hierarchy.collection_names()
    client = chroma_client()
    stored = client.get_collection(windows).get(include=["documents", "metadatas", "embeddings"])
    assert len(stored["ids"]) == m.hierarchy.windows >= len(DOCS)
    text = {d.id: d.text for d in DOCS}
    for doc, meta in zip(stored["documents"], stored["metadatas"], strict=True):
        assert text[meta["doc_id"]][meta["start"] : meta["end"]] == doc
    calls = emb.calls
    r = m.run("Which mountain is the highest on Earth?")
    assert emb.calls == calls + 1  # the query; windows and summaries were embedded at ingestion
    assert r.phase("retrieve").info["documents"][0] == "everest"
    signals = r.phase("retrieve").info["doc_signals"]["everest"]
    assert set(signals) == {name for name, w in DEFAULT_DOC_WEIGHTS.items() if w > 0}  # a zero weight costs no lookup
    m.close()
    assert windows not in {c.name for c in client.list_collections()}


def test_title_mention_decides_between_otherwise_equal_documents():
    docs = [
        Document("a", "Arthur's Magazine", "Readers of First for Women also read it: First for Women, women, first."),
        Document("b", "First for Women", "A monthly magazine published in New Jersey."),
    ]
    query = "When was First for Women started?"
    by_summary = MeVe.from_documents(docs, embedder=FakeEmbedder(), scorer=FakeScorer(), doc_weights={"summary": 1.0}, config=MeVeConfig(k_docs=1))
    assert by_summary.run(query).phase("retrieve").info["documents"] == ["a"]  # the text's words pull the other way
    by_title = MeVe.from_documents(docs, embedder=FakeEmbedder(), scorer=FakeScorer(), doc_weights={"title": 1.0, "summary": 0.1}, config=MeVeConfig(k_docs=1))
    assert by_title.run(query).phase("retrieve").info["documents"] == ["b"]


def test_title_keys_and_mentions():
    assert title_key("Mercury (planet)") == ("mercury",)
    assert title_key("The Who") == ()  # every word a stopword: never matched
    index = TitleIndex()
    for i, t in enumerate(["Mercury (planet)", "New York City", "The Who", "York"]):
        index.add(i, t)
    assert index.mentioned("Is Mercury closer than New York City to York?") == {0, 1, 3}
    assert index.mentioned("who sang it") == set()


def test_doc_weights_are_checked():
    assert check_doc_weights(None) == dict(DEFAULT_DOC_WEIGHTS)
    for bad, why in (({"titel": 1.0}, "'titel'"), ({"title": -1.0}, "finite weights >= 0"), ({"title": 0.0}, "at least one"), ([1.0], "a dict")):
        with pytest.raises(ConfigError, match=why):
            check_doc_weights(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="doc_pool"):
        MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer(), doc_pool=0)


def test_a_persistent_corpus_reopens_without_re_embedding(tmp_path):
    client = chroma_client(tmp_path / "db")
    first = MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer(), client=client, collection_name="wiki", config=MeVeConfig(tau=0.0))
    before = first.run("Where is the Eiffel Tower?")
    emb = FakeEmbedder()
    again = MeVe.from_documents([], embedder=emb, scorer=FakeScorer(), client=client, collection_name="wiki", config=MeVeConfig(tau=0.0))
    assert emb.calls == 0 and again.hierarchy is not None and len(again.hierarchy) == len(DOCS)
    after = again.run("Where is the Eiffel Tower?")
    assert [d.id for d in after.documents] == [d.id for d in before.documents] and after.context == before.context
    with pytest.raises(InputError, match="already stored"):
        again.hierarchy.add([DOCS[0]], emb.encode)
    with pytest.raises(ConfigError, match="passage_tokens"):
        MeVe.from_documents([], embedder=emb, scorer=FakeScorer(), client=client, collection_name="wiki", config=MeVeConfig(passage_tokens=99))
    with pytest.raises(ConfigError, match="passage_tokens"):
        again.run("x", passage_tokens=99)
    with pytest.raises(InputError, match="documents is empty"):
        MeVe.from_documents([], embedder=emb, scorer=FakeScorer(), client=client, collection_name="nothing-here")


def test_quotes_are_located_in_the_documents():
    m = MeVe.from_documents(DOCS, embedder=FakeEmbedder(), scorer=FakeScorer())
    assert m.hierarchy is not None
    [span] = m.hierarchy.locate("It was completed in 1889")
    assert span.doc_id == "eiffel" and DOCS[0].text[span.start : span.end] == "It was completed in 1889"
    assert m.hierarchy.locate("completed in 1890") == []


def test_windows_of_documents_whose_ids_contain_the_separators_are_localised():
    # Window ids are "<doc_id>@<start>-<end>": a document id with "@" and "-" must still map back.
    body = " ".join(f"Shift {i} checks the pump pressure and logs it." for i in range(12)) + " The spare hangar key hangs behind the boiler door."
    docs = [Document("ops@example.com-2024", "Pump runbook", body), Document("a-b@c", "Banana", DOCS[1].text), DOCS[2]]
    cfg = MeVeConfig(k_docs=1, passage_tokens=24, tau=0.0, prune="none")
    m = MeVe.from_documents(docs, embedder=FakeEmbedder(), scorer=FakeScorer(), doc_pool=1, config=cfg)
    assert m.hierarchy is not None and m.hierarchy.windows > 10
    r = m.run("Where does the spare hangar key hang?")
    assert r.phase("retrieve").info["documents"] == ["ops@example.com-2024"]
    assert r.documents and all(d.metadata["doc_id"] == "ops@example.com-2024" for d in r.documents)
    for d in r.documents:
        assert body[d.metadata["start"] : d.metadata["end"]] == d.text
    assert "hangar key" in r.documents[0].text
