"""The benchmarks count evidence by the text the model reads, not by the ids of passages that
survive pruning in part (issue 40)."""

from __future__ import annotations

from benchmarks.harness.metrics import answer_in, evidence_recall, passage_recall
from meve.core.records import Passage
from meve.core.text import sentence_spans
from meve.pipeline.prune import prune_sentences

PASSAGE = "The study enrolled 412 patients. Mortality fell by 31 percent in the treated group. Funding came from a national grant."
EVIDENCE = "Mortality fell by 31 percent in the treated group."


def test_a_context_with_the_passage_id_but_not_its_evidence_sentence_is_a_miss():
    spans = sentence_spans(PASSAGE)
    # Pruning that keeps the first and last sentences and drops the evidence (scores are given):
    out = prune_sentences((Passage(id="p1", text=PASSAGE),), [spans], [[0.9, 0.1, 0.8]], ratio=0.5)
    (pruned,) = out.kept
    assert pruned.id == "p1" and EVIDENCE not in pruned.text
    assert passage_recall({"p1"}, [pruned.id]) == 1.0  # counted by ids, the passage looks kept
    assert evidence_recall([EVIDENCE], pruned.text) == 0.0  # counted by the text the model reads, it is not
    assert evidence_recall([EVIDENCE], PASSAGE) == 1.0


def test_evidence_is_matched_on_whitespace_normalised_text_and_answers_as_whole_words():
    assert evidence_recall(["Mortality fell  by 31\npercent in the treated group."], PASSAGE) == 1.0
    assert evidence_recall([EVIDENCE, "Not in it."], PASSAGE) == 0.5
    assert answer_in(["31 percent"], PASSAGE) and not answer_in(["no"], "not now")
