"""Chat memory, issue 64 #1: what the recency anchor buys (follow-ups) and costs (recall).

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

The memory sets never ask about the latest exchange, so alone they can only price the anchor. The
follow-up probes (:mod:`benchmarks.harness.follow_ups`: a conversation cut after one of its
replies, and a request that leans on it) measure what it is for. Per set and budget: the probes'
reply coverage (the share of the reply's tokens the context holds: 1 whole, a cut copy its share,
0 left out; and the share with it whole) and the set's own questions' answerable margin over its
best fill. The dense fill's coverage is beside them.

First run (2026-11-28, dev only; ``benchmarks/results/history/memory_anchor_run1_shares.json``):
the anchor for every query (``keep_recent=True``) at each ``recent_share``. Its rule, stated
before it ran (the smallest share whose coverage is within 0.05 of the whole anchor's on every set
and budget), picked share 1.0, whose recall cost was up to 0.89 (PrefEval at 256 tokens: replies
of thousands of tokens take the budget); it was not shipped, and the rule was wrong for sets with
long replies, where any cap loses coverage. Reading the probes against the questions (dev only)
showed what separates them: a follow-up comes near no turn before the latest exchange (best
all-MiniLM-L6-v2 cosine 0.13-0.52 over the seven dev splits' probes) where a question finds its
subject (median 0.49-0.71).

Second run (this protocol): ``follow_up_cosine`` (:func:`meve.memory.decide.leans_on_latest`): a
query over six words whose best cosine with a turn before the latest exchange is under it leans on
that exchange, which is then kept first, whole when it fits. Arms: off, 0.3, 0.35 and 0.4, with
``keep_recent="short"`` (the anchor only for a query that leans on it) and with ``True`` (every
query, share 1/16 for the others): 8 settings. Rule, stated before any figure of these arms (a scratch replay of them on dev, outside the
repository, ran first and matches this run's dev rows): for
each mode, the largest value whose answerable margin is at most 0.02 below the same mode's with
the rule off on every dev split and budget (chosen on all seven for the default, on the other six
for each left-out set). Test: the left-out choice's probe coverage (the test probes' requests are
another list, never used to choose) and margin.

    python -m benchmarks.run --full --only memory_anchor [--data DIR]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks.harness.common import embedder
from benchmarks.harness.conversations import Replay
from benchmarks.harness.follow_ups import probes
from benchmarks.harness.splits import write_fitted
from meve import get_token_counter
from meve.memory.select import Selection

COSINES: tuple[float | None, ...] = (None, 0.3, 0.35, 0.4)
MODES: dict[str, dict[str, Any]] = {"short": {"keep_recent": "short"}, "always": {"keep_recent": True, "recent_share": 0.0625}}
ARMS: dict[str, dict[str, Any]] = {f"{m} {c}": {**s, "follow_up_cosine": c} for m, s in MODES.items() for c in COSINES}
TOLERANCE = 0.02


def coverage(sel: Selection, rp: Replay, counter: Any) -> float:
    """The share of the probed reply's tokens in the selection (it is the conversation's last turn)."""
    p = len(rp.turns) - 1
    kept = sel.picked.get(p)
    if kept is None:
        return 0.0
    if not kept.metadata.get("meve_truncated"):
        return 1.0
    text = kept.text.removeprefix("… ").removesuffix(" […]")
    return min(1.0, counter.count(text) / max(1, counter.count(rp.turns[p].text)))


def follow_ups(rps: list[Replay], qvecs: list[np.ndarray], l_max: int, arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each arm's mean reply coverage over the probes ``rps``, and the dense fill's."""
    counter = get_token_counter()
    out: dict[str, dict[str, float]] = {}
    for name, s in arms.items():
        cfg = ml.MemoryConfig(l_max=l_max, **s)
        cov = [coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(rps, qvecs, strict=True)]
        out[name] = {"coverage": round(float(np.mean(cov)), 4), "whole": round(float(np.mean([c == 1.0 for c in cov])), 4)}
    dense = [coverage(rp.fill(rp.ranking(rp.conv.questions[0].text, qv[0], "dense"), l_max)[0], rp, counter) for rp, qv in zip(rps, qvecs, strict=True)]
    out["dense fill"] = {"coverage": round(float(np.mean(dense)), 4), "whole": round(float(np.mean([c == 1.0 for c in dense])), 4)}
    return out


def _rows(rps: list[Replay], qv: list[np.ndarray], prb: tuple[list[Replay], list[np.ndarray]], stem: bool, arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, Any] = {"probes": len(prb[0])}
    for b in ml.BUDGETS:
        best = max(x[ml.METRIC] for x in ml.baselines(rps, qv, b, stem).values())
        margins = {name: round(ml.score(rps, qv, ml.setting(s, b))[ml.METRIC] - best, 4) for name, s in arms.items()}
        rows[str(b)] = {"best_fill": best, "margins": margins, "follow_ups": follow_ups(*prb, b, arms)}
    return rows


def choose(dev: dict[str, Any], names: list[str], mode: str) -> float | None:
    """The largest cosine whose margin is at most TOLERANCE below the rule off's (same mode) on every given dev split and budget."""
    ok = [
        c
        for c in COSINES
        if c is not None
        and all(dev[n][str(b)]["margins"][f"{mode} {c}"] >= dev[n][str(b)]["margins"][f"{mode} None"] - TOLERANCE - 1e-9 for n in names for b in ml.BUDGETS)
    ]
    return max(ok) if ok else None


def run(data: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    sets = ml.conversations(data)
    out: dict[str, Any] = {"protocol": __doc__, "arms": ARMS, "tolerance": TOLERANCE, "datasets": {}}
    dev: dict[str, Any] = {}
    for n in ml.LODO_SETS:
        rps, qv, stem = ml.dev_replays(sets[n]["dev"])
        dev[n] = _rows(rps, qv, ml.replays_of(probes(sets[n]["dev"], "dev")), stem, ARMS) | {"bm25_stemmed": stem}
        print(f"memory_anchor: {n} dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    default = {m: choose(dev, list(ml.LODO_SETS), m) for m in MODES}
    out["default"] = default
    for n in ml.LODO_SETS:
        picked = {m: choose(dev, [x for x in ml.LODO_SETS if x != n], m) for m in MODES}
        arms = {f"{m} {c}": ARMS[f"{m} {c}"] for m in MODES for c in {None, picked[m], default[m]}}
        rps, qv = ml.replays_of(sets[n]["test"])  # with the dev split's BM25 choice, not the test's
        test = _rows(rps, qv, ml.replays_of(probes(sets[n]["test"], "test")), dev[n]["bm25_stemmed"], arms)
        out["datasets"][n] = {"dev": dev[n], "lodo_choice": picked, "test": test}
        print(f"memory_anchor: {n} test done at {time.perf_counter() - t0:.0f}s", flush=True)
    items = [q.id for n in ml.LODO_SETS for c in [*sets[n]["dev"], *probes(sets[n]["dev"], "dev")] for q in c.questions]
    knob = "MemoryConfig.follow_up_cosine (meve.memory.decide.leans_on_latest)"
    write_fitted("follow_up_cosine", knob, items, "python -m benchmarks.run --full --only memory_anchor", default)
    embedder().save()
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
