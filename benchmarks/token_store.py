"""The compressed token-vector store (issue 38): fit its codebook, and measure what compression
costs before adopting it.

Fit (``--fit``): product quantisation, 32 sub-vectors x 256 centroids (32 bytes per token vector),
k-means on 150,000 token vectors of 1,500 SQuAD *train* paragraphs (seed 0). SQuAD train belongs
to no split (benchmarks/DATA.md), so no reported item shaped the codebook.

Quality (the run section): on the five context dev splits, the default verifier's pooled AUC over
each question's dense top-10 with int8 token vectors (the in-memory cache) against the same
vectors product-quantised, and the shipped MeVe default's evidence recall and tokens both ways
(each with its own calibration: ``make train-verifier`` refits the compressed one on the same
SQuAD tune pairs, ``python -m benchmarks.train_verifier --compressed``).

    python -m benchmarks.token_store --fit          # writes shared/meve/weights/token_codebook.safetensors
    python -m benchmarks.run --full --only token_store
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.arms import evaluate, meve_system
from benchmarks.harness.common import MEVE_KNOBS, data_dir, default_verifier, prime, squad
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import CONTEXT_SETS, load
from benchmarks.verifier import auc
from meve import MeVeConfig, get_token_counter
from meve.scoring.calibration import COMPRESSED_CALIBRATION_PATH, Calibration
from meve.scoring.late_interaction import LateInteractionScorer, maxsim, text_key
from meve.scoring.token_store import CODEBOOK_PATH, ProductQuantizer

TRAIN_PARAGRAPHS, TRAIN_VECTORS, SEED = 1500, 150_000, 0


def fit(data: Path, out: Path = CODEBOOK_PATH) -> ProductQuantizer:
    li, disk = default_verifier()
    arts = squad(data / "train" / "squad" / "squad-v1.1-train.explorer.json.gz")
    paras = [p["context"] for a in arts for p in a["paragraphs"]]
    random.Random(SEED).shuffle(paras)
    paras = paras[:TRAIN_PARAGRAPHS]
    prime(li, paras, "squad-train")
    disk.save(li.cache)
    vectors = np.concatenate([li.cache.get(text_key(p)) for p in paras]).astype(np.float32)
    sample = vectors[np.random.default_rng(SEED).choice(len(vectors), min(len(vectors), TRAIN_VECTORS), replace=False)]
    t0 = time.perf_counter()
    pq = ProductQuantizer.fit(sample, m=32, k=256, iters=12, seed=SEED)
    meta = {"data": "SQuAD v1.1 train (no split)", "paragraphs": TRAIN_PARAGRAPHS, "vectors": len(sample), "seed": SEED}
    pq.save(out, metadata={k: str(v) for k, v in meta.items()})
    print(f"token_store: codebook {pq.centroids.shape} fitted on {len(sample)} vectors in {time.perf_counter() - t0:.0f}s -> {out}", flush=True)
    return pq


class _Compressed:
    """Swaps the verifier's int8 cache entries for their product-quantised decoding, and its
    calibration for the compressed one, as attaching a store does (and back)."""

    def __init__(self, li: LateInteractionScorer, pq: ProductQuantizer, texts: list[str]) -> None:
        self.li, self.pq = li, pq
        keys = {text_key(t) for t in texts}
        self.saved = [row for row in li.cache.quantized() if row[0] in keys]

    def __enter__(self) -> None:
        self.calibration, self.li.calibration = self.li.calibration, Calibration.load(COMPRESSED_CALIBRATION_PATH)
        for key, _, _ in self.saved:
            tokens = self.li.cache.get(key)
            assert tokens is not None
            self.li.cache.put(key, self.pq.decode(self.pq.encode(tokens)))

    def __exit__(self, *exc: object) -> None:
        self.li.calibration = self.calibration
        for key, q, s in self.saved:
            self.li.cache.put_quantized(key, q, s)


def _auc_rows(corpus: Corpus, li: LateInteractionScorer, pq: ProductQuantizer, questions: list[Any]) -> dict[str, float]:
    labels, exact, packed = [], [], []
    for q in questions:
        assert corpus.meve.store is not None
        passages = corpus.meve.store.query(corpus.emb.encode([q.text])[0], 10)
        qt = li._query_tokens(q.text)
        for p in passages:
            tokens = li.cache.get(text_key(p.text))
            assert tokens is not None
            exact.append(maxsim(qt, tokens))
            packed.append(maxsim(qt, pq.decode(pq.encode(tokens))))
            labels.append(int(p.id in q.gold))
    y = np.array(labels)
    return {"auc_int8": round(auc(y, np.array(exact)), 4), "auc_pq32": round(auc(y, np.array(packed)), 4), "pairs": len(labels)}


def run(data: Path, dev_limit: int = 200) -> dict[str, Any]:
    t0 = time.perf_counter()
    li, disk = default_verifier()
    pq = ProductQuantizer.load()
    default = {k: getattr(MeVeConfig(), k) for k in MEVE_KNOBS}
    out: dict[str, Any] = {"protocol": __doc__, "bytes_per_vector": {"int8": 384 + 2, "pq32": pq.m}, "datasets": {}}
    for name in CONTEXT_SETS:
        ds = load(name, data, None)
        part = ds.splits["dev"]
        questions = part.questions[:dev_limit]
        corpus = Corpus(f"{name}-dev", part.ids, part.texts, li)
        row: dict[str, Any] = dict(_auc_rows(corpus, li, pq, questions))
        row["default_int8"] = evaluate(meve_system(corpus, default), questions, get_token_counter())
        with _Compressed(li, pq, part.texts):
            row["default_pq32"] = evaluate(meve_system(corpus, default), questions, get_token_counter())
        corpus.close()
        disk.save(li.cache)
        out["datasets"][name] = row
        print(f"token_store: {name} {row['auc_int8']} -> {row['auc_pq32']} at {time.perf_counter() - t0:.0f}s", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="fit and write the shipped codebook")
    parser.add_argument("--data", help="folder holding train/ (default ../shared/data)")
    args = parser.parse_args()
    if args.fit:
        fit(data_dir(args.data))
    else:
        parser.print_help()
