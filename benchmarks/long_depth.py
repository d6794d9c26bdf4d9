"""Is a long chunk found by all its text? Recall of a gold chunk by how deep its evidence sits (issue 63 #3).

A bi-encoder reads a passage's first window (MiniLM: 256 word pieces), so a chunk's dense vector
says nothing of what follows. Since 0.4.0 meve keeps each long passage's later windows' vectors
(:mod:`meve.retrieval.passage_windows`) and scores a passage by its best. This measures what that
changes where it matters, candidate generation: for each test question of the long-chunk variants
(the frameworks' ~1,000-token chunks; and each set's own passages), whether a chunk holding its evidence is among the first
``k`` candidates (5 and 20; meve's ``k_init`` is 20), by the depth of the evidence in that chunk (word
pieces before its first evidence sentence, in the shallowest gold chunk; buckets of one window).
Arms run meve's own phase 1 (Chroma and BM25 as shipped) with the windows collection attached or
not: dense, dense with windows, BM25, hybrid (0.3.0's default candidates) and hybrid with windows
(0.4.0's). Nothing is chosen here: the window size and overlap are the verifier's (one model
window, a quarter overlap), no knob was tried, so every row is held out.

    python -m benchmarks.run --full --only long_depth
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.common import default_verifier
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import CONTEXT_SETS, Question, long_variant
from benchmarks.long_default import held_out_sets
from meve import MeVeConfig, get_token_counter
from meve.retrieval.store import ChromaStore

#: The long-chunk variants, and "passages": each set's own passages (a few SQuAD and HotpotQA paragraphs
#: are longer than a window), to show what the windows change where chunks are short.
VARIANTS = ("llamaindex-1024", "langchain-1000", "passages")
#: Bucket edges in word pieces: one MiniLM window (254 pieces of text) each.
EDGES = (0, 254, 508, 762)
KS = (5, 20)
ARMS = {
    "dense": ("dense", False),
    "dense_windows": ("dense", True),
    "hybrid": ("hybrid", False),
    "hybrid_windows": ("hybrid", True),
}


def depth(question: Question, texts: dict[str, str], tokenizer: Any) -> int | None:
    """Word pieces before the first evidence sentence in the shallowest chunk holding one; None without a gold chunk."""
    found = []
    for pid in question.gold:
        text = texts[pid]
        at = [text.find(e) for e in question.evidence if e and e in text]
        if at:
            found.append(len(tokenizer(text[: min(at)], add_special_tokens=False)["input_ids"]))
    return min(found) if found else None


def bucket(d: int) -> str:
    lo = max(e for e in EDGES if e <= d)
    later = [e for e in EDGES if e > lo]
    return f"{lo}-{later[0]}" if later else f"{lo}+"


def _store(corpus: Corpus) -> ChromaStore:
    store = corpus.meve.store
    assert isinstance(store, ChromaStore), "the harness builds MeVe over Chroma"
    return store


def _hits(corpus: Corpus, q: Question, kept: Any) -> dict[str, bool]:
    meve, store = corpus.meve, _store(corpus)
    qvec = corpus.emb.encode([q.text])[0]
    out = {}
    for k in KS:
        for arm, (candidates, windows) in ARMS.items():
            store.windows = kept if windows else None
            found, _, _ = meve.retrieve(q.text, qvec, MeVeConfig().replace(candidates=candidates, k_init=k), lambda: meve.scorer)
            out[f"{arm}@{k}"] = bool(q.gold & {p.id for p in found})
        out[f"bm25@{k}"] = bool(q.gold & {pid for pid, _ in meve.lexical.search(q.text, k)})
    store.windows = kept
    return out


def run(data: Path, test_limit: int = 300, variants: Sequence[str] = VARIANTS, names: Sequence[str] = CONTEXT_SETS) -> dict[str, Any]:
    """Each variant's test splits (module docstring)."""
    t0 = time.perf_counter()
    counter = get_token_counter()
    sets, which = held_out_sets(data, test_limit, names)
    li, disk = default_verifier()
    tokenizer = li._st.model.tokenizer
    out: dict[str, Any] = {"protocol": __doc__, "ks": list(KS), "edges": list(EDGES), **which, "variants": {}}
    for variant in variants:
        result: dict[str, Any] = {}
        for name, ds in sets.items():
            part = (ds if variant == "passages" else long_variant(ds, variant, counter)).splits["test"]
            corpus = Corpus(f"{name}-{variant}-test", part.ids, part.texts, li)
            corpus.emb.save()
            kept = _store(corpus).windows
            texts = dict(zip(part.ids, part.texts, strict=True))
            rows = []
            for q in part.questions:
                d = depth(q, texts, tokenizer)
                if d is not None:
                    rows.append({"depth": d, **_hits(corpus, q, kept)})
            windows = kept.collection.count() if kept is not None else 0
            corpus.close()
            disk.save(li.cache)
            result[name] = {"questions": len(part.questions), "with_gold": len(rows), "passages": len(part.ids), "windows": windows}
            result[name]["by_depth"] = summarise(rows)
            print(f"long_depth: {variant} {name} done at {time.perf_counter() - t0:.0f}s: {result[name]['by_depth'].get('all')}", flush=True)
        out["variants"][variant] = result
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per depth bucket (and over all): the questions, and each arm's recall at each k."""
    groups: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    for r in rows:
        groups.setdefault(bucket(r["depth"]), []).append(r)
    arms = [f"{a}@{k}" for k in KS for a in (*ARMS, "bm25")]
    return {g: {"n": len(rs), **{a: round(sum(r[a] for r in rs) / len(rs), 4) for a in arms}} for g, rs in groups.items() if rs}
