"""Where meve's query-time path spends its time on one device (issue 49): cProfile over
``run_on_texts`` (20 new SQuAD paragraphs per question, a fresh scorer each time so every paragraph
goes through the model), and the p50 of the model pass alone (dense and token vectors).

Run beside ``benchmarks/device_speed.py`` on the same machine, with the same ``--stand-in`` folder
where the bi-encoder package is missing (timings hold, scores do not):

    N=31 ROWS=30 python -m benchmarks.device_profile [--squad FILE] [--stand-in DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from pathlib import Path

from benchmarks.device_speed import SQUAD, groups, stand_in


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--squad", type=Path, default=SQUAD)
    ap.add_argument("--stand-in", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.stand_in is not None:
        stand_in(args.stand_in)
    import torch

    from meve import MeVeConfig
    from meve.integration import Models, run_on_texts
    from meve.scoring.embedders import SentenceTransformerEmbedder
    from meve.scoring.late_interaction import LateInteractionScorer

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    qs, _ = groups(args.squad, int(os.environ.get("N", "31")))
    emb = SentenceTransformerEmbedder(device="auto")
    cfg = MeVeConfig()
    run_on_texts(qs[0][0], qs[0][1], cfg, Models(emb, LateInteractionScorer(emb)))
    li = LateInteractionScorer(emb, cache_bytes=0)
    passes = []
    for _, ps in qs[1:]:
        sync()
        t = time.perf_counter()
        li._forward(ps)
        sync()
        passes.append(time.perf_counter() - t)
    print("model pass (dense + token vectors of 20) p50 ms", round(1000 * statistics.median(passes), 2))
    prof = cProfile.Profile()
    prof.enable()
    for q, ps in qs[1:]:
        run_on_texts(q, ps, cfg, Models(emb, LateInteractionScorer(emb)))
    prof.disable()
    rows = int(os.environ.get("ROWS", "30"))
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(order).print_stats(rows)
        print(out.getvalue())


if __name__ == "__main__":
    main()
