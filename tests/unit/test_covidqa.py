"""COVID-QA's loader: an answer span that runs over several sentences makes every one of them
evidence, chunks never cut a sentence, and an article's passages and questions stay on one side
of the split. Built on a small file in COVID-QA's (SQuAD's) format, so it needs no fetched data."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness.data import covidqa
from benchmarks.harness.metrics import evidence_recall
from benchmarks.harness.splits import split_of

FILLER = "Filler sentence number {} says nothing much about viruses at all."


def _text() -> str:
    sentences = [FILLER.format(i) for i in range(30)]
    sentences[12] = "The incubation period was five days on average."
    sentences[13] = "It ranged from two to fourteen days in the cohort."
    return " ".join(sentences)


def _article(doc: int, qid: int) -> dict[str, object]:
    text = _text()
    start = text.index("five days")
    end = text.index("fourteen days") + len("fourteen days")
    qa = {"question": "How long was the incubation period?", "id": qid, "answers": [{"text": text[start:end], "answer_start": start}], "is_impossible": False}
    return {"paragraphs": [{"document_id": doc, "context": text, "qas": [qa]}]}


def test_a_span_over_two_sentences_makes_both_evidence_and_each_article_stays_on_one_side(tmp_path: Path):
    docs = list(range(1, 9))
    (tmp_path / "200423_covidQA.json").write_text(json.dumps({"data": [_article(d, 100 + d) for d in docs]}))
    ds = covidqa(None, root=tmp_path)
    questions = [q for part in ds.splits.values() for q in part.questions]
    assert len(questions) == len(docs)
    assert all(ds.splits[side].questions for side in ("dev", "test"))  # eight articles land on both sides
    for side, part in ds.splits.items():
        texts = dict(zip(part.ids, part.texts, strict=True))
        assert {pid.split("#")[0] for pid in part.ids} == {q.id.split(":")[1] for q in part.questions}
        for q in part.questions:
            assert split_of(q.id) == side
            assert q.evidence == ("The incubation period was five days on average.", "It ranged from two to fourteen days in the cohort.")
            assert q.answers == ("five days on average. It ranged from two to fourteen days",)
            assert evidence_recall(q.evidence, "\n\n".join(texts[g] for g in sorted(q.gold))) == 1.0
            chunks = [t for pid, t in zip(part.ids, part.texts, strict=True) if pid.split("#")[0] == q.id.split(":")[1]]
            assert len(chunks) > 1 and " ".join(chunks) == _text()  # whole sentences: the chunks give the article back
