"""A control for ``long_default``'s MS MARCO rows (issue 63): is the fill cut at ``t_max`` ahead
because of what the corpus's order tells it?

MS MARCO's long-chunk variants join each query's BM25 top-20 passages in their BM25 rank order
before the framework's splitter cuts them (``benchmarks.harness.data.msmarco`` and ``pack``), and
a relevant passage is often among its query's first (the results' ``bm25_order``). So a plain
retriever's first chunk, cut at ``t_max`` tokens, keeps that query's own top BM25 passages: the
corpus hands the fill a ranking no user's documents carry. Here each query's passages are joined
in a fixed order unrelated to the query (sha256 of the text) instead, and everything else is
``long_default``'s: the same test questions, variants, arms, fills and curves. Nothing is chosen
(no knob; the rows are read beside ``long_default``'s, which stay the reported figures).

    python -m benchmarks.run --full --only long_order

About 12 minutes on two cores the first time (the reordered chunks are new texts to encode), 2 once cached.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.harness.common import default_verifier
from benchmarks.harness.data import Dataset
from benchmarks.long_default import VARIANTS, held_out_sets, one_variant

PASSAGE_SEP = "\n\n"


def unranked(ds: Dataset) -> Dataset:
    """``ds`` with each document's passages (joined by a blank line) in sha256 order of their text."""

    def reorder(text: str) -> str:
        return PASSAGE_SEP.join(sorted(text.split(PASSAGE_SEP), key=lambda p: hashlib.sha256(p.encode()).hexdigest()))

    splits = {name: replace(part, documents=[(doc_id, reorder(text)) for doc_id, text in part.documents]) for name, part in ds.splits.items()}
    return Dataset(ds.name, ds.evidence, f"{ds.source}; each query's passages in sha256 order", splits)


def first_relevant(ds: Dataset, split: str = "test") -> list[int | None]:
    """For each question of ``split``, the place of its first relevant passage among its query's
    passages as the corpus joins them (0: first; None: no passage of its own query holds its
    evidence, as when an earlier query placed it)."""
    part = ds.splits[split]
    docs = dict(part.documents)
    out: list[int | None] = []
    for q in part.questions:
        passages = docs.get(q.id.split(":")[1], "").split(PASSAGE_SEP)
        out.append(next((i for i, p in enumerate(passages) if any(e in p for e in q.evidence)), None))
    return out


def run(data: Path, test_limit: int = 300) -> dict[str, Any]:
    t0 = time.perf_counter()
    sets, which = held_out_sets(data, test_limit, ("msmarco",))
    li, disk = default_verifier()
    places = first_relevant(sets["msmarco"])
    found = [p for p in places if p is not None]
    n = max(1, len(found))
    head = {"questions": len(places), "placed": len(found), "first": round(sum(p == 0 for p in found) / n, 3), "top3": round(sum(p < 3 for p in found) / n, 3)}
    out: dict[str, Any] = {"protocol": __doc__, **which, "bm25_order": head, "variants": {}}
    for variant in VARIANTS:
        out["variants"][variant] = {"msmarco": one_variant(unranked(sets["msmarco"]), variant, li, disk)}
        print(f"long_order: {variant} done at {time.perf_counter() - t0:.0f}s", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
