"""Chat memory, issue 76: can a small learned classifier tell a follow-up from a question, in place
of the hand rule's cosine bar? Measured on the dev splits; not shipped (the rule below said no).

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

Why: benchmarks/memory_lean.py found that the rule that keeps the latest exchange first (a query
of at most six words, or one that nothing earlier is near: :func:`meve.memory.decide.leans_on_latest`)
cannot tell a standalone request whose earlier turns sit under the cosine bar (PrefEval) from a
follow-up that names nothing said before, and a learned ranker (benchmarks/memory_ranker.py) learns
nothing about the latest exchange from sets that hold no follow-up. The follow-up probes
(:mod:`benchmarks.harness.follow_ups`) are such data. The first part measures how well the two
kinds of message separate; the second puts a classifier in the rule's place and applies the rule
that would ship it.

Data, dev splits only: each set's own questions (label 0: they never ask about the latest exchange)
and its dev follow-up probes (label 1: a request that leans on the reply just given). Per query, seven
features a rebuild already reads, fixed before any figure:

- ``log_words``: log(1 + the query's words); ``short``: at most six words (the hand rule's cut);
- ``refers_back``: the follow-up wording (an opening that continues, or a pronoun or demonstrative,
  ``meve.memory.decide._FOLLOW_UP``) anywhere in the query, at any length;
- ``nearest``: the best MiniLM cosine of the query with a turn before the latest exchange;
- ``latest``: the best cosine with one of the latest exchange's two turns, and ``latest_minus_nearest``;
- ``said``: a turn before the latest exchange holds a word of the query (BM25 above 0).

A logistic regression (L2 1e-2 on the standardised features, one setting) is trained on the other
six sets' dev queries, each set and within it each class weighing the same, and scored on the
left-out set's dev queries: ROC AUC, and at P >= 0.5 the share of probes it calls follow-ups and the
share of questions it calls follow-ups, beside the hand rule's two shares (the rule as shipped,
``follow_up_cosine`` 0.3). The probes' requests come from one list of twelve phrasings shared by
every set, so leaving a set out does not hide the wording: these figures are an upper bound of what
such a classifier does on requests worded otherwise (the test probes' other list was not read).

End to end, dev splits only: the regression over the four features a rebuild has when it decides
(:data:`DECIDE`: no cosine with the latest exchange, which it does not compute), fitted on queries
of over six words, in place of the hand rule's cosine bar (:func:`learned_leans`: a query of at most
six words still leans by its length, and without a cosine the words decide, as shipped): the set's
own questions' answerable margin over the best fill at 256, 512 and 1,024 tokens (paired interval
against the rule as shipped, ``before``) and the dev probes' reply coverage
(:func:`benchmarks.memory_anchor.coverage`). Two regimes: fitted on the other six sets
(``end_to_end``), and on the permissively licensed sets other than the left-out one
(``end_to_end_permissive``: what could ship; LoCoMo, BEAM and PrefEval are never fitted on).

The rule, fixed before any end-to-end figure (:func:`verdict`): the classifier ships if its mean
margin is at least the hand rule's, no row's paired interval lies wholly below zero, and no set and
budget keeps less of the probes' replies.

Runs (2026-11-29). First form (five features, every query, the six-word cut one of them; fitted on
the other six sets): mean dev margin +0.0292 to +0.0317, no veto, more of the reply kept everywhere
(benchmarks/results/history/memory_follow_run1_five_features.json). It was dropped before any test
figure, for a reason read off its weights rather than a figure: the cosine dominates and length is
nearly all of the rest, so a repeated "Continue" (cosine 0.9 or more with the one said before)
gets P 0.34 or less from the weights fitted on the permissive sets, and would let the reply
compete. This form keeps the six-word cut ahead of the classifier: mean dev margin +0.0283
(fitted on the other six) and +0.0263 (permissive), against +0.0292; no veto; reply coverage up on
RealMem (0.47 to 0.78 at 512), PrefEval (0.63 to 1.00 at 1,024), LongMemEval and
BEAM, and down nowhere. The rule says no (the questions' mean margin is below the hand rule's), so
nothing ships; one or two questions of MemoryBank, LongMemEval and BEAM, long ones that the
classifier calls follow-ups, pay for the gain. The test splits were not read.

    python -m benchmarks.memory_follow [--data DIR]     # writes benchmarks/results/memory_follow.json
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from benchmarks import memory_anchor as anchor
from benchmarks import memory_lodo as ml
from benchmarks import memory_ranker as mr
from benchmarks.harness.common import dev_main, embedder
from benchmarks.harness.conversations import Replay
from benchmarks.harness.follow_ups import probes
from meve import MemoryConfig, get_token_counter
from meve.memory import decide
from meve.memory.select import latest_turns
from meve.memory.signals import nearest, said_before

FEATURES = ("log_words", "short", "refers_back", "nearest", "latest", "latest_minus_nearest", "said")
#: The features a rebuild has when it decides whether a query of over six words leans on the latest exchange.
DECIDE = ("log_words", "refers_back", "nearest", "said")
L2 = 1e-2
CFG = MemoryConfig()


def features_of(rp: Replay, query: str, qvec: np.ndarray) -> list[float]:
    """One query's features (:data:`FEATURES`), read as a rebuild reads the conversation."""
    latest = latest_turns(rp.snap, CFG.recent_turns, (), ())
    hits = rp.search(query, qvec, CFG)(set(), 256 + len(latest))[rp.embedder]
    near = nearest(hits, set(latest), rp.turns) or 0.0
    last = max((float(rp.vecs[i] @ qvec) for i in latest), default=0.0)
    words = len(query.split())
    said = said_before(rp.scores(query, CFG.stemming), rp.turns, set(latest), ())
    refers = decide._FOLLOW_UP.search(query) is not None
    return [math.log1p(words), float(words <= 6), float(refers), near, last, last - near, float(said)]


PERMISSIVE = ("selqa_chat", "memorybank", "realmem", "longmemeval")  # Apache-2.0 or MIT: what shipped weights may be fitted on


@dataclass(frozen=True)
class Model:
    """A fitted classifier over :data:`DECIDE`: the standardisation it was fitted on, its weights and bias."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    about: dict[str, Any]

    def probability(self, query: str, nearby: decide.Nearby) -> float:
        """P(follow-up) for a query of over six words and what the rebuild read before the latest exchange."""
        x = np.asarray([math.log1p(len(query.split())), float(decide._FOLLOW_UP.search(query) is not None), nearby.nearest or 0.0, float(nearby.said)])
        return 1.0 / (1.0 + math.exp(-float(((x - self.mean) / self.scale) @ self.weights + self.bias)))


def learned_leans(model: Model) -> Any:
    """:func:`meve.memory.decide.leans_on_latest` with the classifier in place of the cosine bar: a
    query of at most six words leans by its length; without a cosine (``follow_up_cosine`` None,
    or no earlier turn searched) the words decide, as shipped; otherwise P(follow-up) >= 0.5."""

    def leans(query: str, nearby: decide.Nearby, threshold: float | None) -> tuple[bool, str]:
        if decide.short_query(query)[0] or threshold is None or nearby.nearest is None:
            return before_leans(query, nearby, threshold)
        p = model.probability(query, nearby)
        return p >= 0.5, f"the learned follow-up classifier gives {p:.2f}"

    return leans


#: The rule as shipped (:func:`meve.memory.decide.leans_on_latest`), kept before any patch.
before_leans = decide.leans_on_latest


@contextmanager
def arm(name: str, model: Model | None = None) -> Iterator[None]:
    """``before``: the hand rule as shipped; ``learned``: the classifier ``model`` in its place."""
    leans = before_leans if name == "before" or model is None else learned_leans(model)
    with mock.patch.object(decide, "leans_on_latest", leans):
        yield


def hand_rule(rp: Replay, query: str, qvec: np.ndarray) -> bool:
    """Whether the hand rule keeps the latest exchange first for ``query``."""
    with arm("before"):
        return bool(rp.candidates(query, qvec, CFG).decided.keep_recent)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """L2-penalised weighted logistic regression by Newton's method (``w`` sums to 1)."""
    theta = np.zeros(x.shape[1] + 1)
    xa = np.column_stack([x, np.ones(len(x))])
    pen = np.full(len(theta), L2)
    pen[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(xa @ theta)))
        grad = xa.T @ (w * (p - y)) + pen * theta
        hess = (xa * (w * p * (1 - p))[:, None]).T @ xa + np.diag(pen + 1e-9)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if float(grad @ step) < 1e-12:
            break
    return theta[:-1], float(theta[-1])


def auc(score: np.ndarray, y: np.ndarray) -> float:
    """ROC AUC by ranks (ties count half)."""
    pos, neg = score[y == 1], score[y == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def calls(said_follow_up: np.ndarray, follow_up: np.ndarray, question: np.ndarray) -> dict[str, float]:
    """The share of probes, and of questions, called follow-ups."""
    share = {"probes": follow_up, "questions": question}
    return {f"{k}_called_follow_up": round(float(said_follow_up[v].mean()), 4) for k, v in share.items()}


def gather(convs: Any, probe_convs: Any) -> dict[str, np.ndarray]:
    """Every question's and probe's features, label and the hand rule's call."""
    rows, labels, rule = [], [], []
    for label, cs in ((0, convs), (1, probe_convs)):
        rps, qvecs = ml.replays_of(cs)
        for rp, vecs in zip(rps, qvecs, strict=True):
            for q, qv in zip(rp.conv.questions, vecs, strict=True):
                rows.append(features_of(rp, q.text, qv))
                labels.append(label)
                rule.append(hand_rule(rp, q.text, qv))
    return {"x": np.asarray(rows), "y": np.asarray(labels, dtype=float), "rule": np.asarray(rule)}


def trained(
    got: dict[str, dict[str, np.ndarray]], names: Sequence[str], cols: Sequence[int], long_only: bool = False
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """The regression over columns ``cols`` fitted on ``names``' queries (``long_only``: those of
    over six words), each set, and each class within it, weighing the same; with the
    standardisation it reads."""
    keep = {m: got[m]["x"][:, FEATURES.index("short")] == 0 if long_only else np.ones(len(got[m]["y"]), dtype=bool) for m in names}
    x = np.vstack([got[m]["x"][keep[m]][:, list(cols)] for m in names])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    ys = {m: got[m]["y"][keep[m]] for m in names}
    y = np.concatenate([ys[m] for m in names])
    w = np.concatenate([np.where(ys[m] == 1, 0.5 / max(1, ys[m].sum()), 0.5 / max(1, (1 - ys[m]).sum())) for m in names])
    coef, bias = fit((x - mu) / sd, y, w / w.sum())
    return coef, bias, mu, sd


def model_of(got: dict[str, dict[str, np.ndarray]], names: Sequence[str]) -> Model:
    """The classifier over :data:`DECIDE` fitted on ``names``' dev queries of over six words (a
    shorter one leans on the latest exchange by its length: :func:`meve.memory.decide.leans_on_latest`)."""
    coef, bias, mu, sd = trained(got, names, [FEATURES.index(f) for f in DECIDE], long_only=True)
    long = {m: int((got[m]["x"][:, FEATURES.index("short")] == 0).sum()) for m in names}
    about = {"sets": list(names), "queries_over_six_words": long, "l2": L2}
    return Model(mu, sd, coef, bias, about)


def compare(convs: Any, probe_convs: Any, stem: bool | None, model: Model) -> dict[str, Any]:
    """The hand rule against the classifier ``model`` on one split:
    the questions' answerable margin over the best fill per budget (paired interval against the
    hand rule), and the probes' reply coverage."""
    reps, qvecs = ml.replays_of(convs)
    prep = mr.Prepared(reps, qvecs, ml.stemming_helps(reps, qvecs) if stem is None else stem)
    prb = ml.replays_of(probe_convs)
    counter, out = get_token_counter(), {}
    for b in ml.BUDGETS:
        runs = {k: _under(k, model, ml.setting({}, b)) for k in ("before", "learned")}
        row = mr.rows_at(prep, {mr.SHIPPED: runs["before"], "learned": runs["learned"]}, b)
        cfg = MemoryConfig(l_max=b)
        for k, key in (("before", mr.SHIPPED), ("learned", "learned")):
            with arm(k, model):
                cov = [anchor.coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(*prb, strict=True)]
            row[key]["probe_coverage"] = round(float(np.mean(cov)), 4)
        out[str(b)] = row
    return out


def _under(name: str, model: Model, run: Any) -> Any:
    def patched(rp: Any, query: str, qvec: Any) -> Any:
        with arm(name, model):
            return run(rp, query, qvec)

    return patched


def verdict(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The rule fixed before the figures: the classifier ships if its mean margin over the best fill
    is at least the hand rule's, no row's paired interval against the hand rule lies below zero, and
    no set and budget keeps less of the probes' replies."""
    flat = [r for per in rows.values() for k, r in per.items() if k != "probes"]
    mean = {k: round(float(np.mean([r[k]["margin"] for r in flat])), 4) for k in (mr.SHIPPED, "learned")}
    vetoes = [f"{n} at {b}" for n, per in rows.items() for b, r in per.items() if r["learned"]["vs_shipped_ci95"][1] < 0]
    less = [f"{n} at {b}" for n, per in rows.items() for b, r in per.items() if r["learned"]["probe_coverage"] < r[mr.SHIPPED]["probe_coverage"]]
    return {
        "mean_margin": {"before": mean[mr.SHIPPED], "learned": mean["learned"]},
        "vetoed_by": vetoes,
        "less_reply_kept": less,
        "ships": mean["learned"] >= mean[mr.SHIPPED] and not vetoes and not less,
    }


def run(data: Path) -> dict[str, Any]:
    """The AUC of each set left out; end to end on dev with the other sets (all, and the permissive ones)."""
    t0 = time.perf_counter()
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    got = {n: gather(s["dev"], probes(s["dev"], "dev")) for n, s in sets.items()}
    out: dict[str, Any] = {"protocol": __doc__, "features": FEATURES, "decide": DECIDE, "l2": L2, "sets": {}}
    for n in sets:
        coef, bias, mu, sd = trained(got, [m for m in sets if m != n], list(range(len(FEATURES))))
        g = got[n]
        p = 1.0 / (1.0 + np.exp(-(((g["x"] - mu) / sd) @ coef + bias)))
        follow_up, question = g["y"] == 1, g["y"] == 0
        out["sets"][n] = {"questions": int(question.sum()), "probes": int(follow_up.sum()), "auc": round(auc(p, g["y"]), 4)}
        out["sets"][n] |= {"classifier": calls(p >= 0.5, follow_up, question), "hand_rule": calls(g["rule"], follow_up, question)}
        out["sets"][n]["weights"] = dict(zip(FEATURES, np.round(coef, 3).tolist(), strict=True))
    for regime, pool in (("end_to_end", list(sets)), ("end_to_end_permissive", list(PERMISSIVE))):
        rows = {}
        for n, s in sets.items():
            rows[n] = compare(s["dev"], probes(s["dev"], "dev"), None, model_of(got, [m for m in pool if m != n]))
        out[regime] = rows | {"verdict": verdict(rows)}
        print(f"memory_follow: {regime} done at {time.perf_counter() - t0:.0f}s: {out[regime]['verdict']}", flush=True)
    embedder().save()
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    """Dev rows, written to benchmarks/results/memory_follow.json."""
    dev_main("memory_follow", run, __doc__, argv)


if __name__ == "__main__":
    main()
