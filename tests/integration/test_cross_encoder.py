"""meve's own cross-encoder, with the shipped weights and the real MiniLM tokenizer."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
from safetensors import safe_open

from meve import ConfigError, MeVe, MeVeConfig
from meve.core.text import sentence_spans
from meve.scoring.meve_cross_encoder import CROSS_ENCODER_L3_PATH, CROSS_ENCODER_PATH, MeveCrossEncoderScorer
from meve.scoring.resolve import make_scorer
from meve.scoring.windows import text_windows

from .test_verifier import PAIRS

pytestmark = pytest.mark.integration


NAMES = ["meve-cross-encoder", "meve-cross-encoder-l3"]


@pytest.fixture(scope="module")
def scorers(minilm):
    out = {name: make_scorer(name, minilm) for name in NAMES}
    assert all(isinstance(s, MeveCrossEncoderScorer) for s in out.values())
    return out


@pytest.fixture(scope="module", params=NAMES)
def ce(request, scorers):
    return scorers[request.param].warm_up()


# Trained on SQuAD, whose questions reuse the passage's words, the 6-layer model matches words more
# than meaning: "absorb" against "take in" fails (model card, "Limits"); the 3-layer one, distilled
# from it, inherits the miss. Strict, so a retrained model that fixes it turns this red and the card
# gets updated.
PARAPHRASE = pytest.mark.xfail(strict=True, reason="meve's cross-encoders miss the paraphrase 'absorb' / 'take in' (P 0.03 with 6 layers, 0.26 with 3)")


@pytest.mark.parametrize(
    ("name", "question", "answer", "off_topic"),
    [pytest.param(n, *p, marks=PARAPHRASE) if i == 1 else (n, *p) for n in NAMES for i, p in enumerate(PAIRS)],
)
def test_an_answering_passage_passes_tau_and_an_off_topic_one_does_not(scorers, name, question, answer, off_topic):
    yes, no = scorers[name].score(question, [answer, off_topic])
    assert yes >= 0.5 > no, (yes, no)


def test_a_passage_scores_as_its_best_sentence_and_pruning_reuses_those_scores(ce):
    """The answer hidden between two off-topic sentences: the passage passes, the answering
    sentence is the best of its spans, and scoring the spans runs no model again."""
    question, answer, _ = PAIRS[2]
    text = f"{PAIRS[0][2]} {answer} {PAIRS[1][2]}"
    (p,) = ce.score(question, [text])
    (alone,) = ce.score(question, [answer])
    assert p == pytest.approx(alone)
    before = ce.pairs_scored
    spans = sentence_spans(text)
    (scores,) = ce.score_spans(question, [text], [spans])
    assert ce.pairs_scored == before
    assert text[slice(*spans[int(scores.argmax())])] == answer


def test_one_sentence_past_the_model_length_is_scored_by_its_best_window(ce):
    """Issue 52: a passage scores as its best sentence, but a sentence past the model's 256 pieces
    (a list, a table row) was truncated: with the answer at its end it scored 0.0002 (6 layers)."""
    question, answer, _ = PAIRS[0]
    goods = ["bread", "cheese", "apples", "pears", "milk", "eggs", "butter", "flour", "sugar", "salt", "pepper", "rice", "beans", "lentils", "onions", "garlic"]
    listing = ", ".join(f"{a} and {b}" for a in goods[:10] for b in goods[10:])
    sentence = f"The market stalls sold {listing}, and at the far end of the square a guide said that {answer[0].lower()}{answer[1:-1]}"
    assert sentence_spans(sentence) == [(0, len(sentence))]
    assert len(ce.network.tok(sentence, add_special_tokens=False)["input_ids"]) > 256
    (p,) = ce.score(question, [sentence])
    # Its score is its best window's, each window scored as a passage of its own; the best is the
    # last one, which holds the answer, and the first (all the truncated pair read) is far below.
    tok = ce.network.tok
    windows = text_windows(tok, sentence, 256 - 3 - len(tok(question, add_special_tokens=False)["input_ids"]))
    alone = ce.score(question, windows)
    assert len(windows) > 1 and p == pytest.approx(alone.max()) and int(alone.argmax()) == len(windows) - 1
    assert p > 10 * alone[0], (p, alone)
    # The 6-layer model keeps it at the paper's tau (0.99; truncated, 0.0002); the 3-layer one
    # reads the answer under the listing at 0.09 (truncated, 0.007).
    assert p >= 0.5 or ce.network.layers == 3, p
    (spans,) = ce.score_spans(question, [sentence], [[(0, len(sentence))]])
    assert spans[0] == pytest.approx(p)  # pruning reads the same windowed score


def test_the_cross_encoders_are_chosen_by_name_and_a_missing_file_names_itself(tmp_path, minilm):
    six, three = make_scorer("meve-cross-encoder", minilm), make_scorer("meve-cross-encoder-l3", minilm)
    assert isinstance(six, MeveCrossEncoderScorer) and isinstance(three, MeveCrossEncoderScorer)
    assert (six.path, three.path) == (CROSS_ENCODER_PATH, CROSS_ENCODER_L3_PATH)
    assert (six.network.layers, three.network.layers) == (6, 3)
    with pytest.raises(ConfigError, match=r"meve-cross-encoder-l9"):
        MeveCrossEncoderScorer.shipped("meve-cross-encoder-l9")
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(ConfigError, match=r"nope\.safetensors"):
        MeveCrossEncoderScorer(missing)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match=r"bad\.safetensors"):
        MeveCrossEncoderScorer(bad).warm_up()


def test_meve_runs_it_by_name(minilm):
    texts = [a for _, a, _ in PAIRS] + [o for _, _, o in PAIRS]
    m = MeVe.from_texts(texts, embedder=minilm, scorer="meve-cross-encoder", config=MeVeConfig(k_init=6, n_min=1))
    r = m.run(PAIRS[2][0])
    assert r.phase("verify").info["scorer"].startswith("meve-cross-encoder:")
    assert r.documents[0].text == PAIRS[2][1]


@pytest.mark.parametrize("name", ["meve-cross-encoder", "meve-cross-encoder-l3"])
def test_it_loads_offline_with_an_empty_hugging_face_cache(tmp_path, name):
    """The 3-layer file holds no embeddings: they come from the bundled MiniLM, offline too."""
    code = (
        "from meve.scoring.resolve import make_scorer; "
        f"print(make_scorer({name!r}).score('When was the Eiffel Tower completed?', ['The Eiffel Tower was completed in 1889.'])[0])"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env.pop("SENTENCE_TRANSFORMERS_HOME", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) >= 0.5
    hf = tmp_path / "hf"
    assert not hf.exists() or not any(
        p.is_file() for p in hf.rglob("*") if p.relative_to(hf).as_posix() != "hub/version.txt"
    )  # huggingface_hub < 1.0 stamps its layout


@pytest.mark.parametrize(("layers", "frozen", "teacher"), [(6, False, None), (3, True, CROSS_ENCODER_PATH)])
def test_training_runs_two_steps_and_calibrates_on_a_tiny_slice(tmp_path, layers, frozen, teacher):
    """The training script end to end on a hand-made SQuAD-format slice: two steps, then Platt
    scaling on the slice's tune half, written as weights a MeveCrossEncoderScorer loads. The 3-layer
    model, distilled from the shipped 6-layer one as `make train-verifier` does, with frozen
    embeddings, stores no embeddings and loads them from the bundled MiniLM."""
    from benchmarks.harness.common import squad_dev_split
    from benchmarks.train_cross_encoder import calibrate, train

    answers = ["March 1889", "carbon dioxide", "Jane Austen"]

    def article(title):
        paras = [f"{o} {a}" for _, a, o in PAIRS]
        return {
            "title": title,
            "paragraphs": [
                {"context": text, "qas": [{"id": f"{title}{i}", "question": q, "answers": [{"text": ans, "answer_start": text.index(ans)}]}]}
                for i, (text, (q, _, _), ans) in enumerate(zip(paras, PAIRS, answers, strict=True))
            ],
        }

    titles = [f"A{k}" for k in range(6)]
    data = tmp_path / "data"
    (data / "train" / "squad").mkdir(parents=True)
    for name in ("squad-v1.1-train.explorer.json.gz", "squad-v1.1-dev.explorer.json.gz"):
        with gzip.open(data / "train" / "squad" / name, "wt") as fh:
            json.dump({"version": "1.1", "data": [article(t) for t in titles]}, fh)
    assert "tune" in squad_dev_split(titles).values()
    log = train(
        data,
        steps=2,
        batch=4,
        seed=0,
        out=tmp_path / "ckpt",
        lr=4e-5,
        window_share=0.35,
        max_length=64,
        layers=layers,
        freeze_embeddings=frozen,
        teacher=teacher,
    )
    assert log["teacher"] == (teacher.name if teacher else "none")
    assert log["steps"] == 2 and log["questions"] >= 2 and len(log["data_sha256"]) == 64
    out = tmp_path / "ce.safetensors"
    meta = calibrate(data, tmp_path / "ckpt" / "step2.safetensors", out, questions=3, seed=0)
    assert int(meta["calibration_pairs"]) > 3 and "platt_a" in meta
    scorer = MeveCrossEncoderScorer(out)
    probs = scorer.score(PAIRS[0][0], [PAIRS[0][1], PAIRS[0][2]])
    assert probs.shape == (2,) and ((probs >= 0) & (probs <= 1)).all()
    assert scorer.network.layers == layers
    with safe_open(str(out), framework="pt") as fh:
        assert any(k.startswith("encoder.embeddings.") for k in fh.keys()) is not frozen  # noqa: SIM118
    assert CROSS_ENCODER_PATH.exists() and out.read_bytes() != CROSS_ENCODER_PATH.read_bytes()
