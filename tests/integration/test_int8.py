"""int8 MiniLM on the CPU with the real model: its vectors stay close to float32's, it is a model of
its own in the registry, and a MeVe over it runs the default verifier on the same int8 pass."""

from __future__ import annotations

import numpy as np
import pytest

from meve import ConfigError, LateInteractionScorer, MeVe, SentenceTransformerEmbedder
from meve.cli.commands import demo_corpus
from meve.retrieval.chroma import chroma_client
from meve.scoring.int8 import Int8Linear

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def texts():
    return [p["text"] for p in demo_corpus()["passages"]]


@pytest.fixture(scope="module")
def int8():
    return SentenceTransformerEmbedder(precision="int8")


def test_int8_vectors_are_close_to_float32_and_not_the_same(minilm, int8, texts):
    exact, quantised = minilm.encode(texts), int8.encode(texts)
    cos = (exact * quantised).sum(axis=1)
    assert cos.min() > 0.98 and cos.mean() > 0.99
    assert cos.mean() < 0.9999  # int8 really ran: float32 twice gives 1.0
    assert np.allclose(np.linalg.norm(quantised, axis=1), 1.0, atol=1e-5)


def test_int8_is_its_own_model_in_the_registry(minilm, int8):
    layers = [m for m in int8.model.modules() if isinstance(m, Int8Linear)]
    assert len(layers) == 37  # MiniLM-L6: 6 layers x (query, key, value, attention output, feed-forward in and out), and the pooler
    assert not any(isinstance(m, Int8Linear) for m in minilm.inner.model.modules())  # the float32 model is untouched
    assert SentenceTransformerEmbedder(precision="int8").model is int8.model  # shared by every int8 handle


def test_meve_over_int8_verifies_with_the_same_int8_pass_and_records_the_precision(int8, texts):
    client = chroma_client()
    meve = MeVe.from_texts(texts, embedder=int8, client=client, collection_name="int8-demo")
    result = meve.run("How do pneumatic tyres make cycling more comfortable?")
    assert result.phase("verify").info["scorer"] == "late-interaction:all-MiniLM-L6-v2 (int8)"
    assert meve.scoring.shared is not None and meve.scoring.shared.name == int8.name  # one int8 pass: dense and token vectors
    assert "dunlop" in [d.id for d in result.documents] or any("Dunlop" in d.text for d in result.documents)
    collection = client.get_collection("int8-demo")
    assert collection.metadata["meve:embedder"] == "all-MiniLM-L6-v2 (int8)"
    with pytest.raises(ConfigError, match=r"all-MiniLM-L6-v2 \(int8\)"):
        MeVe.from_chroma(collection)  # float32 vectors are not mixed into an int8 collection


def test_the_default_verifier_over_int8_scores_like_float32(minilm, int8, texts):
    query = "Who invented the pneumatic tyre?"
    exact = LateInteractionScorer(minilm).score(query, texts)
    quantised = LateInteractionScorer(int8).score(query, texts)
    assert np.argmax(quantised) == np.argmax(exact)
    assert np.corrcoef(exact, quantised)[0, 1] > 0.99


def test_the_compressor_over_int8_encodes_each_text_once_in_int8(int8, texts):
    from langchain_core.documents import Document

    from langchain_meve import MeVeCompressor

    scorer = LateInteractionScorer(int8)
    compressor = MeVeCompressor(embedder=int8, scorer=scorer)
    kept = compressor.compress_documents([Document(page_content=t) for t in texts], "Who invented the pneumatic tyre?")
    assert kept and any("Dunlop" in d.page_content for d in kept)
    assert scorer.encoded_at_query_time == len(set(texts))  # one int8 pass per text: dense and token vectors together
