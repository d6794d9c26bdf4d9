"""The verifier's forward pass tokenizes each text once and builds the model's batches itself: it
must give the vectors the model's own preprocessing gives, windows included."""

from __future__ import annotations

import numpy as np
import pytest

from meve.scoring import token_pass
from meve.scoring.token_pass import forward, framing
from meve.scoring.windows import overlap_for, plan, text_pieces

TEXTS = [
    "The Normans gave their name to Normandy, a region in France.",
    "   padded on both sides   ",
    "",
    "café, naïve, 東京 and an emoji 🙂 in one line",
    # Longer than MiniLM's 256-piece window: read in overlapping windows.
    " ".join(f"Sentence {i} says the river Loire flows past town number {i} before the sea." for i in range(40)),
]


@pytest.fixture(scope="module")
def model():
    from meve.scoring.embedders import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(device="cpu").model


def _own_preprocessing(model, monkeypatch):
    monkeypatch.setitem(token_pass._FRAMINGS, model, None)
    return forward(model, TEXTS, max_items=64, max_tokens=1024)


def test_the_framing_is_read_from_the_models_own_preprocessing(model):
    fr = framing(model)
    assert fr is not None
    tok = model.tokenizer
    assert fr.prefix == (tok.cls_token_id,) and fr.suffix == (tok.sep_token_id,)
    assert fr.pad == tok.pad_token_id and fr.types is True


def test_one_tokenization_gives_the_vectors_the_models_preprocessing_gives(model, monkeypatch):
    vecs, tokens, windows = forward(model, TEXTS, max_items=64, max_tokens=1024)
    own_vecs, own_tokens, own_windows = _own_preprocessing(model, monkeypatch)
    np.testing.assert_allclose(vecs, own_vecs, atol=1e-5)
    for w, o in zip(windows, own_windows, strict=True):
        np.testing.assert_allclose(w, o, atol=1e-5)
    assert [len(t) for t in tokens] == [len(t) for t in own_tokens]
    for t, o in zip(tokens, own_tokens, strict=True):
        np.testing.assert_allclose(t, o, atol=1e-5)
    # Every piece of the long text has a vector (its windows cover all of it), none of the empty
    # one; special pieces ([UNK] for the emoji) carry none.
    pieces = text_pieces(model.tokenizer, [t.strip() for t in TEXTS])
    special = sorted(model.tokenizer.all_special_ids)
    assert len(pieces[-1]) > model.max_seq_length
    assert [len(t) for t in tokens] == [int((~np.isin(p.ids, special)).sum()) for p in pieces]


def test_batching_does_not_change_a_texts_vectors(model):
    one = forward(model, TEXTS, max_items=1, max_tokens=None)
    many = forward(model, TEXTS, max_items=64, max_tokens=None)
    np.testing.assert_allclose(one[0], many[0], atol=1e-5)
    for a, b in zip(one[1], many[1], strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    for a, b in zip(one.windows, many.windows, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_a_long_texts_later_windows_are_the_vectors_of_their_own_text(model):
    # What finds a long passage by its later text: each window after the first, as the embedder
    # would encode that window's text on its own; a text that fits one window has none.
    out = forward(model, TEXTS, max_items=64, max_tokens=1024)
    text = TEXTS[-1].strip()
    (p,) = text_pieces(model.tokenizer, [text])
    size = model.max_seq_length - 2
    spans = plan(p.starts, size, overlap_for(size))
    assert len(spans) > 1 and out.windows[-1].shape == (len(spans) - 1, out.vecs.shape[1])
    alone = model.encode([text[slice(*p.span(*sp))] for sp in spans[1:]], normalize_embeddings=True)
    np.testing.assert_allclose(out.windows[-1], alone, atol=1e-4)
    assert all(len(w) == 0 for w in out.windows[:-1])


def test_a_model_whose_features_hold_more_than_ids_keeps_its_own_preprocessing(model, monkeypatch):
    import torch

    real = model.preprocess if hasattr(model, "preprocess") else model.tokenize
    name = "preprocess" if hasattr(model, "preprocess") else "tokenize"

    def with_positions(texts):
        out = dict(real(texts))
        out["position_ids"] = torch.zeros_like(out["input_ids"])
        return out

    monkeypatch.setattr(model, name, with_positions)
    monkeypatch.delitem(token_pass._FRAMINGS, model, raising=False)
    assert framing(model) is None
