"""Momentary Contexts speed: add / reconstruct latency vs. turns in one session (with and without
model time) and the Chroma collection-layout choice (shared collection + where filter vs. one per session)."""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from meve.memory.decide import decide_parts


class HashEmbedder:
    """Model-free embedder (bag of hashed words, 384-d) so that timings exclude model inference."""

    name = "hash-384"
    dimension = 384

    def encode(self, texts):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, hash(w) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


WORDS = [
    "bike",
    "marathon",
    "sister",
    "porto",
    "peanut",
    "allergy",
    "garden",
    "hospital",
    "train",
    "weather",
    "recipe",
    "dog",
    "beagle",
    "lyon",
    "coffee",
    "book",
    "film",
    "music",
    "holiday",
    "work",
]


def _turn(rng, i):
    return f"turn {i}: " + " ".join(rng.choice(WORDS, size=12))


def _long_query(rng):
    return ". ".join(" ".join(rng.choice(WORDS, size=6)) for _ in range(4)) + "."


def _pct(xs, q):
    return float(np.percentile(xs, q))


def memory_scaling(sizes, reps=30):
    from meve import MemoryConfig, MomentaryMemory
    from meve.retrieval.chroma import chroma_client
    from meve.scoring.embedders import default_embedder

    rng = np.random.default_rng(0)
    model = default_embedder().inner  # uncached: the real per-call model time
    model.encode(["warm up"])
    t0 = time.perf_counter()
    for i in range(reps):
        model.encode([_turn(rng, i)])
    model_ms = (time.perf_counter() - t0) * 1000 / reps
    # A chat message of four sentences: matched whole and sentence by sentence (query_sentences),
    # so its encode is one batch of five texts.
    t0 = time.perf_counter()
    for _ in range(reps):
        q = _long_query(rng)
        model.encode([q, *decide_parts(True, q)[0]])  # the sentences the memory embeds with the query
    long_model_ms = (time.perf_counter() - t0) * 1000 / reps
    rows = []
    for n in sizes:
        client = chroma_client()
        prefix = f"b{time.time_ns()}"
        mem = MomentaryMemory("bench", client=client, embedders=[HashEmbedder()], config=MemoryConfig(l_max=1024), collection_prefix=prefix)
        t0 = time.perf_counter()
        for start in range(0, n, 5000):
            mem.add_many([_turn(rng, i) for i in range(start, min(n, start + 5000))])
        fill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reopened = MomentaryMemory("bench", client=client, embedders=[HashEmbedder()], config=MemoryConfig(l_max=1024), collection_prefix=prefix)
        reopen_s = time.perf_counter() - t0
        assert len(reopened) == n
        catch_ms = []
        for _ in range(reps):  # what every read pays to learn about other writers when there is nothing new
            t0 = time.perf_counter()
            reopened._catch_up()
            catch_ms.append((time.perf_counter() - t0) * 1000)
        count_ms = []
        for _ in range(reps):
            t0 = time.perf_counter()
            reopened._store.collections[0].count()
            count_ms.append((time.perf_counter() - t0) * 1000)
        add_ms, rec_ms = [], []
        for i in range(reps):
            t0 = time.perf_counter()
            mem.add(_turn(rng, n + i))
            add_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            mem.reconstruct(" ".join(rng.choice(WORDS, size=6)))
            rec_ms.append((time.perf_counter() - t0) * 1000)
        long_ms = []
        for _ in range(reps):
            t0 = time.perf_counter()
            mem.reconstruct(_long_query(rng))
            long_ms.append((time.perf_counter() - t0) * 1000)
        rows.append(
            {
                "turns": n,
                "fill_s": round(fill_s, 2),
                "reopen_s": round(reopen_s, 2),
                "catch_up_check_ms_p50": round(statistics.median(catch_ms), 3),
                "count_ms_p50": round(statistics.median(count_ms), 3),
                "add_ms_p50": round(statistics.median(add_ms), 2),
                "add_ms_p95": round(_pct(add_ms, 95), 2),
                "reconstruct_ms_p50": round(statistics.median(rec_ms), 2),
                "reconstruct_ms_p95": round(_pct(rec_ms, 95), 2),
                "model_ms_per_call": round(model_ms, 2),
                "add_with_model_ms_p50": round(statistics.median(add_ms) + model_ms, 2),
                "reconstruct_with_model_ms_p50": round(statistics.median(rec_ms) + model_ms, 2),
                "reconstruct_long_query_ms_p50": round(statistics.median(long_ms), 2),
                "long_query_model_ms_per_call": round(long_model_ms, 2),
                "reconstruct_long_query_with_model_ms_p50": round(statistics.median(long_ms) + long_model_ms, 2),
            }
        )
        print(rows[-1], flush=True)
    return {
        "name": "memory_scaling",
        "rows": rows,
        "notes": (
            "meve+Chroma time measured with a model-free embedder; model time = one MiniLM encode of a turn on this CPU, "
            "added for the 'with model' columns (add and reconstruct each embed one text). Defaults of this round: l_max 1024 "
            "filled by fused priority, stemming, partner turns, candidate pool 256. reopen_s: a new handle on the stored session; "
            "catch_up_check: what each read pays to learn that no other writer added turns (it reads the session's heads rows); "
            "count_ms: Chroma's count() of the session, the check this replaced. The reconstruct columns use a query of six "
            "words; the long_query ones a chat message of four sentences of six words (matched whole and sentence by sentence: "
            "one Chroma search with five query vectors, scored from its distances; its model time is one batch "
            "of five texts)."
        ),
    }


def collection_layout(total, share=0.01, reps=30):
    from meve.retrieval.chroma import chroma_client

    rng = np.random.default_rng(1)
    client = chroma_client()
    dim = 384
    n_small = max(1, int(total * share))
    vecs = rng.standard_normal((total, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    shared = client.create_collection(f"layout-shared-{time.time_ns()}", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    per = client.create_collection(f"layout-own-{time.time_ns()}", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    sessions = ["small"] * n_small + ["big"] * (total - n_small)
    for i in range(0, total, 5000):
        shared.add(
            ids=[str(j) for j in range(i, min(total, i + 5000))], embeddings=vecs[i : i + 5000], metadatas=[{"session_id": s} for s in sessions[i : i + 5000]]
        )
    per.add(ids=[str(j) for j in range(n_small)], embeddings=vecs[:n_small])
    q = rng.standard_normal((reps, dim)).astype(np.float32)

    def timed(fn):
        out = []
        for v in q:
            t0 = time.perf_counter()
            fn(v)
            out.append((time.perf_counter() - t0) * 1000)
        return round(statistics.median(out), 2)

    row = {
        "total_docs": total,
        "session_share": share,
        "shared_collection_where_ms_p50": timed(lambda v: shared.query(query_embeddings=[v], n_results=10, where={"session_id": "small"})),
        "shared_collection_unfiltered_ms_p50": timed(lambda v: shared.query(query_embeddings=[v], n_results=10)),
        "own_collection_ms_p50": timed(lambda v: per.query(query_embeddings=[v], n_results=10)),
    }
    print(row, flush=True)
    return {"name": "collection_layout", "rows": [row]}


def _rss_mib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def query_rss(n_queries=5000, n_turns=200, checkpoints=(1000, 2500, 5000)):
    """Resident memory over many distinct queries to one memory with the real default embedder,
    whose process-wide cache of query vectors is bounded by bytes (128 MiB by default)."""
    from meve import MemoryConfig, MomentaryMemory
    from meve.retrieval.chroma import chroma_client
    from meve.scoring.embedders import default_embedder

    rng = np.random.default_rng(2)
    embedder = default_embedder()
    mem = MomentaryMemory("rss", client=chroma_client(), embedders=[embedder], config=MemoryConfig(l_max=512), collection_prefix=f"rss{time.time_ns()}")
    mem.add_many([_turn(rng, i) for i in range(n_turns)])
    mem.reconstruct("warm up the query path")
    rows = [{"queries": 0, "rss_mib": round(_rss_mib(), 1), "cache_entries": len(embedder), "cache_mib": round(embedder.bytes / 2**20, 2)}]
    t0 = time.perf_counter()
    for i in range(1, n_queries + 1):
        mem.reconstruct(f"question {i}: " + " ".join(rng.choice(WORDS, size=5)))
        if i in checkpoints:
            rows.append({"queries": i, "rss_mib": round(_rss_mib(), 1), "cache_entries": len(embedder), "cache_mib": round(embedder.bytes / 2**20, 2)})
            print(rows[-1], flush=True)
    return {
        "name": "memory_query_rss",
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
        "max_bytes_mib": embedder.max_bytes / 2**20,
        "notes": (
            f"{n_queries} distinct queries (the real MiniLM behind meve's default byte-bounded cache) to a {n_turns}-turn memory; "
            "RSS read from /proc/self/statm."
        ),
    }
