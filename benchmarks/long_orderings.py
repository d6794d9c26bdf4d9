"""How good is the verifier's own order over long chunks? Dev splits only; it chooses nothing.

Issue 52's one test row below the top-k frontier is HotpotQA over LlamaIndex's 512-token chunks
(BENCHMARKS.md, "Context over long chunks"). On that variant's dev split the shipped default is
below the frontier too (-0.022), and the best of the 48 settings is +0.001: no setting of the
grid reaches past BM25's top-k there. This asks why, one level below the grid: each dev question's
hybrid candidates (as MeVe's phase 1 gives them) are ordered by a signal, and the top 1, 2 and 3
chunks of that order are read as a top-k curve, against the frontier (the best of dense, BM25 and
hybrid top-k at the same tokens, interpolated). No threshold, cut, coverage or redundancy filter:
only the order. Eight orders were tried, all listed here (:data:`ORDERS`):

- ``verifier``: the default verifier's score (what phase 2 ranks by);
- ``bm25 within candidates``: BM25's score over the same candidates (a check: BM25's own curve);
- ``z-fusion, BM25 0.3`` and ``0.5``: the per-query z-scores of the verifier's and BM25's
  scores over the candidates, mixed with that share of BM25's;
- ``RRF verifier + BM25``: reciprocal ranks (k 60) of the two, equal weights;
- ``RRF verifier + BM25 + dense``, and the same with the verifier counted twice;
- ``RRF verifier + hybrid``: the verifier's rank fused with the hybrid top-k's.

    python -m benchmarks.run --full --only long_orderings [--long-variants NAME,...]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.context import load_sets
from benchmarks.harness.common import default_verifier
from benchmarks.harness.corpus import DEPTH, Corpus
from benchmarks.harness.data import CONTEXT_SETS, LONG_VARIANTS, long_variant
from meve import get_token_counter
from meve.evaluate.frontier import frontier_at
from meve.evaluate.metrics import evidence_recall

Record = dict[str, Any]
DEPTHS = (1, 2, 3)
BASELINE_DEPTHS = (1, 2, 3, 4, 5)  # past the orders' deepest point, so the frontier is not held flat beyond top-3
RRF_K = 60


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    return {c: i for i, c in enumerate(sorted(scores, key=lambda c: -scores[c]))}


def _z(scores: Mapping[str, float]) -> dict[str, float]:
    v = np.array(list(scores.values()))
    sd = float(v.std()) or 1.0
    return {c: (x - float(v.mean())) / sd for c, x in scores.items()}


def _by(r: Record, score: Mapping[str, float]) -> list[str]:
    return sorted(r["candidates"], key=lambda c: -score[c])


def _zfuse(r: Record, share: float) -> list[str]:
    zv, zb = _z(r["verifier"]), _z(r["bm25_score"])
    return _by(r, {c: (1 - share) * zv[c] + share * zb[c] for c in r["candidates"]})


def _rrf(r: Record, weights: Mapping[str, float]) -> list[str]:
    ranks = {"verifier": _ranks(r["verifier"])} | {k: {c: i for i, c in enumerate(r[k])} for k in ("bm25", "dense", "hybrid")}
    return _by(r, {c: sum(w / (RRF_K + ranks[k].get(c, DEPTH)) for k, w in weights.items()) for c in r["candidates"]})


ORDERS: dict[str, Callable[[Record], list[str]]] = {
    "verifier": lambda r: _by(r, r["verifier"]),
    "bm25 within candidates": lambda r: _by(r, r["bm25_score"]),
    "z-fusion, BM25 0.3": lambda r: _zfuse(r, 0.3),
    "z-fusion, BM25 0.5": lambda r: _zfuse(r, 0.5),
    "RRF verifier + BM25": lambda r: _rrf(r, {"verifier": 1, "bm25": 1}),
    "RRF verifier + BM25 + dense": lambda r: _rrf(r, {"verifier": 1, "bm25": 1, "dense": 1}),
    "RRF 2 x verifier + BM25 + dense": lambda r: _rrf(r, {"verifier": 2, "bm25": 1, "dense": 1}),
    "RRF verifier + hybrid": lambda r: _rrf(r, {"verifier": 1, "hybrid": 1}),
}


def records(corpus: Corpus, questions: Sequence[Any]) -> list[Record]:
    """Per question: MeVe's hybrid candidates with every one's verifier and BM25 score (phase 2
    with nothing cut, so all are scored), the plain rankings, and each chunk's tokens and the
    evidence sentences that stand whole in it."""
    counter = get_token_counter()
    out = []
    for q in questions:
        r = corpus.meve.run(q.text, tau=0.0, cut="none", coverage=0.0, coverage_floor=0.0, t_max=10**6, theta_redundancy=1.0)
        cands = list(r.phase("retrieve").kept)
        rec: Record = {"evidence": list(q.evidence), "candidates": cands, "verifier": {c: r.phase("verify").scores.get(c, 0.0) for c in cands}}
        bm = dict(corpus.meve.lexical.search(q.text, len(corpus.text)))  # every chunk: a candidate BM25 ranks low keeps its score
        rec["bm25_score"] = {c: bm.get(c, 0.0) for c in cands}
        rec |= {k: getattr(corpus, k)(q.text, DEPTH) for k in ("bm25", "dense", "hybrid")}
        seen = set(cands) | {c for k in ("bm25", "dense", "hybrid") for c in rec[k][: max(BASELINE_DEPTHS)]}
        rec["tokens"] = {c: counter.count(corpus.text[c]) for c in seen}
        rec["holds"] = {c: [e for e in q.evidence if evidence_recall([e], corpus.text[c]) == 1.0] for c in seen}
        out.append(rec)
    return out


def curve(recs: Sequence[Record], order: Callable[[Record], list[str]], depths: Sequence[int] = DEPTHS) -> list[dict[str, float]]:
    """The top-n points of ``order``: mean evidence (by text) and mean tokens, n in ``depths``."""
    points = []
    for n in depths:
        ev, tok = [], []
        for r in recs:
            top = order(r)[:n]
            # Each evidence entry counts, repeats too, as meve.evaluate.metrics.evidence_recall counts them.
            ev.append(sum(any(e in r["holds"][c] for c in top) for e in r["evidence"]) / max(1, len(r["evidence"])))
            tok.append(sum(r["tokens"][c] for c in top))
        points.append({"k": n, "evidence": round(float(np.mean(ev)), 4), "tokens": round(float(np.mean(tok)), 1)})
    return points


def _ranking(name: str) -> Callable[[Record], list[str]]:
    return lambda r: list(r[name])


def measure(recs: Sequence[Record]) -> dict[str, Any]:
    """Every order's curve and its margin over the top-k frontier at each depth."""
    baselines = {k: curve(recs, _ranking(k), BASELINE_DEPTHS) for k in ("dense", "bm25", "hybrid")}
    orders = {}
    for name, order in ORDERS.items():
        pts = curve(recs, order)
        orders[name] = [{**p, "margin": round(p["evidence"] - frontier_at(baselines, p["tokens"]), 4)} for p in pts]
    return {"questions": len(recs), "baselines": baselines, "orders": orders}


def run(data: Path, variants: Sequence[str] = LONG_VARIANTS, names: Sequence[str] = CONTEXT_SETS, dev_limit: int = 200) -> dict[str, Any]:
    t0 = time.perf_counter()
    counter = get_token_counter()
    sets = load_sets(data, dev_limit, 0, names)
    li, _disk = default_verifier()
    out: dict[str, Any] = {"protocol": __doc__, "orders_tried": len(ORDERS), "variants": {}}
    for variant in variants:
        found = {}
        for name, ds in sets.items():
            part = long_variant(ds, variant, counter).splits["dev"]
            corpus = Corpus(f"{name}-{variant}-dev", part.ids, part.texts, li)
            found[name] = measure(records(corpus, part.questions))
            corpus.close()
            print(f"long_orderings: {variant} {name} done at {time.perf_counter() - t0:.0f}s", flush=True)
        out["variants"][variant] = found
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
