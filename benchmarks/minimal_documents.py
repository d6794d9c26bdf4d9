"""Minimal context (issue 12) over documents: the same questions, corpora and targets as
``benchmarks.minimal``, with MeVe built by ``MeVe.from_documents`` (hierarchical retrieval:
documents first, then sentence windows inside them) instead of ``MeVe.from_texts``.

Documents: on HotpotQA each paragraph (its title, its sentences); on SQuAD each article of the
half (its title, its paragraphs). Every MeVe setting is ``MeVeConfig()`` as shipped and the
document weights are ``meve.hierarchy.DEFAULT_DOC_WEIGHTS`` (chosen by ``benchmarks.hierarchical``
on its own dev questions): nothing is tuned here. Dev rows are reported beside the flat default's
dev rows, so the dev rule of ``benchmarks.minimal`` can compare the two; test rows are compared
with the baselines that ``benchmarks.minimal`` measured on the same test questions
(``results/minimal.json``), so that file must come from the same data.

    python -m benchmarks.run --only minimal_documents [--data DIR]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, default_verifier, embedder, li_verifier, pct, prime, squad_dev_split
from benchmarks.hierarchical import SUMMARY_TOKENS, corpus_texts, squad_articles
from benchmarks.minimal import RULE_METRIC, _timed, envelope_at, hotpot_paragraphs, hotpot_raw, hotpot_sets, score, squad_sets
from meve import MeVe, MeVeConfig, get_token_counter
from meve.mindref.documents import Document
from meve.core.records import ContextResult


def documents(data: Path) -> dict[str, dict[str, list[Document]]]:
    """Per dataset and split, the documents over the corpora of benchmarks.minimal: HotpotQA's
    paragraphs, and the articles of each SQuAD half (as benchmarks.hierarchical builds them)."""
    hotpot = {split: [Document(t, t, x) for t, x in hotpot_paragraphs(raw).items()] for split, raw in hotpot_raw(data).items()}
    articles, _, _ = squad_articles(data)
    half = squad_dev_split([d.id for d in articles])
    squad = {split: [d for d in articles if half[d.id] == which] for split, which in (("dev", "tune"), ("test", "test"))}
    return {"hotpotqa": hotpot, "squad": squad}


def run(data: Path, squad_questions: int = 300, limit: int | None = None) -> dict[str, Any]:
    t_start = time.perf_counter()
    flat = json.loads((RESULTS / "minimal.json").read_text())
    li, disk = default_verifier()
    emb = embedder()
    counter = get_token_counter()
    questions = {"hotpotqa": hotpot_sets(data), "squad": squad_sets(data, squad_questions)}
    docs_of = documents(data)
    for name, sets in questions.items():
        ours, theirs = len(sets["test"][2][:limit]), flat["datasets"][name]["test"]["questions"]
        if ours != theirs:  # a quick run against a full flat run (or the reverse) would compare other questions
            raise SystemExit(f"results/minimal.json has {theirs} {name} test questions, this run would ask {ours}: run both with or without --full")
    cfg = MeVeConfig()
    knobs = ("candidates", "tau", "cut", "coverage", "coverage_floor", "n_min", "prune", "prune_ratio", "prune_gate", "k_docs", "passage_tokens", "t_max")
    out: dict[str, Any] = {"protocol": __doc__.split("\n\n")[0:2], "config": {k: getattr(cfg, k) for k in knobs}}
    out["datasets"] = {}
    for name in questions:
        rows: dict[str, Any] = {}
        for split in ("dev", "test"):
            qs = questions[name][split][2][:limit]
            docs = docs_of[name][split]
            prime(li, corpus_texts(docs, cfg.passage_tokens) + [q["question"] for q in qs], "minimal_documents")
            disk.save(li.cache)
            m = MeVe.from_documents(docs, embedder=emb, scorer=li_verifier(li), summary_tokens=SUMMARY_TOKENS)
            kept: list[ContextResult] = []

            def system(q: str, m: MeVe = m, kept: list[ContextResult] = kept) -> tuple[list[str], str]:
                r = m.run(q)
                kept.append(r)
                return [d.id for d in r.documents], r.context

            row = score(counter, qs, _timed(system, qs))
            row["verify_ms_p50"] = round(pct([r.phase("verify").ms for r in kept], 50), 2)
            rows[split] = {"documents": len(docs), "questions": len(qs), "meve_default": row}  # keys as benchmarks.minimal writes them
            m.close()
            print(f"minimal_documents: {name} {split} {row} at {time.perf_counter() - t_start:.0f}s", flush=True)
        f_dev, f_test = flat["datasets"][name]["dev"], flat["datasets"][name]["test"]
        metric = RULE_METRIC[name]
        flat_default_dev = next(g for g in f_dev["meve_grid"] if all(g[k] == v for k, v in flat["default"]["config"].items()))
        rows["dev"].update({"reference": f_dev["reference"], "flat_default": flat_default_dev, "rule_metric": metric})
        mine = rows["test"]["meve_default"]
        above = {s: round(mine["answer_in_context"] - envelope_at(r, mine["tokens"]), 4) for s, r in f_test["sweeps"].items()}
        rows["test"].update({"reference": f_test["reference"], "flat_default": f_test["meve_default"], "default_above_envelope_by": above})
        out["datasets"][name] = rows
    emb.save()
    disk.save(li.cache)
    out["flat_results_date"] = flat["date"]
    out["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    return out
