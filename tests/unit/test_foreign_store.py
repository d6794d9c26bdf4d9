"""ForeignStore's stored-vector hook: a passage's vector is read from the framework's store only
where the store keeps one under its id for the same text; every other passage is embedded, and
the log says so. FakeEmbedder stands in for the store's model (named as a fake)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from meve.integration import ForeignStore
from tests.fakes import FakeEmbedder

TEXTS = {"a": "pneumatic tyres absorb shocks", "b": "a derailleur moves the chain", "c": "sourdough rises with wild yeast"}


class KeptVectors:
    """What a store keeps: per id its text and the vector its model made, and which ids were asked."""

    def __init__(self, embedder: FakeEmbedder, rows: dict[str, str]) -> None:
        self.rows = {i: (t, embedder.encode([t])[0] * 3.0) for i, t in rows.items()}  # unnormalised, as a store may keep them
        self.asked: list[str] = []

    def __call__(self, ids: Sequence[str]) -> list[tuple[str, Any] | None]:
        self.asked.extend(ids)
        return [self.rows.get(i) for i in ids]


def _store(embedder: FakeEmbedder, kept: KeptVectors | None, hits: list[tuple[str | None, str]], name: str = "fake-store-model") -> ForeignStore:
    return ForeignStore(
        name=name,
        search=lambda vector, k: [(pid, text, {}) for pid, text in hits[:k]],
        embed_texts=embedder.encode,
        embed_query=lambda q: embedder.encode([q])[0],
        rows=[(pid, text, {}) for pid, text in TEXTS.items()],
        stored=kept,
    )


def test_hits_the_store_keeps_vectors_for_run_no_model_and_score_as_embedded_ones():
    model = FakeEmbedder()
    kept = KeptVectors(FakeEmbedder(), TEXTS)
    store = _store(model, kept, [("a", TEXTS["a"]), ("b", TEXTS["b"])])
    query = model.encode(["tyres that absorb shocks"])[0]
    model.calls = 0
    got = store.query(query, 2)
    assert model.calls == 0 and store.vectors_read == 2 and store.vectors_embedded == 0
    expected = model.encode([TEXTS[p.id] for p in got])
    assert np.allclose([p.embedding for p in got], expected, atol=1e-6)  # read, and scaled to unit length like embedded ones
    assert [p.dense_score for p in got] == pytest.approx(sorted((float(v @ query) for v in expected), reverse=True), rel=1e-6)


def test_a_hit_without_an_id_or_with_another_text_under_its_id_is_embedded_and_logged(caplog):
    model = FakeEmbedder()
    kept = KeptVectors(FakeEmbedder(), {**TEXTS, "b": "a text the store no longer returns"})
    unknown = "a hit no document given has, without an id"
    store = _store(model, kept, [("a", TEXTS["a"]), ("b", TEXTS["b"]), (None, unknown)], name="fake-model-logged")  # its own name: warned once per process
    model.calls = 0
    with caplog.at_level(logging.DEBUG, logger="meve"):
        got = store.query(model.encode(["chain"])[0], 3)
    assert len(got) == 3 and store.vectors_read == 1 and store.vectors_embedded == 2
    assert model.calls == 2  # the query above, and one call for the two hits
    assert "2 of 3 passages have no vector meve can read" in caplog.text and "1 passage vectors read from the vector store, 2 embedded" in caplog.text


def test_documents_given_for_bm25_are_read_under_their_ids_and_without_a_hook_everything_is_embedded():
    kept = KeptVectors(FakeEmbedder(), {"a": TEXTS["a"]})
    store = _store(FakeEmbedder(), kept, [])
    assert [p.id for p in store.get(["c", "a"])] == ["c", "a"] and kept.asked == ["c", "a"]  # the documents' ids, taken as the store's
    assert (store.vectors_read, store.vectors_embedded) == (1, 1)
    plain = _store(FakeEmbedder(), None, [])
    plain.get(["a", "b"])
    assert (plain.vectors_read, plain.vectors_embedded) == (0, 2)
