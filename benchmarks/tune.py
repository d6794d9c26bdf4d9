"""`meve tune` measured (issue 50): on each of the six context sets, a setting chosen on 50 of that
set's dev questions, reported on its test split beside the shipped default and the top-k frontier.

Protocol, fixed before the run:
1. For each context set D (:mod:`benchmarks.harness.data`, split by the registry): D's dev corpus
   and the first ``dev_limit`` (50) of its dev questions in the fixed sample order. On them,
   :func:`meve.evaluate.tune.choose_setting` (what ``meve tune`` runs on a user's dev split): the
   dense, BM25 and hybrid top-k curves and the 48 settings of :data:`meve.evaluate.tune.GRID`,
   the dev best being the best margin over the dev frontier (ties within 0.002 to fewer tokens).
   It is the choice only when clearly better than the shipped default on dev (the paired
   bootstrap 95% interval of its dev margin minus the default's lies above zero); otherwise the
   choice is the default. (The second run of this protocol, 2026-11-26: the first took the dev
   best unchecked; it lost to the default on 4 of 6 test splits by 0.002-0.008, and on memory
   LoCoMo by 0.059, which is why the check was added. Its figures are kept beside: "dev best".)
2. On D's test corpus and the first ``test_limit`` (300) of its test questions (the context
   benchmark's): the choice, the dev best and the shipped default (``MeVeConfig()``'s knobs), each
   with its margin over the test frontier and a paired bootstrap 95% interval (2,000 draws).
3. Targets (issue 50): the choice lies on or above the test frontier on at least five of six sets,
   and beats the shipped default's margin on at least three.

Unlike ``meve tune`` on a user's file, dev and test here are the registry's splits, each with its
own corpus, so nothing of a test corpus or question was seen by the choice. The shipped default was
itself chosen on these sets' dev splits (200 questions each; ``benchmarks/context.py``), so its
test figures are in-distribution for the choice of default, as BENCHMARKS.md's "Context" labels them.

Memory (``run_memory``, the same question for ``tune_memory``): on each memory set
(:data:`benchmarks.harness.conversations.MEMORY_SETS`), the setting among
:data:`meve.evaluate.memory.MEMORY_GRID` (18: fusion and weights, partner turns, keep_recent;
dates "auto"; the memory benchmark's grid) that keeps
the most evidence at 512 tokens on the first ``dev_limit`` (50) dev questions (registry order),
replacing ``MemoryConfig()`` only when clearly better there (the same check, on evidence kept),
reported on every test question beside ``MemoryConfig()`` against the dense, BM25 and hybrid fills
of 512 tokens, each gain over the best fill with a paired bootstrap interval. The metric is evidence
kept (the evidence turns' text in the context), not the memory section's "answerable".

    python -m benchmarks.run --full --only tune [--data DIR]
    python -m benchmarks.tune --limit 5 --sets wikiqa   # a smoke run: 5 dev and 5 test questions
    python -m benchmarks.tune --memory --limit 10 --sets memorybank
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.context import load_sets
from benchmarks.harness.common import data_dir, default_verifier
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import CONTEXT_SETS
from meve.evaluate.evaluation import run_arms
from meve.evaluate.tune import GRID, choose_setting, shipped_default

__all__ = ["run", "run_memory"]


def run(data: Path, dev_limit: int = 50, test_limit: int = 300, names: Sequence[str] = CONTEXT_SETS, reps: int = 2000) -> dict[str, Any]:
    """Steps 1-3 of the protocol (module docstring) over ``names``."""
    t0 = time.perf_counter()
    li, disk = default_verifier()
    sets = load_sets(data, dev_limit, test_limit, names)
    default = shipped_default()
    out: dict[str, Any] = {"protocol": __doc__, "grid_size": len(GRID), "default": default, "dev_limit": dev_limit, "test_limit": test_limit, "datasets": {}}
    for name, ds in sets.items():
        dev, test = ds.splits["dev"], ds.splits["test"]
        corpus = Corpus(f"{name}-dev", dev.ids, dev.texts, li)
        choice = choose_setting(corpus, dev.questions, incumbent=default, reps=reps)
        corpus.close()
        best = dict(GRID[choice.best])
        corpus = Corpus(f"{name}-test", test.ids, test.texts, li)
        # The dev best is measured on test whether or not it replaced the default: the ungated choice, beside.
        curves, arms = run_arms(corpus, test.questions, {"dev_best": best, "default": default}, reps=reps)
        corpus.close()
        disk.save(li.cache)
        arms["tuned"] = arms["default"] if choice.kept_incumbent else arms["dev_best"]
        tuned, shipped, ungated = arms["tuned"], arms["default"], arms["dev_best"]
        diff, ci = choice.over_incumbent or (0.0, (0.0, 0.0))
        out["datasets"][name] = {
            "dev": {
                "questions": len(dev.questions),
                "passages": len(dev.ids),
                "chosen": default if choice.kept_incumbent else best,
                "kept_default": choice.kept_incumbent,
                "dev_best": best,
                "dev_margin": choice.rows[choice.best]["margin"],
                "dev_over_default": [diff, list(ci)],
            },
            "test": {"questions": len(test.questions), "passages": len(test.ids), "baselines": curves, "arms": arms},
            "on_or_above_frontier": tuned["margin"] >= 0,
            "beats_default": tuned["margin"] > shipped["margin"],
            "dev_best_beats_default": ungated["margin"] > shipped["margin"],
        }
        print(
            f"tune: {name}: dev best {best} ({diff:+.4f} over the default on dev, {ci}; {'kept the default' if choice.kept_incumbent else 'chosen'}); "
            f"test margin {tuned['margin']:+.4f} {tuned['margin_ci95']} vs default {shipped['margin']:+.4f} {shipped['margin_ci95']} "
            f"(dev best {ungated['margin']:+.4f}) at {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
    d = out["datasets"].values()
    out["on_or_above_frontier"] = sum(x["on_or_above_frontier"] for x in d)
    out["beats_default"] = sum(x["beats_default"] for x in d)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def _memory_inputs(convs: Sequence[Any], limit: int | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A split's conversations and questions as ``meve.evaluate.memory`` reads them (the first ``limit`` questions)."""
    conversations = {f"{i}:{c.name}": c.turns for i, c in enumerate(convs)}
    questions = [
        {"conversation": f"{i}:{c.name}", "question": q.text, "evidence_turn_ids": list(q.evidence), "id": q.id}
        for i, c in enumerate(convs)
        for q in c.questions
        if q.evidence
    ]
    return conversations, questions[:limit] if limit is not None else questions


def run_memory(
    data: Path,
    dev_limit: int = 50,
    test_limit: int | None = None,
    names: Sequence[str] = ("locomo", "selqa_chat", "memorybank", "realmem"),
    l_max: int = 512,
    reps: int = 2000,
) -> dict[str, Any]:
    """The memory protocol (module docstring) over ``names``."""
    from benchmarks.harness import conversations as conv
    from benchmarks.harness.common import embedder
    from meve.evaluate.memory import MEMORY_GRID, choose_memory, prepare, tuned_report

    t0 = time.perf_counter()
    loaders = {"locomo": lambda: conv.locomo(data), "selqa_chat": conv.selqa_chat, "memorybank": conv.memorybank, "realmem": conv.realmem}
    out: dict[str, Any] = {"l_max": l_max, "grid_size": len(MEMORY_GRID), "dev_limit": dev_limit, "datasets": {}}
    for name in names:
        splits = loaders[name]()
        dev, counter = prepare(*_memory_inputs(splits["dev"], dev_limit), embedder(), None)
        choice = choose_memory(dev, counter, MEMORY_GRID, l_max, reps=reps)
        test, _ = prepare(*_memory_inputs(splits["test"], test_limit), embedder(), None)
        _, report = tuned_report(test, counter, choice, l_max, reps=reps, dev_questions=len(dev))
        _, ungated = tuned_report(test, counter, dataclasses.replace(choice, setting=choice.best, kept_default=False), l_max, reps=reps, dev_questions=len(dev))
        embedder().save()
        r = report.to_dict()
        r["beats_best_fill"], r["beats_default"] = r["gain"] >= 0, r["gain"] > r["default_gain"]
        r["dev_best_gain"], r["dev_best_gain_ci95"] = ungated.gain, list(ungated.gain_ci95)
        out["datasets"][name] = r
        print(
            f"tune memory: {name}: {r['chosen'] or 'MemoryConfig() kept'} (dev best {r['dev_best']}, {r['dev_over_default']}); "
            f"gain {r['gain']:+.4f} {r['gain_ci95']} vs default {r['default_gain']:+.4f}, {time.perf_counter() - t0:.0f}s",
            flush=True,
        )
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    """A run outside ``benchmarks.run``: small limits for a smoke test; prints the JSON (or writes ``--out``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder holding the data sets (default ../shared/data)")
    parser.add_argument("--limit", type=int, help="dev and test questions per set (default 50 dev, 300 test)")
    parser.add_argument("--sets", default=",".join(CONTEXT_SETS), help="comma-separated context sets")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap draws")
    parser.add_argument("--out", help="write the JSON here")
    parser.add_argument("--memory", action="store_true", help="the memory sets (--sets among locomo, selqa_chat, memorybank, realmem)")
    args = parser.parse_args()
    limits = {"dev_limit": args.limit, "test_limit": args.limit} if args.limit else {}
    go = run_memory if args.memory else run
    sets = args.sets if args.sets != ",".join(CONTEXT_SETS) or not args.memory else "locomo,selqa_chat,memorybank,realmem"
    result = go(data_dir(args.data), names=sets.split(","), reps=args.reps, **limits)
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text)
    print(json.dumps({k: v for k, v in result.items() if k not in ("protocol", "datasets")}, default=str))


if __name__ == "__main__":
    main()
