"""MeVe with every default over the chunks users make (issue 63): the frameworks' own long chunks
at the shipped ``t_max`` of 512, the budget a user who changes nothing gets.

``context_long`` runs its grid and arms at ``t_max`` of three chunks; at 512 a 1,024-token chunk
never fits whole, and before 0.2.0 the budget phase skipped it, leaving the context empty for most
questions (BENCHMARKS.md, "Context over long chunks": the share of empty contexts at 512 was 0.78
to 1.0 on the 1,024-token variant). Since 0.2.0, when no passage fits, the most relevant is cut to
its best excerpt (``info["cut"]``). This reads what that gives, on the test splits only: nothing
here chooses a setting (the default was chosen on the short-passage dev splits by ``--only
context``, and the cut has no knob), so the rows are held out. Arms, each at ``t_max`` 512 against
the top-k frontier at its own tokens (paired bootstrap intervals): MeVe as shipped
(``MeVeConfig()``), the same without verification, and the paper's settings; plus the share of
questions whose context is empty and whose context is a cut excerpt. Below its top-1 point (~800-940
tokens here) a top-k curve is interpolated from zero, which no plain retriever can render at 512;
so each arm also faces what a plain retriever does render within ``t_max``: the **fill** of each
ranking (dense, BM25, hybrid: its passages in rank order, joined, cut at ``t_max`` tokens).

    python -m benchmarks.run --full --only long_default
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.context import PAPER, REFERENCE_K, Points, load_sets
from benchmarks.harness import lodo
from benchmarks.harness.arms import BASELINES, SEP, System, evaluate, meve_system
from benchmarks.harness.common import default_verifier
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import EXTERNAL, Dataset, long_variant
from meve import ContextResult, MeVeConfig, get_token_counter
from meve.evaluate.report import arm_summary, measure_curves

#: The variants whose chunks exceed 512 tokens (the 512-token one fits as shipped: context_long's rows).
VARIANTS = ("llamaindex-1024", "langchain-1000")
#: The sets whose data is on this machine without a fetch (SelQA and COVID-QA need benchmarks/DATA.md's snapshots).
LOCAL_SETS = ("squad", "hotpotqa", "wikiqa", "msmarco")


def _arms() -> dict[str, dict[str, Any]]:
    shipped = MeVeConfig().to_dict()
    return {"shipped": shipped, "shipped_no_verification": {**shipped, "verify": False}, "paper": {**shipped, **PAPER}}


def _fill(corpus: Corpus, ranking: str, t_max: int) -> System:
    """A plain retriever's context within ``t_max``: ``ranking``'s passages in order, joined, cut at t_max tokens."""
    rank, counter = getattr(corpus, ranking), get_token_counter()

    def run(query: str) -> tuple[list[str], str, ContextResult | None]:
        ids = rank(query, 10)
        return ids, counter.truncate(SEP.join(corpus.text[i] for i in ids), t_max), None

    return run


def _row(corpus: Corpus, questions: Sequence[Any], setting: dict[str, Any], scores: list[tuple[float, float]]) -> dict[str, Any]:
    kept: list[ContextResult] = []
    row = evaluate(meve_system(corpus, setting), questions, get_token_counter(), keep=kept, scores=scores)
    n = max(1, len(kept))
    row["empty_rate"] = round(sum(not r.documents for r in kept) / n, 4)
    row["cut_rate"] = round(sum(bool(r.phase("budget").info.get("cut")) for r in kept) / n, 4)
    return row


def names_here(names: Sequence[str]) -> list[str]:
    """``names`` less the sets whose external snapshot is not extracted here (said in the results)."""
    external = {"selqa": EXTERNAL / "selqa", "covidqa": EXTERNAL / "covidqa"}
    return [n for n in names if n not in external or external[n].exists()]


def held_out_sets(data: Path, test_limit: int, names: Sequence[str]) -> tuple[dict[str, Dataset], dict[str, Any]]:
    """The sets of ``names`` whose data is here, test questions only, and what the results say of them."""
    todo = names_here(names)
    return load_sets(data, 0, test_limit, todo), {"sets": todo, "skipped": sorted(set(names) - set(todo))}


def one_variant(ds: Dataset, variant: str, li: Any, disk: Any) -> dict[str, Any]:
    """One set's test split cut into ``variant``'s chunks: the top-k curves, the fills cut at
    ``t_max``, and each arm against both (``li``, ``disk``: the verifier and its cache on disk)."""
    counter = get_token_counter()
    part = long_variant(ds, variant, counter).splits["test"]
    corpus = Corpus(f"{ds.name}-{variant}-test", part.ids, part.texts, li)
    points: Points = {}
    curves = measure_curves(corpus, part.questions, counter, points=points)
    ref = curves["dense"][REFERENCE_K - 1]["tokens"]
    fills = {f"{r}_fill": evaluate(_fill(corpus, r, MeVeConfig().t_max), part.questions, counter) for r in BASELINES}
    arms = {}
    for label, setting in _arms().items():
        scores: list[tuple[float, float]] = []
        row = _row(corpus, part.questions, setting, scores)
        arms[label] = arm_summary(row, curves, ref, lodo.margin_interval(scores, points))
        best = max(fills, key=lambda f: fills[f]["evidence"])
        arms[label].update(best_fill=best, over_best_fill=round(row["evidence"] - fills[best]["evidence"], 4))
    corpus.close()
    disk.save(li.cache)
    tokens = [counter.count(t) for t in part.texts]
    summary = {"questions": len(part.questions), "passages": len(part.ids), "passage_tokens_mean": round(sum(tokens) / max(1, len(tokens)), 1)}
    return {**summary, "baselines": curves, "fills": fills, "arms": arms}


def run(data: Path, test_limit: int = 300, variants: Sequence[str] = VARIANTS, names: Sequence[str] = LOCAL_SETS) -> dict[str, Any]:
    """Each variant's test splits at ``t_max`` 512 (module docstring)."""
    t0 = time.perf_counter()
    sets, which = held_out_sets(data, test_limit, names)
    li, disk = default_verifier()
    out: dict[str, Any] = {"protocol": __doc__, "t_max": MeVeConfig().t_max, **which, "variants": {}}
    for variant in variants:
        result: dict[str, Any] = {}
        for name, ds in sets.items():
            result[name] = one_variant(ds, variant, li, disk)
            print(f"long_default: {variant} {name} done at {time.perf_counter() - t0:.0f}s: {result[name]['arms']['shipped']}", flush=True)
        out["variants"][variant] = result
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
