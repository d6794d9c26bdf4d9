"""The systems compared over one index, each mapping a question to (passage ids, the context as
the model reads it), and their scores on a question set.

Every system's context is rendered the same way: passages joined by a blank line (MeVe's
separator), counted by the same token counter. The top-k baselines read the MeVe's own index: the
dense ranking from its vector store (the same embedder), BM25 from its lexical index, and hybrid,
both fused by reciprocal rank (k = 60).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from meve.core.records import ContextResult
from meve.core.tokens import TokenCounter
from meve.evaluate.metrics import answer_score, evidence_recall, passage_recall, summarise
from meve.retrieval.fusion import rrf
from meve.retrieval.store import plain_query

if TYPE_CHECKING:
    from meve.pipeline.meve import MeVe

__all__ = ["BASELINES", "DEPTH", "KS", "SEP", "Rankings", "Scorable", "System", "meve_system", "score", "topk_system"]

SEP = "\n\n"
KS = tuple(range(1, 11))
BASELINES = ("dense", "bm25", "hybrid")
DEPTH = 50  # how deep the cached rankings go: past any k or k_init compared
#: question -> (kept passage ids, context text, the MeVe result when there is one)
System = Callable[[str], tuple[list[str], str, ContextResult | None]]


class Scorable(Protocol):
    """What a context is scored against (:class:`meve.evaluate.questions.Target`, or a benchmark's question)."""

    @property
    def text(self) -> str: ...
    @property
    def answers(self) -> Sequence[str]: ...
    @property
    def evidence(self) -> Sequence[str]: ...
    @property
    def gold(self) -> Collection[str]: ...


class Rankings:
    """A MeVe and the plain rankings over its index that the top-k baselines read (cached per
    query), and each query's vector as the MeVe makes it (:meth:`query_vector`, computed once and
    handed to every setting's ``run``: a grid runs each question dozens of times). ``text``:
    passage id -> text (read from the store when not given); ``encode``: the query's vector for
    the dense baseline (default: :meth:`query_vector`)."""

    def __init__(self, meve: MeVe, text: Mapping[str, str] | None = None, encode: Callable[[str], np.ndarray] | None = None) -> None:
        """Read the corpus's texts once; nothing is embedded until a query asks."""
        if meve.store is None:
            from meve.core.errors import InputError

            raise InputError("evaluation needs a flat passage store (MeVe.from_texts or from_chroma); this MeVe was built with from_documents")
        self.meve = meve
        if text is None:
            ids, texts = meve.store.documents()
            text = dict(zip(ids, texts, strict=True))
        self.text = dict(text)
        self._encode = encode if encode is not None else self.query_vector
        self._vectors: dict[str, np.ndarray] = {}
        self._dense: dict[str, list[str]] = {}
        self._bm25: dict[str, list[str]] = {}

    def query_vector(self, query: str) -> np.ndarray:
        """``query``'s vector as the MeVe's ``run`` makes it (:meth:`MeVe.query_vector`), once per query."""
        if query not in self._vectors:
            self._vectors[query] = self.meve.query_vector(query)
        return self._vectors[query]

    def dense(self, query: str, k: int) -> list[str]:
        """The k nearest passages by the bi-encoder's cosine of their own vectors, as a plain vector
        store ranks them (a long passage by its first window: meve's later windows are meve's, not the baseline's)."""
        if query not in self._dense:
            store = self.meve.store
            assert store is not None
            self._dense[query] = [p.id for p in plain_query(store, self._encode(query), DEPTH)]
        return self._dense[query][:k]

    def bm25(self, query: str, k: int) -> list[str]:
        """The k best passages by BM25 (the MeVe's index over the same passages)."""
        if query not in self._bm25:
            self._bm25[query] = [pid for pid, _ in self.meve.lexical.search(query, DEPTH)]
        return self._bm25[query][:k]

    def hybrid(self, query: str, k: int) -> list[str]:
        """Dense and BM25 fused by reciprocal rank (k = 60), the k best."""
        fused = rrf({"dense": self.dense(query, DEPTH), "bm25": self.bm25(query, DEPTH)})
        return sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]


def topk_system(rankings: Rankings, ranking: str, k: int) -> System:
    """Plain top-k by one ranking (dense, bm25 or hybrid)."""
    rank = getattr(rankings, ranking)

    def run(query: str) -> tuple[list[str], str, ContextResult | None]:
        ids = rank(query, k)
        return ids, SEP.join(rankings.text[i] for i in ids), None

    return run


def meve_system(rankings: Rankings, setting: Mapping[str, Any]) -> System:
    """MeVe with ``setting`` (MeVeConfig fields) over the corpus."""

    def run(query: str) -> tuple[list[str], str, ContextResult | None]:
        r = rankings.meve.run(query, query_vector=rankings.query_vector(query), **setting)
        return [d.id for d in r.documents], r.context, r

    return run


def score(
    system: System,
    questions: Sequence[Scorable],
    counter: TokenCounter,
    *,
    keep: list[ContextResult] | None = None,
    scores: list[tuple[float, float]] | None = None,
    tick: Callable[[], Any] | None = None,
) -> dict[str, float]:
    """The system's means over ``questions``: evidence kept (by text; a question with answer
    strings and no evidence text counts its answers held, as its ``match`` says: "any", the default,
    1 when one occurs; "all", the share that occur), the share of
    questions with all their evidence, answer-in-context (questions with answer strings),
    passage-id recall (labelled), tokens and milliseconds. ``scores`` collects each question's
    (evidence, tokens), for intervals; ``tick`` is called after each question (a progress bar)."""
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        ids, context, result = system(q.text)
        ms = (time.perf_counter() - t0) * 1000.0
        held = answer_score(q.answers, context, getattr(q, "match", "any"))  # a benchmark's question has no ``match``: alternatives
        ev = evidence_recall(q.evidence, context) if q.evidence or not q.answers else held
        row = {"evidence": ev, "all_evidence": float(ev == 1.0), "tokens": counter.count(context), "ms": ms}
        if q.gold:  # passage-id recall is unknown, not zero, for a question labelled with no evidence ids
            row["passages"] = passage_recall(q.gold, ids)
        if q.answers:
            row["answer"] = held
        rows.append(row)
        if keep is not None and result is not None:
            keep.append(result)
        if scores is not None:
            scores.append((ev, float(row["tokens"])))
        if tick is not None:
            tick()
    return summarise(rows)
