"""The systems compared, each mapping a question to (passage ids, the context as the model reads
it), and their evaluation on a split. Every system's context is rendered the same way: passages
joined by a blank line (MeVe's separator), counted by the same token counter."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import Question
from benchmarks.harness.metrics import answer_in, evidence_recall, passage_recall, summarise
from meve import ContextResult
from meve.core.tokens import TokenCounter

__all__ = ["BASELINES", "KS", "SEP", "System", "evaluate", "meve_system", "topk_system"]

SEP = "\n\n"
KS = tuple(range(1, 11))
BASELINES = ("dense", "bm25", "hybrid")
#: question -> (kept passage ids, context text, the MeVe result when there is one)
System = Callable[[str], tuple[list[str], str, ContextResult | None]]


def topk_system(corpus: Corpus, ranking: str, k: int) -> System:
    """Plain top-k by one ranking (dense, bm25 or hybrid)."""
    rank = getattr(corpus, ranking)

    def run(query: str) -> tuple[list[str], str, ContextResult | None]:
        ids = rank(query, k)
        return ids, SEP.join(corpus.text[i] for i in ids), None

    return run


def meve_system(corpus: Corpus, setting: Mapping[str, Any]) -> System:
    """MeVe with ``setting`` (MeVeConfig fields) over the corpus."""

    def run(query: str) -> tuple[list[str], str, ContextResult | None]:
        r = corpus.meve.run(query, **setting)
        return [d.id for d in r.documents], r.context, r

    return run


def evaluate(
    system: System,
    questions: Sequence[Question],
    counter: TokenCounter,
    *,
    keep: list[ContextResult] | None = None,
    scores: list[tuple[float, float]] | None = None,
) -> dict[str, float]:
    """The system's means over ``questions``: evidence recall (by text), the share of questions with
    all their evidence, answer-in-context (questions with answer strings), passage-id recall
    (labelled), tokens and milliseconds. ``scores`` collects each question's (evidence, tokens), for
    intervals."""
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        ids, context, result = system(q.text)
        ms = (time.perf_counter() - t0) * 1000.0
        ev = evidence_recall(q.evidence, context)
        row = {"evidence": ev, "all_evidence": float(ev == 1.0), "passages": passage_recall(q.gold, ids), "tokens": counter.count(context), "ms": ms}
        if q.answers:
            row["answer"] = float(answer_in(q.answers, context))
        rows.append(row)
        if keep is not None and result is not None:
            keep.append(result)
        if scores is not None:
            scores.append((ev, float(row["tokens"])))
    return summarise(rows)
