"""The context benchmark's long-chunk variants (issue 52): a split's documents packed and cut by
the frameworks' own splitters, its questions and evidence unchanged. Built on a small synthetic
data set, so it needs no data files."""

from __future__ import annotations

import pytest

from benchmarks.harness.data import Dataset, Question, Split, long_variant, pack
from benchmarks.harness.metrics import evidence_recall
from meve.core.tokens import get_token_counter

COUNTER = get_token_counter()


def _article(topic: str, n: int) -> str:
    return " ".join(f"Sentence {i} of the {topic} article says that the {topic} has feature number {i}." for i in range(n))


def _dataset() -> Dataset:
    long_doc, short_docs = _article("river", 120), [_article(f"town{k}", 3) for k in range(6)]
    split = Split(documents=[("river", long_doc)] + [(f"town{k}", d) for k, d in enumerate(short_docs)])
    evidence = "Sentence 97 of the river article says that the river has feature number 97."
    split.questions = [Question("q1", "What is feature 97 of the river?", ("97",), (evidence,))]
    return Dataset("synthetic", "one sentence", "made up", {"dev": split, "test": Split()})


def test_short_documents_are_joined_up_to_the_size_and_a_long_one_stays_alone():
    docs = [("a", "one two three"), ("b", "four five six"), ("long", _article("river", 60)), ("c", "seven")]
    packed = pack(docs, 8, COUNTER)
    assert packed[0] == ("a", "one two three\n\nfour five six")
    assert packed[1][0] == "long" and packed[2] == ("c", "seven")


@pytest.mark.parametrize(("variant", "size"), [("llamaindex-1024", 1024), ("llamaindex-512", 512), ("langchain-1000", 1000)])
def test_a_long_variant_cuts_documents_as_the_framework_does_and_keeps_the_evidence_by_text(variant, size):
    ds = long_variant(_dataset(), variant, COUNTER)
    part = ds.splits["dev"]
    counts = [COUNTER.count(t) for t in part.texts]
    assert max(counts) <= size and max(counts) > size * 0.6  # chunks near the size, never over it
    assert len(part.texts) > 2 and len(set(part.ids)) == len(part.ids)
    assert any(t.startswith("Sentence 0 of the town0") for t in part.texts)  # the short towns joined, not dropped
    (q,) = part.questions
    assert q.evidence == _dataset().splits["dev"].questions[0].evidence and q.gold
    texts = dict(zip(part.ids, part.texts, strict=True))
    assert all(evidence_recall(q.evidence, texts[g]) == 1.0 for g in q.gold)
    assert all(evidence_recall(q.evidence, t) == 0.0 for pid, t in texts.items() if pid not in q.gold)
    assert ds.splits["test"].texts == []


def test_a_loader_keeps_the_documents_its_passages_were_cut_from(tmp_path):
    import json

    from benchmarks.harness.data import covidqa

    from .test_covidqa import _article

    (tmp_path / "200423_covidQA.json").write_text(json.dumps({"data": [_article(d, 100 + d) for d in range(1, 9)]}))
    ds = covidqa(None, root=tmp_path)
    for part in ds.splits.values():
        assert [doc for doc, _ in part.documents] == list(dict.fromkeys(pid.split("#")[0] for pid in part.ids))
    long = long_variant(ds, "llamaindex-512", COUNTER).splits
    assert all(q.gold for q in long["dev"].questions + long["test"].questions)
