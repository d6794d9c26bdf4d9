"""benchmarks/long_order.py's control: each document's passages out of their given order, nothing else changed."""

from __future__ import annotations

from benchmarks.harness.data import Dataset, Question, Split
from benchmarks.long_order import first_relevant, unranked


def test_unranked_reorders_passages_within_each_document_only() -> None:
    passages = [f"Passage {i} about the query." for i in range(12)]
    q = Question("msmarco:1", "the query", (), (passages[0],), frozenset({"p0"}))
    split = Split(ids=[f"p{i}" for i in range(12)], texts=passages, questions=[q], documents=[("1", "\n\n".join(passages)), ("2", "Alone.")])
    ds = Dataset("msmarco", "every sentence", "src", {"test": split})
    out = unranked(ds).splits["test"]
    reordered = out.documents[0][1].split("\n\n")
    assert sorted(reordered) == sorted(passages) and reordered != passages
    assert out.documents[1] == ("2", "Alone.")
    assert out.questions == [q] and out.texts == passages
    assert unranked(ds).splits["test"].documents == out.documents  # a fixed order, not a random one
    assert split.documents[0][1] == "\n\n".join(passages)  # the input is left as it was


def test_first_relevant_places_the_evidence_among_its_querys_passages() -> None:
    docs = [("7", "Off topic.\n\nThe answer is here.\n\nMore."), ("8", "Nothing.")]
    qs = [Question("msmarco:7:7", "q", (), ("The answer is here.",)), Question("msmarco:8:8", "q", (), ("Absent.",))]
    ds = Dataset("msmarco", "every sentence", "src", {"test": Split(questions=qs, documents=docs)})
    assert first_relevant(ds) == [1, None]
