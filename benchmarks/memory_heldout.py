"""Chat memory on questions nobody has seen (issue 48): the shipped ``MemoryConfig()`` against the
best fill on a second LongMemEval_S sample, read once.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

Why: the memory section's design was revised five times after test figures had been seen
(BENCHMARKS.md, "Chat memory"), so its left-out figures are not clean held-out figures. This is
the check that is: 60 more LongMemEval_S questions (the next 10 of each of the six types in the
sample's sha256 order, ranks 11-20; ``benchmarks/harness/longmemeval_heldout.sha256``, DATA.md),
none of them used to choose, shape or tune anything, each asked after its own history of about 50
dated sessions (~500 turns). Nothing is chosen here: every arm is fixed before the run.

Written before the first run, and not changed after it:
- Arms, at ``l_max`` 256, 512 and 1024: ``MemoryConfig()`` as shipped (the sixth run's selection,
  role cue on); the same without the role cue (the sixth run's change, judged on dev only); the
  paper's settings; the default shipped before issue 48. Beside them the six fills of
  :mod:`benchmarks.memory_lodo` (dense, BM25, hybrid, each also dated for a time question; BM25
  stemmed or plain as LongMemEval's dev split chose in ``memory_lodo.json``), rendered alike.
- The figure: the shipped default's gain over the best of the six fills on these questions (the
  best chosen on them, which favours the fills), on the answerable and all-evidence metrics, with a
  paired bootstrap interval (questions resampled, the best fill chosen again on each draw); per
  question type too (10 questions a type: one question moves a type's figure by 0.1).
- The claim it checks: the shipped default is on or above the best fill at every budget on both
  metrics (issue 48's "point estimate >= 0"). A miss is reported as measured; nothing is changed
  in the library because of this run.
- The shipped setting through the real ``MomentaryMemory`` (Chroma, MiniLM) at 512, which must
  equal the replay.

Read a second time on 2026-11-27, after the seventh memory run (``query_sentences``, shaped on
RealMem's dev questions, not on these): the shipped arm now includes that decision, which fires on
almost none of these questions; every figure came out the same.

Read a third time on 2026-11-27 evening, after issue 64 made the latest exchange (the two most recent
turns) kept for every query by default, a product rule shaped on no data set; one arm was added
before the read, the default 0.2.0 shipped (``keep_recent="auto"``, one recent turn).

    python -m benchmarks.run --full --only memory_heldout
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchmarks.harness.common import RESULTS, embedder
from benchmarks.harness.conversations import LONGMEMEVAL_HELDOUT, LONGMEMEVAL_SAMPLE, longmemeval
from benchmarks.harness.lodo import gain_interval
from benchmarks.memory_lodo import AT_START, BUDGET, BUDGETS, METRICS, PAPER, RELEASE_020, baselines, real_memory, replays_of, score, setting

ARMS: dict[str, dict[str, Any]] = {
    "shipped": {},  # MemoryConfig()'s own defaults
    "shipped_without_role_cue": {"role_cue": False},
    "memory_paper": PAPER,
    "default_before_issue_48": AT_START,
    "default_0_2_0": RELEASE_020,
}


def _stemmed() -> bool:
    """LongMemEval's dev choice of BM25 stemming in the last LODO run (its fills use the same)."""
    lodo = json.loads((RESULTS / "memory_lodo.json").read_text())
    return bool(lodo["datasets"]["longmemeval"]["dev"]["bm25_stemmed"])


def run() -> dict[str, Any]:
    t0 = time.perf_counter()
    emb = embedder()
    seen = {line.split()[-1] for line in LONGMEMEVAL_SAMPLE.read_text().splitlines()}
    fresh = {line.split()[-1] for line in LONGMEMEVAL_HELDOUT.read_text().splitlines()}
    if seen & fresh:
        raise ValueError(f"the held-out sample shares {len(seen & fresh)} questions with the LODO sample")
    convs = [c for part in longmemeval(sample=LONGMEMEVAL_HELDOUT).values() for c in part]
    replays, qvecs = replays_of(convs)
    emb.save()
    print(f"memory_heldout: {len(convs)} questions ready at {time.perf_counter() - t0:.0f}s", flush=True)
    stem = _stemmed()
    out: dict[str, Any] = {"protocol": __doc__, "questions": len(convs), "bm25_stemmed": stem, "arms": ARMS, "budgets": {}}
    for b in BUDGETS:
        shipped: dict[str, list[float]] = {}
        fills: dict[str, dict[str, list[float]]] = {}
        arms = {name: score(replays, qvecs, setting(s, b), shipped if name == "shipped" else None) for name, s in ARMS.items()}
        base = baselines(replays, qvecs, b, stem, fills)
        gains = {}
        for m in METRICS:
            best = max(sorted(base), key=lambda k: float(base[k][m]))
            interval = gain_interval(shipped[m], {k: v[m] for k, v in fills.items()})
            gains[m] = {"gain": round(arms["shipped"][m] - base[best][m], 4), "ci95": [round(x, 4) for x in interval], "best_fill": best}
        out["budgets"][str(b)] = {"arms": arms, "baselines": base, "gains": gains}
        print(f"memory_heldout: {b} tokens at {time.perf_counter() - t0:.0f}s: {gains}", flush=True)
    out["real_memory_512"] = real_memory(convs, ARMS["shipped"], BUDGET)
    out["replay_512_evidence"] = out["budgets"][str(BUDGET)]["arms"]["shipped"]["evidence"]
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
