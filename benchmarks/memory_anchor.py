"""Chat memory, issue 64 #1: what the recency anchor buys (follow-ups) and costs (recall), dev only.

The memory sets never ask about the latest exchange, so alone they can only price the anchor. The
follow-up probes (:mod:`benchmarks.harness.follow_ups`: a dev conversation cut after one of its
replies, and a request that leans on it) measure what it is for. For each of the seven sets' dev
splits and each budget: the follow-up probes' reply coverage (the share of the reply's tokens the
context holds: 1 whole, a cut copy its share, 0 left out; and the share of probes with it whole)
and the set's own questions' answerable margin over its best fill, for the shipped default
(``keep_recent="short"``) and the anchor for every query (``keep_recent=True``) at each
``recent_share`` (what of ``l_max`` each anchored turn may keep for a query with a subject of its
own). The dense fill's coverage is beside them.

Rule, stated before the first run: the issue asks for the anchor for every query by default, so
the default becomes ``keep_recent=True``; its share is the smallest whose mean coverage is within
0.05 of the whole anchor's (share 1.0) on every set at every budget. What it costs is reported
against the shipped default, not used to choose.

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
from meve import get_token_counter
from meve.memory.select import Selection

SHARES = (0.0625, 0.125, 0.25, 0.5, 1.0)
ARMS: dict[str, dict[str, Any]] = {"shipped": {}} | {f"always, share {s:g}": {"keep_recent": True, "recent_share": s} for s in SHARES}
SLACK = 0.05


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


def follow_up_rows(rps: list[Replay], qvecs: list[np.ndarray], l_max: int) -> dict[str, dict[str, float]]:
    counter = get_token_counter()
    out: dict[str, dict[str, float]] = {}
    for name, s in ARMS.items():
        cfg = ml.MemoryConfig(l_max=l_max, **s)
        cov = [coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(rps, qvecs, strict=True)]
        out[name] = {"coverage": round(float(np.mean(cov)), 4), "whole": round(float(np.mean([c == 1.0 for c in cov])), 4)}
    dense = [coverage(rp.fill(rp.ranking(rp.conv.questions[0].text, qv[0], "dense"), l_max)[0], rp, counter) for rp, qv in zip(rps, qvecs, strict=True)]
    out["dense fill"] = {"coverage": round(float(np.mean(dense)), 4), "whole": round(float(np.mean([c == 1.0 for c in dense])), 4)}
    return out


def run(data: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    sets = ml.conversations(data)
    emb, counter = embedder(), get_token_counter()
    out: dict[str, Any] = {"protocol": __doc__, "arms": ARMS, "datasets": {}}
    for n in ml.LODO_SETS:
        rps, qv, stem = ml.dev_replays(sets[n]["dev"])
        prb = [Replay(c, counter, emb.encode, emb.name) for c in probes(sets[n]["dev"], "dev")]
        pvec = [emb.encode([c.conv.questions[0].text]) for c in prb]
        rows: dict[str, Any] = {"probes": len(prb)}
        for b in ml.BUDGETS:
            best = max(x[ml.METRIC] for x in ml.baselines(rps, qv, b, stem).values())
            margins = {name: round(ml.score(rps, qv, ml.setting(s, b))[ml.METRIC] - best, 4) for name, s in ARMS.items()}
            rows[str(b)] = {"best_fill": best, "margins": margins, "follow_ups": follow_up_rows(prb, pvec, b)}
        out["datasets"][n] = rows
        print(f"memory_anchor: {n} dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    whole = "always, share 1"
    ok = [
        s
        for s in SHARES
        if all(
            r[str(b)]["follow_ups"][f"always, share {s:g}"]["coverage"] >= r[str(b)]["follow_ups"][whole]["coverage"] - SLACK
            for r in out["datasets"].values()
            for b in ml.BUDGETS
        )
    ]
    out["chosen_share"] = min(ok)
    emb.save()
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
