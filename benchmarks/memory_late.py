"""Chat memory, issue 64 #3: does the context pipeline's late-interaction verifier (MaxSim over
MiniLM's token vectors, above cosine on every held-out context set) lift MomentaryMemory's turn
selection? Dev splits only: no setting here is read on a test split.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

The signal scores the head of the shipped setting's fused pool (its best ``HEAD`` turns by the
weighted BM25 + cosine sum, after the role cue): each of them gains ``weight`` x its min-max
normalised late-interaction score, then the fill runs as shipped (anchor, partner turns, dates,
``l_max``). Two forms, five settings in all, each fixed before its figures were read:

- ``whole``: the turn's MaxSim (mean over query tokens of the best cosine over the turn's token
  vectors), weights 0.5, 1.0 and 2.0 (tried first);
- ``sentence``: the turn's best sentence by the verifier's calibrated span score (the same token
  vectors, MaxSim over the tokens inside each sentence), weights 0.5 and 1.0: tried after the
  first form lost most on RealMem and LongMemEval, whose turns are long (133 and 158 words on
  average), where a whole turn's MaxSim grows with its length.

Rule, the one the memory's per-query decisions were kept by (``benchmarks/memory_lodo.py``): keep a
setting only if no set-and-budget dev margin of the shipped setting over the best fill falls and
its mean dev margin rises. Every arm is rendered and counted as in ``benchmarks.memory_lodo``
(answerable and all-evidence metrics, the best of six fills per set and budget), per question type
too. Token vectors are cached on disk (``benchmarks/.cache/tokens-memory-all-MiniLM-L6-v2.npz``).

    python -m benchmarks.run --full --only memory_late [--data DIR]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks.harness.common import TokenDiskCache
from benchmarks.harness.conversations import MEMORY_SETS, Replay
from meve import MemoryConfig, SentenceTransformerEmbedder
from meve.core.text import sentence_spans
from meve.memory.select import Selection, rank
from meve.retrieval.fusion import minmax
from meve.scoring.late_interaction import LateInteractionScorer

HEAD = 64
SETTINGS: list[dict[str, Any]] = [
    {"form": "whole", "weight": 0.5},
    {"form": "whole", "weight": 1.0},
    {"form": "whole", "weight": 2.0},
    {"form": "sentence", "weight": 0.5},
    {"form": "sentence", "weight": 1.0},
]


class LateReplay(Replay):
    """The shipped selection (:meth:`Replay.memory`) with the late-interaction bonus on its head."""

    li: LateInteractionScorer

    def late(self, query: str, turns: Sequence[int], form: str) -> np.ndarray:
        texts = [self.turns[i].text for i in turns]
        if form == "whole":
            return self.li.raw_scores(query, texts)
        return np.array([float(np.max(self.li.score_spans(query, t, sentence_spans(t) or [(0, len(t))]))) for t in texts])

    def memory_late(self, query: str, qvec: np.ndarray, cfg: MemoryConfig, form: str, weight: float) -> tuple[Selection, str]:
        found = self.candidates(query, qvec, cfg)
        fused = dict(found.fused)
        head = rank(fused, self.snap.keys)[:HEAD]
        if head:
            for i, v in minmax(dict(zip(head, self.late(query, head, form).tolist(), strict=True))).items():
                fused[i] += weight * v
        return self.choose(query, replace(found, fused=fused))


def late_setting(s: dict[str, Any], l_max: int) -> Any:
    shipped: dict[str, Any] = dict(ml.SHIPPED)
    cfg = MemoryConfig(l_max=l_max, **shipped)
    return lambda rp, q, qv: rp.memory_late(q, qv, cfg, s["form"], s["weight"])


def summary(rows: Sequence[dict[str, dict[str, float]]], arm: str) -> dict[str, Any]:
    """An arm's dev margins over every set and budget, and whether the module docstring's rule keeps it."""
    mine, shipped = [r[arm][ml.METRIC] for r in rows], [r["shipped"][ml.METRIC] for r in rows]
    return {
        "mean_dev_margin": round(float(np.mean(mine)), 4),
        "worst_dev_margin": round(min(mine), 4),
        "rows_below_shipped": sum(a < b for a, b in zip(mine, shipped, strict=True)),
        "kept": arm != "shipped" and all(a >= b for a, b in zip(mine, shipped, strict=True)) and float(np.mean(mine)) > float(np.mean(shipped)),
    }


def run(data: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    LateReplay.li = LateInteractionScorer(SentenceTransformerEmbedder(), cache_bytes=8 * 2**30)
    disk = TokenDiskCache("memory-all-MiniLM-L6-v2")
    disk.load_into(LateReplay.li.cache)
    sets = ml.conversations(data)
    out: dict[str, Any] = {"protocol": __doc__, "head": HEAD, "settings": SETTINGS, "settings_tried": len(SETTINGS), "datasets": {}}
    for n in MEMORY_SETS:
        rps, qv, stem = ml.dev_replays(sets[n]["dev"], LateReplay)
        budgets = {}
        for b in ml.BUDGETS:
            base = ml.baselines(rps, qv, b, stem)
            arms = {"shipped": ml.score(rps, qv, ml.setting({}, b))} | {f"{s['form']} {s['weight']}": ml.score(rps, qv, late_setting(s, b)) for s in SETTINGS}
            best = {m: max(x[m] for x in base.values()) for m in ml.METRICS}
            margins = {a: {m: round(v[m] - best[m], 4) for m in ml.METRICS} for a, v in arms.items()}
            budgets[str(b)] = {"best_fill": best, "arms": arms, "margins": margins}
        out["datasets"][n] = {"dev_questions": sum(len(c.questions) for c in sets[n]["dev"]), "budgets": budgets}
        disk.save(LateReplay.li.cache)
        print(f"memory_late: {n} dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    names = ["shipped", *(f"{s['form']} {s['weight']}" for s in SETTINGS)]
    rows = [out["datasets"][n]["budgets"][str(b)]["margins"] for n in MEMORY_SETS for b in ml.BUDGETS]
    out["summary"] = {a: summary(rows, a) for a in names}
    out["encoded_at_query_time"] = LateReplay.li.encoded_at_query_time
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
