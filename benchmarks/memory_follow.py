"""Chat memory, issue 76 groundwork: can a small learned classifier tell a follow-up from a question
better than the hand rule that decides it today?

Why: benchmarks/memory_lean.py found that the rule that keeps the latest exchange first (a query
of at most six words, or one that nothing earlier is near: :func:`meve.memory.decide.leans_on_latest`)
cannot tell a standalone request whose earlier turns sit under the cosine bar (PrefEval) from a
follow-up that names nothing said before, and a learned ranker (benchmarks/memory_ranker.py) learns
nothing about the latest exchange from sets that hold no follow-up. The follow-up probes
(:mod:`benchmarks.harness.follow_ups`) are such data. This module measures only; it ships nothing.

Data, dev splits only: each set's own questions (label 0: they never ask about the latest exchange)
and its dev follow-up probes (label 1: a request that leans on the reply just given). Per query, six
features a rebuild already reads, fixed before any figure:

- ``log_words``: log(1 + the query's words); ``short``: at most six words (the hand rule's cut);
- ``refers_back``: the follow-up wording (an opening that continues, or a pronoun or demonstrative,
  :data:`meve.memory.decide._FOLLOW_UP`) anywhere in the query, at any length;
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

End to end (``end_to_end``), dev splits only: the same regression over the five features a rebuild
has when it decides (:data:`DECIDE`: no cosine with the latest exchange, which it does not compute),
trained on the other six sets, in place of :func:`meve.memory.decide.leans_on_latest` (patched for
the benchmark only): the set's own questions' answerable margin over the best fill at 256, 512 and
1,024 tokens (paired interval against the shipped rule) and the dev probes' reply coverage
(:func:`benchmarks.memory_anchor.coverage`), beside the shipped rule's.

    python -m benchmarks.memory_follow [--data DIR]     # writes benchmarks/results/memory_follow.json
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from benchmarks import memory_anchor as anchor
from benchmarks import memory_lodo as ml
from benchmarks import memory_ranker as mr
from benchmarks.harness.common import data_dir, embedder, write_result
from benchmarks.harness.conversations import Replay
from benchmarks.harness.follow_ups import probes
from meve import MemoryConfig, get_token_counter
from meve.memory import decide
from meve.memory.select import latest_turns
from meve.memory.signals import nearest, said_before

FEATURES = ("log_words", "short", "refers_back", "nearest", "latest", "latest_minus_nearest", "said")
#: The features a rebuild has when it decides whether the query leans on the latest exchange.
DECIDE = ("log_words", "short", "refers_back", "nearest", "said")
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


def hand_rule(rp: Replay, query: str, qvec: np.ndarray) -> bool:
    """Whether the shipped rule keeps the latest exchange first for ``query``."""
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


def calls(said_follow_up: np.ndarray, follow: np.ndarray, question: np.ndarray) -> dict[str, float]:
    """The share of probes, and of questions, called follow-ups."""
    return {
        "probes_called_follow_up": round(float(said_follow_up[follow].mean()), 4),
        "questions_called_follow_up": round(float(said_follow_up[question].mean()), 4),
    }


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


def trained(got: dict[str, dict[str, np.ndarray]], names: list[str], cols: list[int]) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """The regression over columns ``cols`` fitted on ``names``' queries (each set, and each class
    within it, weighing the same), with the standardisation it reads."""
    x = np.vstack([got[m]["x"][:, cols] for m in names])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    y = np.concatenate([got[m]["y"] for m in names])
    w = np.concatenate([np.where(got[m]["y"] == 1, 0.5 / max(1, got[m]["y"].sum()), 0.5 / max(1, (1 - got[m]["y"]).sum())) for m in names])
    coef, bias = fit((x - mu) / sd, y, w / w.sum())
    return coef, bias, mu, sd


def learned_leans(coef: np.ndarray, bias: float, mu: np.ndarray, sd: np.ndarray) -> Any:
    """A stand-in for :func:`meve.memory.decide.leans_on_latest` that asks the regression over :data:`DECIDE`."""

    def leans(query: str, nearby: decide.Nearby, threshold: float | None) -> tuple[bool, str]:
        words = len(query.split())
        x = np.asarray([math.log1p(words), float(words <= 6), float(decide._FOLLOW_UP.search(query) is not None), nearby.nearest or 0.0, float(nearby.said)])
        p = 1.0 / (1.0 + math.exp(-float(((x - mu) / sd) @ coef + bias)))
        return p >= 0.5, f"the learned follow-up classifier gives {p:.2f}"

    return leans


def end_to_end(sets: dict[str, Any], got: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Per left-out set: question margins and probe coverage, shipped rule and learned, dev splits."""
    cols = [FEATURES.index(f) for f in DECIDE]
    out: dict[str, Any] = {}
    for n, s in sets.items():
        leans = learned_leans(*trained(got, [m for m in sets if m != n], cols))
        reps, qvecs, stem = ml.dev_replays(s["dev"])
        prep = mr.Prepared(reps, qvecs, stem)
        prb = ml.replays_of(probes(s["dev"], "dev"))
        out[n] = {}
        for b in ml.BUDGETS:
            shipped = ml.setting({}, b)

            def patched(rp: Any, query: str, qvec: Any, shipped: Any = shipped, leans: Any = leans) -> Any:
                with mock.patch.object(decide, "leans_on_latest", leans):
                    return shipped(rp, query, qvec)

            row = mr.rows_at(prep, {mr.SHIPPED: shipped, "learned": patched}, b)
            counter, cfg = get_token_counter(), MemoryConfig(l_max=b)
            cov = {"shipped": [anchor.coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(*prb, strict=True)]}
            with mock.patch.object(decide, "leans_on_latest", leans):
                cov["learned"] = [anchor.coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(*prb, strict=True)]
            for k in cov:
                row[k if k == "learned" else mr.SHIPPED]["probe_coverage"] = round(float(np.mean(cov[k])), 4)
            out[n][str(b)] = row
        print(f"memory_follow: {n} end to end done", flush=True)
    return out


def run(data: Path) -> dict[str, Any]:
    """Every set left out in turn: the classifier's AUC and calls beside the hand rule's, then end to end."""
    t0 = time.perf_counter()
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    got = {n: gather(s["dev"], probes(s["dev"], "dev")) for n, s in sets.items()}
    out: dict[str, Any] = {"protocol": __doc__, "features": FEATURES, "l2": L2, "sets": {}}
    for n in sets:
        coef, bias, mu, sd = trained(got, [m for m in sets if m != n], list(range(len(FEATURES))))
        g = got[n]
        p = 1.0 / (1.0 + np.exp(-(((g["x"] - mu) / sd) @ coef + bias)))
        follow, question = g["y"] == 1, g["y"] == 0
        out["sets"][n] = {
            "questions": int(question.sum()),
            "probes": int(follow.sum()),
            "auc": round(auc(p, g["y"]), 4),
            "classifier": {
                "probes_called_follow_up": round(float((p[follow] >= 0.5).mean()), 4),
                "questions_called_follow_up": round(float((p[question] >= 0.5).mean()), 4),
            },
            "hand_rule": {
                "probes_called_follow_up": round(float(g["rule"][follow].mean()), 4),
                "questions_called_follow_up": round(float(g["rule"][question].mean()), 4),
            },
            "weights": dict(zip(FEATURES, np.round(coef, 3).tolist(), strict=True)),
        }
        print(f"memory_follow: {n} {out['sets'][n]['auc']}", flush=True)
    out["end_to_end"] = end_to_end(sets, got)
    embedder().save()
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    """Measure, and write benchmarks/results/memory_follow.json."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", help="folder holding locomo/ (default ../shared/data)")
    args = ap.parse_args(argv)
    write_result("memory_follow", run(data_dir(args.data)), "python -m benchmarks.memory_follow")


if __name__ == "__main__":
    main()
