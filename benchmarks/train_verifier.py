"""Fit the default verifier's calibration: ``make train-verifier`` (not run by CI).

The verifier itself has no trained weights (MaxSim over the bundled MiniLM's
token embeddings); what is fitted is its Platt scaling, on the *tune* half of the
SQuAD v1.1 dev articles (``benchmarks.harness.common.squad_dev_split``). BENCHMARKS.md
reports only on the other half. Seeded; the data file's sha256 is logged and
written into the safetensors metadata.

    python -m benchmarks.train_verifier [--data DIR] [--questions 400] [--seed 0] [--out PATH] [--compressed]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.common import data_dir, sha256_file, squad, squad_dev_split, squad_pairs
from meve.scoring.calibration import CALIBRATION_PATH, COMPRESSED_CALIBRATION_PATH, Calibration, fit_platt
from meve.scoring.late_interaction import LateInteractionScorer
from meve.scoring.token_store import TokenStore


def raw_scores(pairs: list[tuple[str, str, int]], scorer: LateInteractionScorer) -> np.ndarray:
    by_query: dict[str, list[int]] = {}
    for i, (q, _, _) in enumerate(pairs):
        by_query.setdefault(q, []).append(i)
    scorer.embed_and_cache(list(dict.fromkeys(p for _, p, _ in pairs)))
    out = np.zeros(len(pairs))
    for q, rows in by_query.items():
        out[rows] = scorer.raw_scores(q, [pairs[i][1] for i in rows])
    return out


def train(squad_dev: Path, *, questions: int, seed: int, out: Path, compressed: bool = False) -> dict[str, object]:
    t0 = time.perf_counter()
    articles = squad(squad_dev)
    split = squad_dev_split([a["title"] for a in articles])
    tune = [a for a in articles if split[a["title"]] == "tune"]
    pairs = squad_pairs(tune, questions, seed)
    scorer = LateInteractionScorer(calibration=Calibration(1.0, 0.0))
    with tempfile.TemporaryDirectory() as tmp:
        if compressed:  # score what a persistent corpus reads: vectors back from the 32-byte store
            scorer.attach(TokenStore(Path(tmp) / "tokens"))
        raw = raw_scores(pairs, scorer)
    labels = np.array([y for _, _, y in pairs])
    cal = fit_platt(raw, labels)
    log: dict[str, object] = {
        "data": str(squad_dev.name),
        "data_sha256": sha256_file(squad_dev),
        "split": "tune half of SQuAD v1.1 dev articles (sha256-of-title order)",
        "token_vectors": "product-quantised, 32 bytes (meve.scoring.token_store)" if compressed else "int8",
        "tune_articles": len(tune),
        "questions": questions,
        "pairs": len(pairs),
        "positives": int(labels.sum()),
        "seed": seed,
        "platt_a": cal.a,
        "platt_b": cal.b,
        "tune_accuracy_at_0.5": float(((cal(raw) >= 0.5) == (labels == 1)).mean()),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    cal.save(out, metadata={k: str(v) for k, v in log.items()})
    return log


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="folder holding train/squad/ (default ../shared/data)")
    ap.add_argument("--squad-dev", help="a SQuAD v1.1 dev file (overrides --data)")
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help=f"default {CALIBRATION_PATH.name}, or {COMPRESSED_CALIBRATION_PATH.name} with --compressed")
    ap.add_argument("--compressed", action="store_true", help="fit on token vectors read back from the compressed store")
    args = ap.parse_args(argv)
    path = Path(args.squad_dev) if args.squad_dev else data_dir(args.data) / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz"
    out = Path(args.out) if args.out else (COMPRESSED_CALIBRATION_PATH if args.compressed else CALIBRATION_PATH)
    log = train(path, questions=args.questions, seed=args.seed, out=out, compressed=args.compressed)
    print(json.dumps(log, indent=2))


if __name__ == "__main__":
    main()
