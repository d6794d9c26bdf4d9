"""Hierarchical (MindRef-style) vs flat retrieval (issue 15): tuned on dev questions, reported on test.

HotpotQA: the 500 questions split in two by the sha256 of their id (even: dev, odd: test); one
corpus of all their paragraphs, as documents (title, text) for hierarchical retrieval and as
"title: text" passages for flat retrieval. SQuAD v1.1 dev: the 48 articles are the documents
(paragraphs joined by blank lines) and their paragraphs the flat passages; dev questions come
from the "tune" half of the articles, test questions from the other half, and both retrieve
among all 48.

The document-signal weights are the point of a grid (each weight in 0, 0.25, 0.5, 1) with the
best mean of HotpotQA document R-precision and SQuAD article accuracy@1 on dev questions; they
become meve.hierarchy.DEFAULT_DOC_WEIGHTS. Every other setting is MeVe's default for both
modes, with the late-interaction verifier. Flat retrieval runs with dense candidates (the MeVe
paper's) and with hybrid ones (dense + BM25, RRF; MeVe's default since 2026-11-24).

    python -m benchmarks.run --full --only hierarchical [--data DIR]
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import default_verifier, embedder, li_verifier, pct, prime, squad, squad_dev_split
from benchmarks.harness.metrics import answer_in
from benchmarks.harness.splits import parity
from meve import MeVe, MeVeConfig, get_token_counter
from meve.core.records import ContextResult
from meve.core.text import split_sentences
from meve.mindref.documents import DOC_SIGNALS, Document, fuse_documents, lead_text, sentence_windows
from meve.scoring.cosine import CosineScorer
from meve.scoring.late_interaction import LateInteractionScorer

GRID_VALUES = (0.0, 0.25, 0.5, 1.0)
SUMMARY_TOKENS = 64


# -- data -------------------------------------------------------------------------------------
def hotpot(data: Path) -> tuple[list[Document], dict[str, list[dict[str, Any]]]]:
    qs = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    docs: dict[str, str] = {}
    for q in qs:
        for title, sents in q["context"]:
            docs.setdefault(title, " ".join(sents))
    split: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    for q in qs:
        ctx = {t: s for t, s in q["context"]}
        item = {
            "question": q["question"],
            "answer": str(q["answer"]),
            "gold_docs": sorted({t for t, _ in q["supporting_facts"]}),
            "sup_sents": [ctx[t][i].strip() for t, i in q["supporting_facts"] if t in ctx and i < len(ctx[t])],
        }
        split[parity(q["_id"])].append(item)
    return [Document(t, t, x) for t, x in docs.items()], split


def squad_articles(data: Path, per_split: int = 200, seed: int = 0) -> tuple[list[Document], dict[str, list[dict[str, Any]]], dict[str, tuple[str, int, int]]]:
    """48 article documents, dev/test questions, and every paragraph's (article, start, end)."""
    articles = squad(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz")
    halves = squad_dev_split([a["title"] for a in articles])
    docs: list[Document] = []
    paragraphs: dict[str, tuple[str, int, int]] = {}
    split: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    for a in articles:
        title = a["title"].replace("_", " ")
        text = ""
        for j, p in enumerate(a["paragraphs"]):
            ctx = p["context"].strip()
            if text:
                text += "\n\n"
            start = len(text)
            text += ctx
            pid = f"{a['title']}#{j}"
            paragraphs[pid] = (a["title"], start, start + len(ctx))
            for qa in p["qas"]:
                split["dev" if halves[a["title"]] == "tune" else "test"].append(
                    {"question": qa["question"], "answers": sorted({x["text"] for x in qa["answers"]}), "gold_doc": a["title"], "gold_paragraph": pid}
                )
        docs.append(Document(a["title"], title, text))
    for name in split:
        random.Random(seed).shuffle(split[name])
        split[name] = split[name][:per_split]
    return docs, split, paragraphs


# -- models -----------------------------------------------------------------------------------
def corpus_texts(docs: Sequence[Document], passage_tokens: int) -> list[str]:
    counter = get_token_counter()
    out = [d.text[a:b] for d in docs for a, b in sentence_windows(d.text, passage_tokens, counter)]
    return out + [lead_text(d.title, d.text, counter, SUMMARY_TOKENS) for d in docs]


# -- evaluation -------------------------------------------------------------------------------
def _docs_ranked(r: ContextResult, mode: str, doc_of: dict[str, str]) -> list[str]:
    ret = r.phase("retrieve")
    if mode == "hierarchical":
        return list(ret.info["documents"])
    return list(dict.fromkeys(doc_of.get(pid, pid) for pid in ret.kept))


def evaluate(
    m: MeVe, mode: str, qs: Sequence[dict[str, Any]], dataset: str, doc_of: dict[str, str], paragraphs: dict[str, tuple[str, int, int]] | None = None
) -> dict[str, Any]:
    rows: list[dict[str, float]] = []
    ms: list[float] = []
    for q in qs:
        r = m.run(q["question"])
        ranked = _docs_ranked(r, mode, doc_of)
        ctx = r.context
        row: dict[str, float] = {"tokens": r.token_count}
        if dataset == "hotpotqa":
            gold = set(q["gold_docs"])
            row["doc_r_precision"] = len(set(ranked[: len(gold)]) & gold) / len(gold)
            row["sent_recall"] = sum(s in ctx for s in q["sup_sents"]) / max(1, len(q["sup_sents"]))
            row["answer_in_context"] = float(answer_in([q["answer"]], ctx))
        else:
            assert paragraphs is not None
            row["article_acc_at_1"] = float(bool(ranked) and ranked[0] == q["gold_doc"])
            row["paragraph_recall_at_5"] = float(_paragraph_hit(r, mode, q["gold_paragraph"], paragraphs, 5))
            row["answer_in_context"] = float(answer_in(q["answers"], ctx))
        rows.append(row)
        ms.append(r.total_ms)
    out = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
    out["tokens"] = round(out["tokens"], 1)
    out.update({"ms_p50": round(pct(ms, 50), 1), "ms_p95": round(pct(ms, 95), 1), "questions": len(qs)})
    return out


def _paragraph_hit(r: ContextResult, mode: str, gold: str, paragraphs: dict[str, tuple[str, int, int]], k: int) -> bool:
    kept = r.phase("retrieve").kept[:k]
    if mode != "hierarchical":
        return gold in kept
    doc, start, end = paragraphs[gold]
    for wid in kept:
        d, span = wid.rsplit("@", 1)
        a, b = (int(x) for x in span.split("-"))
        if d == doc and a < end and start < b:
            return True
    return False


def doc_metric(dataset: str, ranked: list[str], q: dict[str, Any]) -> float:
    if dataset == "hotpotqa":
        gold = set(q["gold_docs"])
        return len(set(ranked[: len(gold)]) & gold) / len(gold)
    return float(bool(ranked) and ranked[0] == q["gold_doc"])


def signal_table(m: MeVe, qs: Sequence[dict[str, Any]], li: LateInteractionScorer) -> list[tuple[dict[str, dict[int, float]], dict[str, Any]]]:
    """Every document signal of every question, computed once; weights are then scored offline."""
    assert m.hierarchy is not None
    emb = embedder()
    qvecs = emb.encode([q["question"] for q in qs])
    return [(m.hierarchy.signals(q["question"], qvecs[i], li), q) for i, q in enumerate(qs)]


def score_weights(table: list[tuple[dict[str, dict[int, float]], dict[str, Any]]], ids: list[str], dataset: str, weights: dict[str, float]) -> float:
    vals = []
    for signals, q in table:
        ranked = [ids[i] for i, _ in fuse_documents(signals, weights, 5)]
        vals.append(doc_metric(dataset, ranked, q))
    return float(np.mean(vals))


def run(data: Path) -> dict[str, Any]:
    t_start = time.perf_counter()
    li, disk = default_verifier()
    cfg = MeVeConfig()
    h_docs, h_qs = hotpot(data)
    s_docs, s_qs, paragraphs = squad_articles(data)
    s_flat = [(pid, f"{d.title}: {d.text[a:b]}") for d in s_docs for pid, (owner, a, b) in paragraphs.items() if owner == d.id]
    sets = {
        "hotpotqa": (h_docs, h_qs, [d.id for d in h_docs], [f"{d.title}: {d.text}" for d in h_docs]),
        "squad": (s_docs, s_qs, [pid for pid, _ in s_flat], [t for _, t in s_flat]),
    }
    emb = embedder()
    systems: dict[str, dict[str, MeVe]] = {}
    doc_of: dict[str, dict[str, str]] = {}
    for name, (docs, qs, flat_ids, flat_texts) in sets.items():
        prime(li, corpus_texts(docs, cfg.passage_tokens) + flat_texts + [q["question"] for part in qs.values() for q in part], "hierarchical")
        disk.save(li.cache)
        doc_of[name] = {pid: (paragraphs[pid][0] if name == "squad" else pid) for pid in flat_ids}
        flat = MeVe.from_texts(flat_texts, ids=flat_ids, embedder=emb, scorer=li_verifier(li), batch_size=1024)
        hier = MeVe.from_documents(docs, embedder=emb, scorer=li_verifier(li), summary_tokens=SUMMARY_TOKENS)
        systems[name] = {"flat": flat, "hierarchical": hier}
        print(f"hierarchical: {name} built at {time.perf_counter() - t_start:.0f}s", flush=True)

    # Dev: the weights.
    tables = {n: {part: signal_table(systems[n]["hierarchical"], sets[n][1][part], li) for part in ("dev", "test")} for n in sets}
    ids = {n: systems[n]["hierarchical"].hierarchy.ids for n in sets}  # type: ignore[union-attr]
    grid: list[dict[str, Any]] = []
    for values in itertools.product(GRID_VALUES, repeat=len(DOC_SIGNALS)):
        if not any(values):
            continue
        w = dict(zip(DOC_SIGNALS, values, strict=True))
        dev = {n: score_weights(tables[n]["dev"], ids[n], n, w) for n in sets}
        grid.append({"weights": w, "dev": dev, "mean": float(np.mean(list(dev.values())))})
    grid.sort(key=lambda g: (-g["mean"], sum(g["weights"].values())))
    chosen: dict[str, float] = grid[0]["weights"]
    single = {s: {n: {part: round(score_weights(tables[n][part], ids[n], n, {s: 1.0}), 4) for part in ("dev", "test")} for n in sets} for s in DOC_SIGNALS}
    print(f"hierarchical: weights chosen on dev {chosen} ({grid[0]['dev']})", flush=True)
    disk.save(li.cache)

    # Test: every system at MeVe's defaults.
    results: dict[str, Any] = {}
    for name in sets:
        _, qs, _, _ = sets[name]
        hier = systems[name]["hierarchical"]
        assert hier.hierarchy is not None
        hier.hierarchy.weights = dict(chosen)
        flat = systems[name]["flat"]
        dense = _with(flat, candidates="dense")  # named: MeVeConfig()'s candidates are hybrid since 2026-11-24
        par = paragraphs if name == "squad" else None
        results[name] = {
            "flat_dense": evaluate(dense, "flat", qs["test"], name, doc_of[name], par),
            "flat_hybrid": evaluate(_with(flat, candidates="hybrid"), "flat", qs["test"], name, doc_of[name], par),
            "hierarchical": evaluate(hier, "hierarchical", qs["test"], name, doc_of[name], par),
            "dev_hierarchical": evaluate(hier, "hierarchical", qs["dev"], name, doc_of[name], par),
            "dev_flat_dense": evaluate(dense, "flat", qs["dev"], name, doc_of[name], par),
            "documents": len(sets[name][0]),
            "windows": hier.hierarchy.windows,
            "flat_passages": len(flat.lexical),
        }
        print(f"hierarchical: {name} {json.dumps(results[name])}", flush=True)
        disk.save(li.cache)
    for systems_of in systems.values():
        for m in systems_of.values():
            m.close()
    emb.save()
    return {
        "protocol": __doc__.split("\n\n")[1:3],
        "weights": chosen,
        "grid_top": grid[:5],
        "single_signal_doc_metric": single,
        "results": results,
        "seconds": round(time.perf_counter() - t_start),
    }


def _with(m: MeVe, **overrides: Any) -> MeVe:
    """The same index with other config defaults (no re-embedding)."""
    clone = MeVe(
        store=m.store,
        lexical=m.lexical,
        config=m.config.replace(**overrides),
        embedder=m.embedder,
        scorer=m.scoring,
        token_counter=m.token_counter,
        follow_replicas=m.follow_replicas,
    )
    return clone


# -- growth with corpus size ----------------------------------------------------------------------
class MixedEmbedder:
    """Timing only: a cached MiniLM vector for every text the quality runs embedded (the real
    paragraphs, windows and questions), and a random unit vector, seeded by the text, for each
    synthetic one. Quality is not measured on the synthetic documents."""

    def __init__(self) -> None:
        self.inner = embedder()
        self.name = self.inner.name
        self.dimension = self.inner.dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        known = [i for i, t in enumerate(texts) if hashlib.sha1(t.encode()).hexdigest() in self.inner._index]
        if known:
            out[known] = self.inner.encode([texts[i] for i in known])
        for i in set(range(len(texts))) - set(known):
            v = np.random.default_rng(int(hashlib.sha1(texts[i].encode()).hexdigest()[:15], 16)).standard_normal(self.dimension)
            out[i] = v / np.linalg.norm(v)
        return out


def growth(data: Path, sizes: Sequence[int], n_queries: int = 30) -> dict[str, Any]:
    """Time per query of flat and hierarchical retrieval at each corpus size (documents = passages)."""
    base, qs = hotpot(data)
    questions = [q["question"] for q in qs["test"][:n_queries]]
    sents = [s for d in base for s in split_sentences(d.text)]
    rng = np.random.default_rng(0)
    emb = MixedEmbedder()
    scorer = CosineScorer(emb)
    rows = []
    for n in sizes:
        docs = list(base[:n])
        while len(docs) < n:
            k = int(rng.integers(3, 6))
            docs.append(Document(f"synthetic-{len(docs)}", f"Synthetic record {len(docs)}", " ".join(sents[i] for i in rng.integers(len(sents), size=k))))
        t0 = time.perf_counter()
        flat = MeVe.from_texts([f"{d.title}: {d.text}" for d in docs], ids=[d.id for d in docs], embedder=emb, scorer=scorer, batch_size=4096)
        flat_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        hier = MeVe.from_documents(docs, embedder=emb, scorer=scorer, summary_tokens=SUMMARY_TOKENS)
        hier_build = time.perf_counter() - t0
        windows = hier.hierarchy.windows if hier.hierarchy else 0
        row: dict[str, Any] = {"documents": n, "windows": windows, "flat_build_s": round(flat_build, 1), "hier_build_s": round(hier_build, 1)}
        for name, m in (("flat", flat), ("hierarchical", hier)):
            m.run(questions[0])  # first-query effects (HNSW load) are not per-query cost
            ms = [m.run(q).total_ms for q in questions]
            row[f"{name}_ms_p50"] = round(pct(ms, 50), 2)
            row[f"{name}_ms_p95"] = round(pct(ms, 95), 2)
        rows.append(row)
        print(f"hierarchical growth: {row}", flush=True)
        flat.close()
        hier.close()
    return {
        "rows": rows,
        "notes": (
            "HotpotQA paragraphs, then synthetic documents of 3-5 of their sentences. Vectors: cached MiniLM for real texts, random unit "
            "vectors for synthetic ones (timing only); verifier: bi-encoder cosine, so the times measure index lookups and meve's work, "
            f"not model runs. {n_queries} HotpotQA test questions per size, after one warm-up query."
        ),
    }


def exact_localisation(data: Path, sizes: list[int], probes: int = 200) -> list[dict[str, Any]]:
    """Suffix-array localisation of 16-token prefixes against corpus size (HotpotQA paragraphs, copied to size)."""
    from meve.mindref.locate import ExactIndex

    raw = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    base = [" ".join(s) for q in raw for _, s in q["context"]]
    counter = get_token_counter()
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        docs = [(f"d{i}", f"{base[i % len(base)]} [copy {i // len(base)}]") for i in range(n)]
        t0 = time.perf_counter()
        index = ExactIndex.from_documents(docs)
        build = time.perf_counter() - t0
        lat = []
        for _ in range(probes):
            doc_id, text = docs[int(rng.integers(n))]
            start = int(rng.integers(max(1, len(text) - 200)))
            prefix = counter.truncate(text[start:], 16)
            t0 = time.perf_counter()
            index.locate(prefix, limit=10)
            lat.append((time.perf_counter() - t0) * 1e6)
            assert any(s.doc_id == doc_id and s.start == start for s in index.locate(prefix)), "oracle"
        rows.append({"documents": n, "build_s": round(build, 2), "locate_us_p50": round(pct(lat, 50), 1), "locate_us_p95": round(pct(lat, 95), 1)})
    return rows
