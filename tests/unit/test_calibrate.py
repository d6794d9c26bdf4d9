"""Label-free calibration on the user's corpus (issue 35): pseudo-questions from the passages,
every rule measured, the cheapest rule meeting the target chosen, the result saved and reloaded."""

from __future__ import annotations

import pytest

from meve import ConfigError, InputError, MeVe, MeVeConfig
from meve.pipeline.calibrate import CorpusCalibration, pseudo_queries
from tests.fakes import FakeEmbedder, FakeScorer

TOPICS = ["bicycle chain", "sourdough bread", "mountain glacier", "violin string", "coffee roast", "solar panel", "river delta", "chess opening"]
CORPUS = [
    f"The {t} matters to many people in this town. Experts say the {t} needs care every single week. "
    f"A good {t} lasts for many years when it is kept well. Nobody forgets their first {t} story."
    for t in TOPICS
    for _ in range(3)
]


def build() -> MeVe:
    return MeVe.from_texts(CORPUS, embedder=FakeEmbedder(), scorer=FakeScorer(), config=MeVeConfig(k_init=6))


def test_pseudo_questions_are_a_sentence_out_of_a_passage_and_the_rest_of_it():
    ids = [f"p{i}" for i in range(len(CORPUS))]
    pairs = pseudo_queries(ids, CORPUS, 10, seed=3)
    assert len(pairs) == 10 and pairs == pseudo_queries(ids, CORPUS, 10, seed=3)  # seeded
    for pid, question, rest in pairs:
        source = CORPUS[ids.index(pid)]
        assert question in source and question not in rest and len(question.split()) >= 6
        assert rest.replace(" ", "") in source.replace(question, "").replace(" ", "")


def test_the_cheapest_rule_meeting_the_target_is_chosen_and_the_result_reloads(tmp_path):
    result = build().calibrate(target=0.8, queries=20, seed=1)
    assert result.queries == 20
    taus = [o for o in result.options if o["cut"] == "none"]
    assert [o["recall"] for o in taus] == sorted((o["recall"] for o in taus), reverse=True)  # a higher tau keeps less
    meeting = [o for o in result.options if o["recall"] >= 0.8]
    assert meeting and result.recall >= 0.8 and result.kept == min(o["kept"] for o in meeting)
    assert result.config == {k: v for k, v in next(o for o in meeting if o["kept"] == result.kept).items() if k in ("tau", "cut", "cut_ratio")}
    MeVeConfig(**result.config)  # a valid configuration
    assert CorpusCalibration.load(result.save(tmp_path / "c.json")) == result


def test_bad_targets_and_tiny_corpora_are_refused():
    meve = build()
    with pytest.raises(ConfigError, match=r"target=0 is not allowed: expected a number in \(0.0, 1.0\]"):
        meve.calibrate(target=0)
    with pytest.raises(ConfigError, match="queries=3 is not allowed"):
        meve.calibrate(queries=3)
    short = MeVe.from_texts(["One sentence only.", "Two. Sentences."], embedder=FakeEmbedder(), scorer=FakeScorer())
    with pytest.raises(InputError, match="yields 0 pseudo-questions"):
        short.calibrate(queries=10)
