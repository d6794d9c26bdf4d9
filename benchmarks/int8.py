"""int8 MiniLM on the CPU (issue 49): what it costs in quality, what it gains in speed, one run.

Quality, on the context sets' dev splits (the protocol of ``benchmarks/token_store.py``): the
default verifier's pooled AUC over each dev question's dense top-10 (the float32 corpus's, so both
precisions score the same pairs), float32 against int8; and the shipped MeVe default's evidence
recall and tokens, each precision end to end (int8: int8 dense vectors, int8 query, int8 token
vectors, the shipped calibration). Limits (issue 49): AUC lost <= 0.005, evidence changed <= 0.01.
The dense vectors' cosine to float32's is reported beside.

Speed, in the same run, on the same CPU:
* ``encode``: the pass ``from_texts`` makes per batch (``LateInteractionScorer.embed_and_cache``:
  dense and token vectors) over SQuAD and HotpotQA paragraphs, float32 and int8 alternating in
  chunks, passages/s, and the model's work as a fraction of this CPU's limit
  (:mod:`benchmarks.harness.limits`, measured in this run).
* ``ingestion``: ``MeVe.from_texts`` at 10k passages (SQuAD and HotpotQA paragraphs, shuffled),
  float32 and int8 each into its own in-memory collection, built in alternating chunks of 1,000
  (``from_texts``, then ``add_texts``: the same ingestion), passages/s with Chroma and BM25; and
  ``meve index`` on the same passages as JSONL (its own chunking), chunks/s.

    python -m benchmarks.run --full --only int8
"""

from __future__ import annotations

import gzip
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.arms import evaluate, meve_system
from benchmarks.harness.common import MEVE_KNOBS, DiskCachedEmbedder, TokenDiskCache, default_verifier, embedder
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import CONTEXT_SETS, load
from benchmarks.harness.limits import achieved, matmul_limit, model_flops, token_lengths
from benchmarks.verifier import auc
from meve import LateInteractionScorer, MeVe, MeVeConfig, SentenceTransformerEmbedder, get_token_counter

PRECISIONS = ("float32", "int8")
TAG = "all-MiniLM-L6-v2-int8"  # the int8 model's disk caches (dense and token vectors)


def int8_verifier() -> tuple[LateInteractionScorer, TokenDiskCache, DiskCachedEmbedder]:
    """The default verifier over int8 MiniLM, with its token vectors and dense vectors cached on disk."""
    model = SentenceTransformerEmbedder(precision="int8")
    li = LateInteractionScorer(model, cache_bytes=8 * 2**30)
    disk = TokenDiskCache(TAG)
    disk.load_into(li.cache)
    return li, disk, DiskCachedEmbedder(model, TAG)


def _auc_rows(corpus: Corpus, lis: dict[str, LateInteractionScorer], questions: list[Any]) -> dict[str, Any]:
    labels: list[int] = []
    raw: dict[str, list[float]] = {p: [] for p in lis}
    for q in questions:
        ids = corpus.dense(q.text, 10)
        labels += [int(i in q.gold) for i in ids]
        for precision, li in lis.items():
            raw[precision] += li.raw_scores(q.text, [corpus.text[i] for i in ids]).tolist()
    y = np.array(labels)
    out: dict[str, Any] = {f"auc_{p}": round(auc(y, np.array(v)), 4) for p, v in raw.items()}
    out["auc_lost"] = round(out["auc_float32"] - out["auc_int8"], 4)
    out["pairs"] = len(labels)
    return out


def quality(data: Path, dev_limit: int = 200) -> dict[str, Any]:
    """AUC and the default's evidence, float32 against int8, per context set's dev split."""
    li32, disk32 = default_verifier()
    li8, disk8, emb8 = int8_verifier()
    emb32 = embedder()
    default = {k: getattr(MeVeConfig(), k) for k in MEVE_KNOBS}
    out: dict[str, Any] = {}
    for name in CONTEXT_SETS:
        part = load(name, data, None).splits["dev"]
        questions = part.questions[:dev_limit]
        c32 = Corpus(f"{name}-dev", part.ids, part.texts, li32)
        c8 = Corpus(f"{name}-dev-int8", part.ids, part.texts, li8, emb8)
        row: dict[str, Any] = _auc_rows(c32, {"float32": li32, "int8": li8}, questions)
        cos = np.sum(emb32.encode(part.texts) * emb8.encode(part.texts), axis=1)
        row["dense_cos_mean"], row["dense_cos_min"] = round(float(cos.mean()), 4), round(float(cos.min()), 4)
        row["default_float32"] = evaluate(meve_system(c32, default), questions, get_token_counter())
        row["default_int8"] = evaluate(meve_system(c8, default), questions, get_token_counter())
        row["evidence_change"] = round(row["default_int8"]["evidence"] - row["default_float32"]["evidence"], 4)
        for corpus in (c32, c8):
            corpus.close()
        disk32.save(li32.cache)
        disk8.save(li8.cache)
        emb32.save()
        emb8.save()
        out[name] = row
        print(f"int8: {name} AUC {row['auc_float32']} -> {row['auc_int8']}, evidence {row['evidence_change']:+.4f}", flush=True)
    return out


def paragraphs(data: Path, n: int, seed: int = 0) -> list[str]:
    """n distinct paragraphs: HotpotQA's (the 500 questions' candidates), then SQuAD dev's and
    train's, shuffled with ``seed`` so every chunk mixes the two."""
    hotpot = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    texts = [f"{t}: {' '.join(s)}" for q in hotpot for t, s in q["context"]]
    for split in ("dev", "train"):
        with gzip.open(data / "train" / "squad" / f"squad-v1.1-{split}.explorer.json.gz", "rt", encoding="utf-8") as fh:
            texts += [p["context"] for a in json.load(fh)["data"] for p in a["paragraphs"]]
        if len(dict.fromkeys(texts)) >= n:
            break
    out = list(dict.fromkeys(texts))[:n]
    random.Random(seed).shuffle(out)
    return out


def encode_speed(texts: list[str], limit: dict[str, Any], chunk: int = 256) -> dict[str, Any]:
    """passages/s of the ingestion pass (dense and token vectors) per precision, alternating chunks."""
    scorers = {p: LateInteractionScorer(SentenceTransformerEmbedder(precision=p), cache_bytes=0) for p in PRECISIONS}
    for li in scorers.values():
        li.embed_and_cache(texts[:64])  # loads the model, warms its kernels
    spent = dict.fromkeys(PRECISIONS, 0.0)
    for i, start in enumerate(range(0, len(texts), chunk)):
        order = PRECISIONS if i % 2 == 0 else PRECISIONS[::-1]
        for p in order:
            t0 = time.perf_counter()
            scorers[p].embed_and_cache(texts[start : start + chunk])
            spent[p] += time.perf_counter() - t0
    flops = model_flops(token_lengths(texts))
    out: dict[str, Any] = {"passages": len(texts)}
    for p in PRECISIONS:
        out[p] = {"passages_per_s": round(len(texts) / spent[p], 1), "model": achieved(flops, spent[p], limit, p)}
    out["int8_over_float32"] = round(out["int8"]["passages_per_s"] / out["float32"]["passages_per_s"], 3)
    return out


def ingestion(texts: list[str], limit: dict[str, Any], chunk: int = 1000, cli: bool = True) -> dict[str, Any]:
    """``MeVe.from_texts`` passages/s per precision (alternating chunks), and ``meve index`` chunks/s."""
    built: dict[str, MeVe] = {}
    spent = dict.fromkeys(PRECISIONS, 0.0)
    for p in PRECISIONS:
        SentenceTransformerEmbedder(precision=p).encode(["warm up"])  # model load is not ingestion
    for i, start in enumerate(range(0, len(texts), chunk)):
        part = texts[start : start + chunk]
        for p in PRECISIONS if i % 2 == 0 else PRECISIONS[::-1]:
            t0 = time.perf_counter()
            if p not in built:
                built[p] = MeVe.from_texts(part, embedder=SentenceTransformerEmbedder(precision=p))
            else:
                built[p].add_texts(part)
            spent[p] += time.perf_counter() - t0
        print(f"int8: ingested {start + len(part)}/{len(texts)} per precision", flush=True)
    for meve in built.values():
        meve.close()
    flops = model_flops(token_lengths(texts))
    out: dict[str, Any] = {"passages": len(texts), "chunk": chunk}
    for p in PRECISIONS:
        out[f"from_texts_{p}"] = {"passages_per_s": round(len(texts) / spent[p], 1), "model": achieved(flops, spent[p], limit, p)}
    out["from_texts_int8_over_float32"] = round(out["from_texts_int8"]["passages_per_s"] / out["from_texts_float32"]["passages_per_s"], 3)
    if cli:
        out.update(index_rate(texts))
    return out


def index_rate(texts: list[str]) -> dict[str, Any]:
    """``meve index`` of ``texts`` as one JSONL file, per precision, each into a fresh directory: chunks/s."""
    from meve.cli import main

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "passages.jsonl"
        source.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
        for p in PRECISIONS:
            db = Path(tmp) / f"db-{p}"
            t0 = time.perf_counter()
            if main(["index", str(source), "--db", str(db), "--precision", p]) != 0:
                raise RuntimeError(f"meve index --precision {p} failed")
            took = time.perf_counter() - t0
            from meve.retrieval.chroma import chroma_client

            chunks = chroma_client(str(db)).get_collection("meve").count()
            out[f"meve_index_{p}"] = {"chunks": chunks, "chunks_per_s": round(chunks / took, 1), "seconds": round(took, 1)}
    out["meve_index_int8_over_float32"] = round(out["meve_index_int8"]["chunks_per_s"] / out["meve_index_float32"]["chunks_per_s"], 3)
    return out


def run(data: Path, dev_limit: int = 200, encode_passages: int = 2000, ingest_passages: int = 10_000, cli: bool = True) -> dict[str, Any]:
    """The CPU limit, quality on the dev splits, encode speed and ingestion, in one process."""
    t0 = time.perf_counter()
    limit = matmul_limit()
    out: dict[str, Any] = {"protocol": __doc__, "limit": limit, "limits_issue_49": {"auc_lost": 0.005, "evidence_change": 0.01, "ingestion_speedup": 2.0}}
    out["quality"] = quality(data, dev_limit)
    texts = paragraphs(data, max(encode_passages, ingest_passages))
    out["encode"] = encode_speed(texts[:encode_passages], limit)
    print(f"int8: encode {out['encode']}", flush=True)
    out["ingestion"] = ingestion(texts[:ingest_passages], limit, cli=cli)
    print(f"int8: ingestion {out['ingestion']}", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
