"""The default verifier with the real MiniLM and the shipped calibration."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from meve import ConfigError, LateInteractionScorer, MeVe, MeVeConfig
from meve.cli.commands import demo_corpus
from meve.scoring.calibration import CALIBRATION_PATH, Calibration
from meve.scoring.cosine import CosineScorer
from meve.scoring.resolve import make_scorer, make_scoring

pytestmark = pytest.mark.integration

# Hand-written: each question, a passage that answers it, and an on-domain passage that does not.
PAIRS = [
    (
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in March 1889 as the entrance arch to the World's Fair in Paris.",
        "The Louvre is the world's most-visited museum and holds the Mona Lisa.",
    ),
    (
        "What gas do plants absorb for photosynthesis?",
        "During photosynthesis, plants take in carbon dioxide from the air and release oxygen.",
        "Many flowering plants depend on bees and other insects for pollination.",
    ),
    (
        "Who wrote the novel Pride and Prejudice?",
        "Pride and Prejudice is an 1813 novel of manners written by Jane Austen.",
        "Charles Dickens serialised most of his novels in monthly instalments.",
    ),
]


@pytest.fixture(scope="module")
def verifier(minilm):
    return LateInteractionScorer(minilm)


@pytest.mark.parametrize(("question", "answer", "off_topic"), PAIRS)
def test_an_answering_passage_passes_tau_and_an_off_topic_one_does_not(verifier, question, answer, off_topic):
    yes, no = verifier.score(question, [answer, off_topic])
    assert yes >= 0.5 > no, (yes, no)


def test_the_default_is_late_interaction_and_cosine_is_only_explicit(minilm, monkeypatch):
    monkeypatch.delenv("MEVE_SCORER", raising=False)
    assert isinstance(make_scorer(None, minilm), LateInteractionScorer)
    assert isinstance(make_scorer("cosine", minilm), CosineScorer)
    monkeypatch.setenv("MEVE_SCORER", "cosine")
    assert isinstance(make_scorer(None, minilm), CosineScorer)


def test_a_verifier_that_cannot_load_raises_and_names_it(minilm, tmp_path):
    missing = str(tmp_path / "no-such-cross-encoder")
    with pytest.raises(ConfigError, match="no-such-cross-encoder") as err:
        make_scorer(missing, minilm)
    assert err.value.__cause__ is not None
    with pytest.raises(ConfigError, match="calibration"):
        LateInteractionScorer(minilm, calibration=tmp_path / "nope.safetensors")


def test_a_configured_late_interaction_object_runs_as_its_own_verifier(minilm):
    # Passed as a plain object (not .scoring()), it still keeps token vectors at ingestion and
    # prunes from them: no sentence is encoded on its own at query time.
    corpus = demo_corpus()["passages"]
    scorer = LateInteractionScorer(minilm)
    texts, ids = [p["text"] for p in corpus], [p["id"] for p in corpus]
    m = MeVe.from_texts(texts, ids=ids, embedder=minilm, scorer=scorer, config=MeVeConfig(k_init=8, prune="scorer", prune_ratio=0.7, prune_gate=0.0))
    assert len(scorer.cache) == len(set(texts))
    r = m.run("In what year did John Boyd Dunlop develop the pneumatic tyre?")
    prune = r.phase("prune")
    assert prune.info["mode"] == "scorer" and [d.id for d in prune.dropped] == ["dunlop@63-179"]
    assert scorer.encoded_at_query_time == 0


def test_a_scorers_own_verifier_drops_its_shared_pass_over_another_embedder(minilm):
    class OtherEmbedder:
        name = "some-other-model"

        def encode(self, texts):
            raise AssertionError("not called while resolving a verifier")

    scorer = LateInteractionScorer(minilm)
    assert make_scoring(scorer, minilm).shared is not None
    other = make_scoring(scorer, OtherEmbedder())
    # Sentences are still scored in their passage's context; the dense vectors are the other embedder's.
    assert other.shared is None and other.scorer is scorer and other.spans == scorer.scoring().spans


def test_ingestion_keeps_token_vectors_so_queries_encode_no_passage(minilm):
    corpus = demo_corpus()["passages"]
    scorer = LateInteractionScorer(minilm)
    texts, ids = [p["text"] for p in corpus], [p["id"] for p in corpus]
    m = MeVe.from_texts(texts, ids=ids, embedder=minilm, scorer=scorer.scoring(), config=MeVeConfig(k_init=8))
    assert len(scorer.cache) == len({p["text"] for p in corpus})
    forwards = []
    real_forward = scorer._forward
    scorer._forward = lambda texts, **kw: forwards.append(list(texts)) or real_forward(texts, **kw)  # type: ignore[method-assign]
    encoded_before = minilm.encoded
    r = m.run("What does the derailleur do on a bicycle?")
    assert scorer.encoded_at_query_time == 0
    # One forward pass per query serves retrieval and verification: the embedder itself is not called.
    assert forwards == [["What does the derailleur do on a bicycle?"]] and minilm.encoded == encoded_before
    scorer._forward = real_forward  # type: ignore[method-assign]
    verify = r.phase("verify")
    assert verify.info["scorer"] == "late-interaction:all-MiniLM-L6-v2"
    assert r.documents[0].id == "derailleur" and r.documents[0].source == "verified"
    # Stricter than the retriever: most of the 8 dense candidates are rejected.
    assert len(verify.kept) < 8
    # Vectors the ingestion pass kept score the same as freshly computed ones.
    fresh = LateInteractionScorer(minilm).score("derailleur gears", [corpus[0]["text"]])
    assert np.allclose(scorer.score("derailleur gears", [corpus[0]["text"]]), fresh, atol=2e-3)


def test_a_scorer_with_only_the_protocol_runs_through_it(minilm):
    # A scorer that offers no Scoring of its own shares no forward pass, so ingestion keeps no
    # token vectors and the candidates are encoded when first verified.
    class OnlyTheProtocol:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def score(self, query, passages, query_vec=None):
            return self.inner.score(query, passages, query_vec)

    corpus = demo_corpus()["passages"]
    scorer = LateInteractionScorer(minilm)
    m = MeVe.from_texts([p["text"] for p in corpus], embedder=minilm, scorer=OnlyTheProtocol(scorer), config=MeVeConfig(k_init=8, prune="none"))
    assert len(scorer.cache) == 0
    r = m.run("What does the derailleur do on a bicycle?")
    # every passage it scored (8 candidates, then any fallback ones) was encoded once, then cached
    assert scorer.encoded_at_query_time == len(scorer.cache) >= 8
    assert r.phase("verify").info["scorer"] == scorer.name


def test_meve_accepts_a_verifier_by_name(minilm):
    corpus = demo_corpus()["passages"]
    m = MeVe.from_texts([p["text"] for p in corpus], embedder=minilm, scorer="cosine", config=MeVeConfig(k_init=5))
    assert m.run("derailleur").phase("verify").info["scorer"].startswith("cosine:")


def test_the_default_loads_offline_with_an_empty_hugging_face_cache(tmp_path):
    code = (
        "from meve import MeVe; "
        "m = MeVe.from_texts(['The Eiffel Tower was completed in 1889.', 'Bees pollinate flowers.']); "
        "print(m.run('When was the Eiffel Tower completed?').phase('verify').info['scorer'])"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "MEVE_SCORER": ""}
    env.pop("SENTENCE_TRANSFORMERS_HOME", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "late-interaction:all-MiniLM-L6-v2"
    hf = tmp_path / "hf"
    assert not hf.exists() or not any(
        p.is_file() for p in hf.rglob("*") if p.relative_to(hf).as_posix() != "hub/version.txt"
    )  # huggingface_hub < 1.0 stamps its layout


def test_training_script_fits_a_calibration_on_a_tiny_slice(tmp_path, minilm):
    from benchmarks.train_verifier import train

    def article(title, topics):
        return {
            "title": title,
            "paragraphs": [
                {"context": text, "qas": [{"id": f"{title}{i}", "question": q, "answers": [{"text": "x", "answer_start": 0}]}]}
                for i, (text, q) in enumerate(topics)
            ],
        }

    topics = [(a, q) for q, a, _ in PAIRS] + [(PAIRS[0][2], "Which museum holds the Mona Lisa?")]
    data = {"version": "1.1", "data": [article(f"A{k}", topics) for k in range(2)]}
    path = tmp_path / "tiny-dev.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(data, fh)
    out = tmp_path / "cal.safetensors"
    log = train(path, questions=4, seed=0, out=out)
    assert log["pairs"] == 16 and log["positives"] == 4 and len(log["data_sha256"]) == 64
    cal = Calibration.load(out)
    assert cal.a > 0  # a higher MaxSim means more likely relevant
    assert CALIBRATION_PATH.exists() and Calibration.load() != cal


def test_sentence_scores_come_from_the_passage_own_token_vectors(verifier):
    """Each answering sentence, hidden among off-topic ones in one passage, is the best-scored
    sentence of that passage, and scoring sentences runs no model once the passage is cached."""
    from meve.core.text import sentence_spans

    for question, answer, _ in PAIRS:
        others = [off for q, _, off in PAIRS if q != question]
        text = f"  {others[0]} {answer} {others[1]}"  # leading spaces: offsets must still line up
        verifier.embed_and_cache([text])
        verifier.embed_query(question)
        before = verifier.encoded_at_query_time
        spans = sentence_spans(text)
        scores = verifier.score_spans(question, text, spans)
        assert verifier.encoded_at_query_time == before
        assert text[slice(*spans[int(np.argmax(scores))])] == answer, (question, scores)


# 309 word pieces of sentences none of PAIRS' questions asks about: more than MiniLM's window of
# 254 (256 with [CLS] and [SEP]).
FILLER = " ".join(
    [
        "The Rhine rises in the Swiss Alps and flows north to the North Sea.",
        "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
        "A derailleur moves the chain from one sprocket to another on a bicycle.",
        "The violin has four strings tuned in perfect fifths.",
        "Granite is an igneous rock made mostly of quartz and feldspar.",
        "Chess openings are catalogued by the Encyclopaedia of Chess Openings.",
        "The Pacific is the largest and deepest of the world's oceans.",
        "Honey bees communicate the direction of flowers with a waggle dance.",
        "Marathon runners often eat extra carbohydrates before a race.",
        "The Great Wall of China stretches for thousands of kilometres.",
        "Copper conducts electricity well and is used in most household wiring.",
        "Penguins cannot fly, but they are fast and agile swimmers.",
        "A sonnet is a poem of fourteen lines with a fixed rhyme scheme.",
        "Glaciers carve U-shaped valleys as they slowly move downhill.",
        "The abacus was used for arithmetic long before written numerals.",
        "Tea is made by pouring hot water over the cured leaves of the tea plant.",
        "Volcanic ash can ground aircraft because it damages jet engines.",
        "The cello is played sitting down, held between the knees.",
        "Lighthouses warn ships of rocks and mark the entrance to harbours.",
        "Saturn's rings are made of ice and rock, from dust grains to boulders.",
        "A bonsai is a tree kept small by pruning its roots and branches.",
        "The printing press spread books across Europe in the fifteenth century.",
    ]
)


@pytest.mark.parametrize(("question", "answer", "off_topic"), PAIRS)
def test_an_answer_past_the_model_window_is_scored_like_the_answer_first(verifier, question, answer, off_topic):
    """Issue 52: only the first 256 pieces were scored, so the answer after the filler scored
    exactly as the filler alone and verify dropped the passage."""
    raw = verifier.raw_scores(question, [f"{answer} {FILLER}", f"{FILLER} {answer}", FILLER])
    first, last, filler = raw
    assert abs(last - first) < abs(last - filler) / 2, raw
    # The verdict at the paper's tau is the answer-first passage's (Eiffel, Austen: kept; the
    # photosynthesis paraphrase, which this verifier misses in a long passage, dropped both ways).
    p_first, p_last, p_filler = verifier.calibration(raw)
    assert (p_last >= 0.5) == (p_first >= 0.5) and p_filler < 0.01, (p_first, p_last, p_filler)


def test_every_piece_of_a_long_passage_has_a_token_vector_at_its_own_offset(verifier):
    # Leading spaces shift the offsets; an emoji is a special piece ([UNK]) and gets no vector.
    emoji = "\N{SMILING FACE WITH SMILING EYES}"
    text = f"  {FILLER} {emoji} {FILLER} {FILLER} {PAIRS[0][1]}"
    tokenizer = verifier._st.model.tokenizer
    ids = tokenizer(text.strip(), add_special_tokens=False, verbose=False)["input_ids"]
    pieces = [i for i in ids if i not in tokenizer.all_special_ids]
    assert len(pieces) == len(ids) - 1 > 3 * 254
    (tokens,) = verifier._passage_tokens([text])
    offsets = verifier._token_offsets(text)
    assert len(tokens) == len(offsets) == len(pieces)
    assert offsets[0, 0] == 2 and offsets[-1, 1] == len(text)
    assert [text[a:b] for a, b in offsets[-3:]] == ["in", "Paris", "."]
    assert emoji not in {text[a:b] for a, b in offsets}


def test_a_passage_is_tokenized_for_its_sentence_offsets_once_across_queries(minilm, monkeypatch):
    from meve.core.text import sentence_spans
    from meve.scoring import late_interaction

    calls = []
    real = late_interaction.pieces
    monkeypatch.setattr(late_interaction, "pieces", lambda tok, text: calls.append(text) or real(tok, text))
    scorer = LateInteractionScorer(minilm)
    question, answer, off = PAIRS[0]
    text = " ".join([off] * 30 + [answer])
    spans = sentence_spans(text)
    first = scorer.score_spans(question, text, spans)
    assert calls.count(text) == 1
    again = scorer.score_spans(PAIRS[1][0], text, spans)  # another query keeps the same passage
    assert calls.count(text) == 1  # its offsets were kept, not tokenized again
    np.testing.assert_array_equal(scorer.score_spans(question, text, spans), first)
    assert again.shape == first.shape


@pytest.mark.parametrize("cache_bytes", [512 * 2**20, 0])
def test_a_passage_first_met_at_query_time_scores_as_it_will_on_later_queries(minilm, cache_bytes):
    # Later queries read the kept int8 rows; the first must score from the same rows, or a passage
    # near tau could pass on one query and fail on the next.
    scorer = LateInteractionScorer(minilm, cache_bytes=cache_bytes)
    question = PAIRS[0][0]
    texts = [p[1] for p in PAIRS] + [FILLER]
    first = scorer.raw_scores(question, texts)
    assert scorer.encoded_at_query_time == len(texts)
    np.testing.assert_array_equal(scorer.raw_scores(question, texts), first)


def test_a_sentence_past_the_model_window_is_scored_from_the_passage_own_windows(verifier):
    from meve.core.text import sentence_spans

    question, answer, off = PAIRS[0]
    text = " ".join([off] * 60 + [answer])  # the answer sits beyond MiniLM's 256 word pieces
    verifier.embed_and_cache([text])  # as at ingestion: no model runs for this passage later
    verifier.embed_query(question)
    spans = sentence_spans(text)
    before = verifier.encoded_at_query_time
    scores = verifier.score_spans(question, text, spans)
    assert verifier.encoded_at_query_time == before  # not encoded alone: its vectors were kept
    assert int(np.argmax(scores)) == len(spans) - 1 and scores[-1] >= 0.5


def test_token_vectors_do_not_depend_on_how_texts_are_batched(minilm):
    # On a CPU the candidates go through the model in length-sorted batches of at most 1,024
    # padded tokens (meve.scoring.batching); the vectors must be those of one plain batch.
    from meve.scoring.late_interaction import text_key

    texts = ["Oxygen.", "Oxygen is a chemical element with symbol O. " * 30, "The Rhine flows through six countries.", "Gears " * 200]
    li = LateInteractionScorer(minilm)
    dense = li.embed_and_cache(texts)
    model = minilm.inner.model
    plain = model.encode(texts, batch_size=64, output_value=None, show_progress_bar=False)
    special = set(model.tokenizer.all_special_ids)
    for text, row, vec in zip(texts, plain, dense, strict=True):
        keep = np.array([int(i) not in special for i in row["input_ids"]], dtype=bool)
        tok = row["token_embeddings"].float().numpy()[keep]
        tok /= np.linalg.norm(tok, axis=1, keepdims=True)
        cached = li.cache.get(text_key(text))
        # "Oxygen ... " x 30 (270 pieces) is past the plain pass's 254: it has a vector for every
        # piece, and its first window (the text, truncated as the plain pass truncates it) gives the
        # leading ones; the other texts' vectors are the plain pass's, all of them.
        pieces = len(model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        assert len(cached) == pieces and (pieces > len(tok)) == text.startswith("Oxygen is")
        same = 128 if pieces > len(tok) else len(tok)
        assert np.allclose(cached[:same], tok[:same], atol=0.02)  # int8 in the cache
        # The dense vector is the plain pass's, truncated alike for the long text.
        sent = row["sentence_embedding"].float().numpy()
        assert np.allclose(vec, sent / np.linalg.norm(sent), atol=1e-4)


def test_the_drop_in_path_runs_the_model_once_per_text_and_caches_across_queries(minilm):
    # The compressor's path: another retriever's texts, new to meve. Late interaction's own pass
    # makes the dense vectors and the token vectors together; the embedder is never called for
    # them, and a second query over the same texts runs no model for them.
    from meve.integration import Models, run_on_texts

    texts = [p["text"] for p in demo_corpus()["passages"]][:6]
    scorer = LateInteractionScorer(minilm)
    models = Models(minilm, scorer)
    before = minilm.encoded
    r1 = run_on_texts("Who developed the pneumatic tyre?", texts, MeVeConfig(), models)
    assert minilm.encoded == before  # no second pass through the embedder
    assert scorer.encoded_at_query_time == len(set(texts))
    r2 = run_on_texts("When was the pneumatic tyre developed?", texts, MeVeConfig(), models)
    assert scorer.encoded_at_query_time == len(set(texts))  # cached: nothing encoded again
    cache = r2.phase("verify").info["cache"]
    assert cache["entries"] == len(set(texts)) and 0 < cache["bytes"] <= cache["max_bytes"]
    assert r1.phase("verify").info["cache"]["encoded_at_query_time"] == len(set(texts))
    # The vectors from the shared pass are the embedder's own (to float32 rounding).
    vec = scorer.embed_for_query(texts[:1])[0]
    assert float(vec @ minilm.encode(texts[:1])[0]) > 0.9999


def test_the_token_vector_cache_stays_within_its_bound_with_dense_vectors_beside(minilm):
    texts = [p["text"] for p in demo_corpus()["passages"]]
    scorer = LateInteractionScorer(minilm, cache_bytes=60_000)
    scorer.embed_for_query(texts)
    info = scorer.cache_info()
    assert info["bytes"] <= 60_000 and 0 < info["entries"] < len(set(texts))
