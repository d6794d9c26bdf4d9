"""Evidence counted by the text the model reads: moved into the library (:mod:`meve.evaluate.metrics`)."""

from meve.evaluate.metrics import answer_in, evidence_recall, normalise, passage_recall, summarise

__all__ = ["answer_in", "evidence_recall", "normalise", "passage_recall", "summarise"]
