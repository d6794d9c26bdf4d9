"""Prove it and tune it on your own data: evidence counted by the text the model reads, the top-k
frontier at equal tokens, paired bootstrap intervals and a deterministic dev/test split (the
method of the project's benchmarks, as a library; docs/evaluate.md).

* :func:`evaluate`: MeVe against dense, BM25 and hybrid top-k over the same index, with each
  setting's margin over the frontier at its own tokens (:class:`Report`: JSON, Markdown, HTML, PNG).
* :func:`tune`: a setting chosen on a dev split of your questions, reported on the test split
  beside the shipped default (:class:`TuneResult`; ``save`` writes the config file).
* :func:`evaluate_memory`: :class:`meve.MomentaryMemory`'s selection against dense, BM25 and
  hybrid fills at the same budget (:func:`meve.evaluate.memory.tune_memory`: a small tune of it).
* :class:`Question` and :func:`load_questions`: the questions file (one JSON object a line).
"""

from meve.evaluate.evaluation import evaluate
from meve.evaluate.memory import evaluate_memory
from meve.evaluate.questions import Question, load_questions
from meve.evaluate.report import Report
from meve.evaluate.tune import TuneResult, tune

__all__ = ["Question", "Report", "TuneResult", "evaluate", "evaluate_memory", "load_questions", "tune"]
