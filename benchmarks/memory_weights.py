"""Chat memory, issue 64's fifth run: how far a global BM25 weight can serve every set. Dev splits
only (seven sets, as ``benchmarks.memory_lodo``), the shipped setting at BM25 weight 0.5 (shipped),
0.35 and 0.2 (the vectors' weight the rest), nothing else changed. Written after the fifth run's
test figures had been read: PrefEval's requests share words with filler chats rather than with
the preference they must honour, so its dense fill beat the shipped default; the question here is
whether leaning on the vectors would cost the sets whose questions name things (LoCoMo). Nothing
is chosen from it: it reports the trade. Margins over each set's best fill, answerable metric.

    python -m benchmarks.run --full --only memory_weights [--data DIR]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks import memory_lodo as ml

BM25_WEIGHTS = (0.5, 0.35, 0.2)


def run(data: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    sets = ml.conversations(data)
    out: dict[str, Any] = {"protocol": __doc__, "bm25_weights": BM25_WEIGHTS, "datasets": {}}
    for n in ml.LODO_SETS:
        rps, qv, stem = ml.dev_replays(sets[n]["dev"])
        rows = {}
        for b in ml.BUDGETS:
            best = max(x[ml.METRIC] for x in ml.baselines(rps, qv, b, stem).values())
            arms = {w: ml.score(rps, qv, ml.setting({"weights": {"bm25": w, "dense": round(1 - w, 2)}}, b))[ml.METRIC] for w in BM25_WEIGHTS}
            rows[str(b)] = {"best_fill": best, "margins": {str(w): round(v - best, 4) for w, v in arms.items()}}
        out["datasets"][n] = rows
        print(f"memory_weights: {n} dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
