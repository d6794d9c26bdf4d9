"""Scale (issue 38): 10k -> 100k -> 1M passages persisted on this machine, each size built in a
fresh process and then opened by another fresh process, as a new replica would.

How the corpus is made (encoding a million passages with MiniLM would take this CPU days):
* Texts are real: the 4.9k HotpotQA paragraphs of benchmarks/speed.py, then passages of three
  of their sentences drawn at random (seeded).
* The paragraphs are encoded for real (dense vector and token vectors, one forward pass). A drawn
  passage's dense vector is the normalised sum of its three sentences' paragraphs' vectors; its
  token vectors are the slices of those paragraphs' product-quantised token codes that its
  sentences cover (by character position). So vectors have the real shape, size and neighbourhood
  structure, and verification reads real codes; only their exact values are synthetic.
* Storage is meve's own: Chroma (persistent) for passages and dense vectors, the incremental BM25
  index with its snapshot, and the compressed token store; model time is not part of ingestion's
  rate (reported apart, measured on the real paragraphs).

The replica process is timed from its start to its first answer (imports, model load, opening
Chroma, loading the BM25 snapshot and the token index), then answers real HotpotQA questions
with the shipped default (late-interaction verifier over the stored codes): p50/p95 and each
phase's share, and its resident memory.

    python -m benchmarks.run --full --only scale      # 10k, 100k, 1M (about an hour, 80 GB free disk advised)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import MEVE_KNOBS, ROOT, acting, pct

SIZES = (10_000, 100_000, 1_000_000)
BATCH = 5000
COLLECTION = "scale"


def _sources(data: Path) -> tuple[list[str], list[tuple[int, int, int]]]:
    """The real paragraphs, and every sentence as (paragraph, start char, end char)."""
    from benchmarks.speed import corpus
    from meve.core.text import sentence_spans

    paras = corpus(data, 4000)
    sents = [(i, a, b) for i, p in enumerate(paras) for a, b in sentence_spans(p)]
    return paras, sents


def _codes(li: Any, pq: Any, paras: list[str]) -> list[np.ndarray]:
    from benchmarks.harness.common import prime
    from meve.scoring.late_interaction import text_key

    prime(li, paras, "scale-paragraphs")
    return [pq.encode(li.cache.get(text_key(p))) for p in paras]


def build(data: Path, size: int, folder: Path) -> dict[str, Any]:
    """Ingest ``size`` passages into ``folder`` (this process); returns the ingestion facts."""
    import psutil

    from benchmarks.harness.common import default_verifier, embedder
    from meve.retrieval.chroma import chroma_client
    from meve.retrieval.lexical import LexicalIndex
    from meve.retrieval.store import ChromaStore
    from meve.scoring.late_interaction import text_key
    from meve.scoring.token_store import ProductQuantizer, TokenStore

    paras, sents = _sources(data)
    li, disk = default_verifier()
    pq = ProductQuantizer.load()
    vecs = embedder().encode(paras)
    codes = _codes(li, pq, paras)
    disk.save(li.cache)  # the next size's build reads the paragraphs' vectors instead of encoding them
    client = chroma_client(str(folder))
    col = client.get_or_create_collection(COLLECTION, metadata={"hnsw:space": "cosine", "meve:embedder": embedder().name}, embedding_function=None)
    store, lexical = ChromaStore(col, dimension=vecs.shape[1]), LexicalIndex([], [])
    tokens = TokenStore(folder / "meve" / COLLECTION / "tokens", pq)
    rng = np.random.default_rng(0)
    timing = {"chroma": 0.0, "bm25": 0.0, "tokens": 0.0, "make": 0.0}
    peak, n_tokens, t_all = 0, 0, time.perf_counter()
    for start in range(0, size, BATCH):
        t = time.perf_counter()
        n = min(BATCH, size - start)
        texts, vs, cs = _passages(start, n, paras, sents, vecs, codes, rng)
        ids = [f"p{start + i}" for i in range(n)]
        timing["make"] += time.perf_counter() - t
        keys = [text_key(x) for x in texts]
        for name, fn, args in (
            ("chroma", store.add, (ids, texts, [None] * n, vs)),
            ("bm25", lexical.add, (ids, texts)),
            ("tokens", tokens.put_codes, (list(zip(keys, cs, strict=True)),)),
        ):
            t = time.perf_counter()
            fn(*args)
            timing[name] += time.perf_counter() - t
        n_tokens += sum(len(c) for c in cs)
        peak = max(peak, psutil.Process().memory_info().rss)
        if (start // BATCH) % 20 == 0:
            print(f"scale {size}: {start + n} passages, {time.perf_counter() - t_all:.0f}s, rss {peak / 1e9:.1f} GB", flush=True)
    t = time.perf_counter()
    lexical.save(folder / "meve" / COLLECTION / "bm25")
    timing["bm25_snapshot"] = time.perf_counter() - t
    store_s = timing["chroma"] + timing["bm25"] + timing["tokens"] + timing["bm25_snapshot"]
    return {
        "passages": size,
        "mean_token_vectors": round(n_tokens / size, 1),
        "ingest_s": {k: round(v, 1) for k, v in timing.items()},
        "ingest_passages_per_s_excluding_model": round(size / store_s, 1),
        "ingest_peak_rss_gb": round(peak / 1e9, 2),
        "disk_gb": {p.name: round(_du(p) / 1e9, 3) for p in (folder / "meve" / COLLECTION / "tokens", folder / "meve" / COLLECTION / "bm25")}
        | {"chroma": round((_du(folder) - _du(folder / "meve")) / 1e9, 3)},
    }


Made = tuple[list[str], np.ndarray, list[np.ndarray]]


def _passages(start: int, n: int, paras: list[str], sents: list[tuple[int, int, int]], vecs: np.ndarray, codes: list[np.ndarray], rng: Any) -> Made:
    from benchmarks.speed import drawn_vectors

    texts, vs, cs = [], np.empty((n, vecs.shape[1]), np.float32), []
    for i in range(n):
        j = start + i
        if j < len(paras):
            texts.append(paras[j])
            vs[i], c = vecs[j], codes[j]
        else:
            picks = [sents[s] for s in rng.integers(len(sents), size=3)]
            texts.append(" ".join(paras[p][a:b] for p, a, b in picks))
            vs[i], c = drawn_vectors(picks, paras, vecs, codes)
        cs.append(c)
    return texts, vs, cs


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def replica(data: Path, folder: Path, started: float, n_queries: int = 100) -> dict[str, Any]:
    """Open the persisted corpus as a new replica would, answer, and time it (this process)."""
    import psutil

    from benchmarks.speed import queries
    from meve import MeVe
    from meve.retrieval.chroma import chroma_client

    t_imports = time.time() - started  # interpreter start and imports (torch, chromadb, meve)
    meve = MeVe.from_chroma(chroma_client(str(folder)).get_collection(COLLECTION))
    t_open = time.time() - started
    meve.warm_up()
    t_models = time.time() - started
    qs = queries(data, n_queries + 1)
    first = meve.run(qs[0])
    t_first = time.time() - started
    times: list[float] = []
    phases: dict[str, list[float]] = {}
    for q in qs[1:]:
        t = time.perf_counter()
        r = meve.run(q)
        times.append((time.perf_counter() - t) * 1000)
        for rec in r.trace:
            phases.setdefault(rec.phase, []).append(rec.ms)
    total = sum(sum(v) for v in phases.values())
    return {
        "replica_first_answer_s": round(t_first, 2),
        "replica_imports_s": round(t_imports, 2),
        "replica_open_s": round(t_open - t_imports, 2),
        "replica_model_load_s": round(t_models - t_open, 2),
        "first_answer_kept": len(first.documents),
        "query_ms_p50": round(pct(times, 50), 1),
        "query_ms_p95": round(pct(times, 95), 1),
        "phase_share": {k: round(sum(v) / total, 3) for k, v in phases.items()},
        "phase_ms_p50": {k: round(pct(v, 50), 2) for k, v in phases.items()},
        "replica_rss_gb": round(psutil.Process().memory_info().rss / 1e9, 2),
        "encoded_at_query_time": getattr(meve.scorer, "encoded_at_query_time", None),
    }


def growth(data: Path, size: int, folder: Path, *, lexical: bool = True) -> dict[str, Any]:
    """Resident memory of ``MeVe.from_texts`` over ``size`` real paragraphs into a persistent
    collection (the real model encodes them), above the same process with the models loaded.
    ``lexical=False`` leaves BM25 indexing out (a diagnosis of what the growth is made of; such a
    MeVe has no lexical side and is not used)."""
    import gc

    import psutil

    from benchmarks.speed import corpus
    from meve import MeVe
    from meve.retrieval.chroma import chroma_client
    from meve.retrieval.lexical import LexicalIndex

    if not lexical:
        LexicalIndex.add = lambda self, ids, texts: None  # type: ignore[method-assign,assignment,misc]

    texts = corpus(data, size)
    MeVe.from_texts(["warm up"], client=chroma_client(str(folder / "warm")), collection_name="warm").warm_up()
    gc.collect()
    before = psutil.Process().memory_info()
    t = time.perf_counter()
    meve = MeVe.from_texts(texts, client=chroma_client(str(folder)), collection_name=COLLECTION, batch_size=256)
    seconds = time.perf_counter() - t
    gc.collect()
    after = psutil.Process().memory_info()
    return {
        "passages": len(meve.lexical) if lexical else size,
        "bm25_indexing": lexical,
        "rss_growth_mb": round((after.rss - before.rss) / 1e6, 1),
        # Of which file-backed (Linux: pages of mapped files, e.g. the token store's codes, that the
        # kernel can drop and read again): the rest is the process's own (anonymous) memory.
        "file_backed_growth_mb": round((after.shared - before.shared) / 1e6, 1),
        "from_texts_s": round(seconds, 1),
    }


def _growth_pair(what: str, data: Path, sizes: tuple[int, int], root: Path) -> list[dict[str, Any]]:
    """One fresh process per size, each into a folder removed after."""
    out = []
    for size in sizes:
        folder = root / f"{what}-{size}"
        shutil.rmtree(folder, ignore_errors=True)
        out.append(_child(what, data, size, folder))
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _per_1k(pair: list[dict[str, Any]], key: str) -> float:
    return float(pair[1].get(key, 0) - pair[0].get(key, 0)) / ((pair[1]["passages"] - pair[0]["passages"]) / 1000)


def run(data: Path, sizes: tuple[int, ...] = SIZES, root: Path | None = None, growth_sizes: tuple[int, int] = (1000, 3000)) -> dict[str, Any]:
    """Each size: build in one fresh process, open in another; the folder is removed after."""
    root = root or ROOT / "benchmarks" / ".cache" / "scale"
    grown = _growth_pair("growth", data, growth_sizes, root)
    per_1k, file_1k = _per_1k(grown, "rss_growth_mb"), _per_1k(grown, "file_backed_growth_mb")
    print(f"scale: from_texts growth {grown}, {per_1k:.1f} MB per 1k passages", flush=True)
    # The same two sizes with BM25 indexing left out: how much of the growth the lexical side makes.
    bare = _growth_pair("growth-no-bm25", data, growth_sizes, root)
    bare_1k = _per_1k(bare, "rss_growth_mb")
    rows = []
    for size in sizes:
        folder = root / str(size)
        shutil.rmtree(folder, ignore_errors=True)
        row = {**_child("build", data, size, folder), **_child("replica", data, size, folder)}
        rows.append(row)
        print(f"scale: {row}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)
    from meve import MeVeConfig

    return {
        "protocol": __doc__,
        # Which defaults the rows ran under (runs before 2026-11-25's context run recorded none).
        "meve_config": acting({k: getattr(MeVeConfig(), k) for k in MEVE_KNOBS}),
        "rows": rows,
        "from_texts_growth": grown + bare,
        "from_texts_mb_per_1k_passages_without_bm25": round(bare_1k, 1),
        "from_texts_mb_per_1k_passages": round(per_1k, 1),
        "from_texts_file_backed_mb_per_1k_passages": round(file_1k, 1),
    }


def _child(what: str, data: Path, size: int, folder: Path) -> dict[str, Any]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    out = folder.parent / f"{size}-{what}.json"
    cmd = [sys.executable, "-m", "benchmarks.scale", what, str(data), str(size), str(folder), str(out), str(time.time())]
    subprocess.run(cmd, cwd=ROOT, check=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    row: dict[str, Any] = json.loads(out.read_text())
    return row


if __name__ == "__main__":
    what, data_arg, size_arg, folder_arg, out_arg, started_arg = sys.argv[1:7]
    started = float(started_arg)
    if what == "build":
        result = build(Path(data_arg), int(size_arg), Path(folder_arg))
    elif what in ("growth", "growth-no-bm25"):
        result = growth(Path(data_arg), int(size_arg), Path(folder_arg), lexical=what == "growth")
    else:
        result = replica(Path(data_arg), Path(folder_arg), started)
    Path(out_arg).write_text(json.dumps(result, indent=1))
