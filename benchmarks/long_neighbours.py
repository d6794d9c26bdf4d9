"""Neighbours of a split answer (issue 77 #2): whether MeVeConfig.neighbours is on by default, chosen leave-one-dataset-out.

Two settings, everything else as shipped (``MeVeConfig()``):

- ``off`` (0.7.0's default): a chunk the verifier's cut dropped stays out, even when the chunk
  before it, which the context keeps, ends with the start of the answer.
- ``on``: after packing, a kept chunk whose best sentence opens or ends its text is joined, as one
  passage, with its neighbour on that side in its source (their overlap once), when the room left
  in t_max holds what it adds (:mod:`meve.pipeline.neighbours`).

Protocol, stated before any figure was read. Variants: LlamaIndex ``SentenceSplitter`` nodes of
1,024 tokens and LangChain ``RecursiveCharacterTextSplitter`` chunks of 1,000 (the harness measures
both sizes in meve's tokens, ``benchmarks.harness.data.splitter``; 200 of overlap each), of four
sets (SQuAD, HotpotQA, WikiQA, MS MARCO, the ones on this machine without a fetch). Each set's own
passages are left out: no splitter cut them, so no passage has a place in a source, nothing can be
joined, and the two settings give the same context by construction. The harness cuts plain texts,
so each chunk is given its place here as its framework gives it: its source is the packed
document it was cut from, its start where its text is found in that document, searching on from
the chunk before it (as LangChain's ``add_start_index`` and LlamaIndex's ``start_char_idx`` find
them). A LlamaIndex chunk also names the chunks before and after it (PREVIOUS/NEXT), and a
neighbour that is not a candidate is read from the store, as ``MeVeRetriever(index)`` reads the
docstore; a LangChain chunk is linked by its offsets among the candidates only, as the LangChain
components link them. Two budgets: ``t_max`` 512, as shipped, where a chunk of 1,000 tokens is cut
to fit and leaves no room, so a join can only follow a shorter chunk (a document's last); and
three chunks (3,072 and 3,000 tokens, dense top-3's scale, as ``benchmarks/context_long.py`` runs
these chunks), where there is room. Each setting's margin over the top-k frontier at its own tokens
is measured at both budgets on every dev split (100 questions; test 200). For each left-out set,
the setting with the higher mean dev margin over the other three sets (both variants, both
budgets) is its choice (a tie keeps ``off``), and that set's test rows are reported: both settings
at both budgets, the choice, at each budget the paired difference of their margins (on less off)
with its bootstrap 95% interval (questions resampled, the same draw for both settings and every
top-k point), and, for ``on``, the joins made: how many, and the share of questions with at least
one.

    python -m benchmarks.run --full --only long_neighbours
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.context import REFERENCE_K, Points, load_sets
from benchmarks.harness import lodo
from benchmarks.harness.arms import evaluate, meve_system
from benchmarks.harness.common import default_verifier
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import Dataset, Split, long_variant, pack
from benchmarks.long_default import LOCAL_SETS, names_here
from meve import ContextResult, MeVeConfig, TokenCounter, get_token_counter
from meve.evaluate.frontier import difference_interval
from meve.evaluate.report import arm_summary, measure_curves
from meve.pipeline.neighbours import Neighbours, Place

VARIANTS = ("llamaindex-1024", "langchain-1000")
SETTINGS = ("off", "on")
BUDGETS = ("t_max_512", "three_chunks")


def budget(name: str, variant: str) -> int:
    """``t_max`` under budget ``name`` for ``variant``'s chunks."""
    return 3 * int(variant.split("-")[1]) if name == "three_chunks" else MeVeConfig().t_max


def places(part: Split, variant: str, counter: TokenCounter) -> dict[str, Place]:
    """Each chunk of a long-chunk split (ids ``<document>#<variant>-<j>``) placed in the packed
    document it was cut from (module docstring); a chunk whose text is not found there has no
    offset, and a LangChain chunk without one no place at all."""
    framework, size = variant.split("-")
    source = dict(pack(part.documents, int(size), counter))
    text = dict(zip(part.ids, part.texts, strict=True))
    chunks: dict[str, list[str]] = {}
    for pid in part.ids:
        chunks.setdefault(pid.rsplit(f"#{variant}-", 1)[0], []).append(pid)
    out: dict[str, Place] = {}
    for doc, ids in chunks.items():
        at = 0
        for k, pid in enumerate(ids):
            found = source.get(doc, "").find(text[pid], at)
            start = found if found >= 0 else None
            at = found + 1 if found >= 0 else at
            if framework == "llamaindex":
                out[pid] = Place(doc, start, ids[k - 1] if k else None, ids[k + 1] if k + 1 < len(ids) else None)
            elif start is not None:
                out[pid] = Place(doc, start)
    return out


def _arm(corpus: Corpus, questions: Sequence[Any], setting: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[float, float]]]:
    kept: list[ContextResult] = []
    scores: list[tuple[float, float]] = []
    row = evaluate(meve_system(corpus, setting), questions, get_token_counter(), keep=kept, scores=scores)
    joins = [sum(len(j) for j in r.phase("budget").info.get("neighbours", {}).get("joined", {}).values()) for r in kept]
    row["joins"] = int(sum(joins))
    row["joined_rate"] = round(sum(n > 0 for n in joins) / max(1, len(joins)), 4)
    return row, scores


def one_split(ds: Dataset, variant: str, split: str, li: Any, disk: Any, settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One set's ``split`` in ``variant``'s chunks: the top-k curves, each setting's row at each
    budget, and at each budget the paired difference of the two settings' margins."""
    counter = get_token_counter()
    part = long_variant(ds, variant, counter).splits[split]
    corpus = Corpus(f"{ds.name}-{variant}-{split}", part.ids, part.texts, li)
    where = places(part, variant, counter)
    store = corpus.meve.store
    fetch = store.get if store is not None and variant.startswith("llamaindex") else None
    corpus.meve.neighbours = Neighbours(place=lambda p: where.get(p.id), fetch=fetch)
    points: Points = {}
    curves = measure_curves(corpus, part.questions, counter, points=points)
    ref = curves["dense"][REFERENCE_K - 1]["tokens"]
    budgets: dict[str, Any] = {}
    for name in BUDGETS:
        rows: dict[str, Any] = {}
        per_q: dict[str, list[tuple[float, float]]] = {}
        for label, setting in settings.items():
            row, per_q[label] = _arm(corpus, part.questions, {**setting, "t_max": budget(name, variant)})
            rows[label] = arm_summary(row, curves, ref, lodo.margin_interval(per_q[label], points))
        low, high = difference_interval(per_q["on"], per_q["off"], points)
        diff = {"mean": round(rows["on"]["margin"] - rows["off"]["margin"], 4), "ci95": [round(low, 4), round(high, 4)]}
        budgets[name] = {"t_max": budget(name, variant), "arms": rows, "on_less_off": diff}
    corpus.close()
    disk.save(li.cache)
    placed = sum(1 for at in where.values() if at.start is not None)
    return {"questions": len(part.questions), "passages": len(part.ids), "placed": placed, "budgets": budgets}


def choose(dev: dict[str, dict[str, Any]], left_out: str) -> dict[str, Any]:
    """The setting with the higher mean dev margin over the sets other than ``left_out`` (every variant, every budget)."""
    rows = [b["arms"] for v in dev.values() for n, one in v.items() if n != left_out for b in one["budgets"].values()]
    means = {s: float(np.mean([arms[s]["margin"] for arms in rows])) for s in SETTINGS}
    return {"setting": max(SETTINGS, key=lambda s: (means[s], s == "off")), "dev_mean_margin": {s: round(m, 4) for s, m in means.items()}}


def run(data: Path, dev_limit: int = 100, test_limit: int = 200, variants: Sequence[str] = VARIANTS, names: Sequence[str] = LOCAL_SETS) -> dict[str, Any]:
    """The protocol of the module docstring (a tie keeps the shipped setting, ``off``)."""
    t0 = time.perf_counter()
    todo = names_here(names)
    sets, which = load_sets(data, dev_limit, test_limit, todo), {"sets": todo, "skipped": sorted(set(names) - set(todo))}
    li, disk = default_verifier()
    shipped = MeVeConfig().to_dict()
    settings = {"off": {**shipped, "neighbours": False}, "on": {**shipped, "neighbours": True}}
    dev: dict[str, dict[str, Any]] = {v: {} for v in variants}
    test: dict[str, dict[str, Any]] = {v: {} for v in variants}
    for variant in variants:
        for name, ds in sets.items():
            dev[variant][name] = one_split(ds, variant, "dev", li, disk, settings)
            test[variant][name] = one_split(ds, variant, "test", li, disk, settings)
            diffs = {b: one["on_less_off"] for b, one in test[variant][name]["budgets"].items()}
            print(f"long_neighbours: {variant} {name} at {time.perf_counter() - t0:.0f}s: test on less off {diffs}", flush=True)
    choices = {name: choose(dev, name) for name in sets}
    out = {"protocol": __doc__, "budgets": {v: {b: budget(b, v) for b in BUDGETS} for v in variants}, **which, "dev_limit": dev_limit, "test_limit": test_limit}
    return {**out, "dev": dev, "test": test, "choices": choices, "elapsed_s": round(time.perf_counter() - t0, 1)}
