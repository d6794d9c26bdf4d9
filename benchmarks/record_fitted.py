"""Record what every tuned value shipped with meve was fitted on, as registry ids
(``benchmarks/fitted/*.json``), and refit the cosine scorer's calibration on dev data.

The MeVeConfig and MemoryConfig defaults are recorded by the runs that choose them
(``benchmarks.context``, ``benchmarks.memory_lodo``). This script recomputes, deterministically
from the data, the samples the older tuning scripts drew (same functions, same seeds) and writes
their ids; it also fits the cosine scorer's center and scale on HotpotQA dev questions (the
registry's), replacing a calibration that had seen test questions.

    python -m benchmarks.record_fitted [--data DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import data_dir, embedder, squad, squad_dev_split, squad_pairs
from benchmarks.harness.splits import item_id, parity, write_fitted
from meve.scoring.calibration import fit_platt

SQUAD_DEV = ("train", "squad", "squad-v1.1-dev.explorer.json.gz")


def _squad_ids(articles: list[dict[str, Any]], questions: set[str]) -> list[str]:
    """Registry ids of the SQuAD questions whose text is in ``questions``."""
    return [item_id("squad", a["title"], qa["id"]) for a in articles for p in a["paragraphs"] for qa in p["qas"] if qa["question"] in questions]


def calibrations(data: Path) -> None:
    """Late interaction's and the cross-encoders' Platt scalings: squad_pairs(tune, 400, seed 0)."""
    articles = squad(data.joinpath(*SQUAD_DEV))
    split = squad_dev_split([a["title"] for a in articles])
    tune = [a for a in articles if split[a["title"]] == "tune"]
    ids = _squad_ids(tune, {q for q, _, _ in squad_pairs(tune, 400, 0)})
    for name, knob in (
        ("late_interaction_calibration", "late interaction's Platt scaling (shared/meve/weights/late_interaction.safetensors)"),
        (
            "late_interaction_pq32_calibration",
            "late interaction's Platt scaling over compressed token vectors (late_interaction_pq32.safetensors; codebook fitted on SQuAD train, in no split)",
        ),
        (
            "cross_encoder_calibration",
            "meve's cross-encoders' Platt scalings (cross_encoder*.safetensors; their weights were trained on SQuAD train, in no split)",
        ),
    ):
        write_fitted(name, knob, ids, "make train-verifier")


def doc_weights(data: Path) -> None:
    """The document-signal weights: HotpotQA's even-sha256 half of the 500 and 200 SQuAD dev-half questions."""
    from benchmarks.hierarchical import squad_articles

    hot = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    ids = [item_id("hotpotqa", q["_id"], q["_id"]) for q in hot if parity(q["_id"]) == "dev"]
    _, split, _ = squad_articles(data)
    articles = squad(data.joinpath(*SQUAD_DEV))
    ids += _squad_ids([a for a in articles if squad_dev_split([x["title"] for x in articles])[a["title"]] == "tune"], {q["question"] for q in split["dev"]})
    write_fitted("doc_weights", "meve.mindref.documents.DEFAULT_DOC_WEIGHTS", ids, "python -m benchmarks.run --full --only hierarchical")


def unanswerable(data: Path) -> None:
    """The fallback's rule (fallback_tau, fallback_min_bm25): chosen on the tune half's articles."""
    articles = squad(data.joinpath(*SQUAD_DEV))
    split = squad_dev_split([a["title"] for a in articles])
    ids = [item_id("squad", a["title"], qa["id"]) for a in articles if split[a["title"]] == "tune" for p in a["paragraphs"] for qa in p["qas"]]
    write_fitted(
        "fallback_rule",
        "MeVeConfig.fallback_tau and fallback_min_bm25 (benchmarks/unanswerable.py, questions drawn from these articles)",
        ids,
        "python -m benchmarks.unanswerable",
    )


def cosine(data: Path) -> dict[str, float]:
    """Fit the cosine scorer's logistic on HotpotQA dev questions (registry): question against every
    paragraph it comes with ("title: text"), supporting ones relevant. Returns center and scale."""
    raw = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    raw += json.loads((data / "hotpotqa" / "hotpot_dev_distractor_v1_first103.json").read_text())
    seen: dict[str, dict[str, Any]] = {}
    for q in raw:
        if parity(q["_id"]) == "dev":
            seen.setdefault(q["_id"], q)
    emb = embedder()
    cos, labels = [], []
    for q in seen.values():
        gold = {t for t, _ in q["supporting_facts"]}
        texts = [f"{t}: {' '.join(s)}" for t, s in q["context"]]
        vecs = emb.encode([q["question"], *texts])
        cos += list(vecs[1:] @ vecs[0])
        labels += [int(t in gold) for t, _ in q["context"]]
    emb.save()
    cal = fit_platt(np.array(cos), np.array(labels))
    value = {"center": round(-cal.b / cal.a, 3), "scale": round(1.0 / cal.a, 3)}
    write_fitted(
        "cosine_scorer",
        "meve.scoring.cosine.CosineScorer center and scale",
        [item_id("hotpotqa", i, i) for i in seen],
        "python -m benchmarks.record_fitted",
        value,
    )
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None)
    data = data_dir(ap.parse_args().data)
    calibrations(data)
    doc_weights(data)
    unanswerable(data)
    print("cosine scorer:", cosine(data))


if __name__ == "__main__":
    main()
