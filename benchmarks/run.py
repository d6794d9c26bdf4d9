"""meve benchmarks (not in CI): writes benchmarks/results/*.json, PNG plots and BENCHMARKS.md.

    make bench-quick    # python -m benchmarks.run --quick   (small slices; minutes once embeddings are cached)
    make bench          # python -m benchmarks.run --full    (everything; about two hours on 2 CPU cores)
    python -m benchmarks.run --full --data /path/to/data --only context,memory_lodo
    python -m benchmarks.run --full --only context_long   (long-chunk variants: only when named)
    python -m benchmarks.run --full --only long_orderings (orders of long-chunk candidates, dev only: only when named)
    python -m benchmarks.run --full --only tune           (`meve tune` on each context set, issue 50: only when named)
    python -m benchmarks.run --full --only tune_ceiling   (how often a tune on 50 questions can beat the default: only when named)

Data come from ../shared/data by default (hotpotqa/, wikipedia/, locomo/); pass --data elsewhere.
Embeddings are cached under benchmarks/.cache, so no text is embedded twice across runs.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from typing import Any

from benchmarks import report
from benchmarks.harness.common import RESULTS, data_dir, embedder, machine
from benchmarks.harness.data import CONTEXT_SETS, LONG_VARIANTS

SECTIONS = (
    "context",
    "context_long",
    "long_orderings",
    "long_default",
    "long_budget",
    "long_neighbours",
    "long_order",
    "long_depth",
    "long_rerank",
    "read_once",
    "tune",
    "memory_lodo",
    "memory_heldout",
    "memory_late",
    "memory_weights",
    "memory_anchor",
    "memory_ranker",
    "verifier",
    "token_store",
    "int8",
    "query_time",
    "unanswerable",
    "startup",
    "hierarchical",
    "memory_speed",
    "speed",
    "bm25",
    "race",
    "scale",
    "onnx",
    "tune_memory",
    "tune_ceiling",
)
# Run only when named in --only: the context protocol again on three long-chunk variants (hours with --full);
# `meve tune` measured on each context set (issue 50: 50 dev questions each, reported on the test split);
# the ONNX Runtime probe (issue 49: exports MiniLM to a temporary folder); tune's memory half alone (kept beside
# the context half already in tune.json, with its own command and date); the memory held-out check (issue 48:
# a second LongMemEval_S sample, read once; its run must not be repeated to choose anything); how often a
# tuner on 50 dev questions can beat the default, and the ceiling of its grid (issue 50; about 40 minutes); how good
# the verifier's own order is over long chunks, against other orders (issue 52; dev splits only, minutes once cached);
# every default (t_max 512, the cut) over the long-chunk variants' test splits (issue 63), and its MS MARCO rows with
# each query's passages out of BM25 order (a control); recall of a long chunk
# by the depth of its evidence, with and without the later windows' vectors (issue 63 #3); meve's cost over
# 1,024-token nodes against the frameworks' cross-encoder rerankers, same process (issue 63 #4); the late-interaction
# signal for chat memory on dev splits (issue 64 #3); the BM25 weight's trade, and two per-query choices of which
# signal to trust, across the memory sets (dev); each passage read once, at ingestion, in the framework paths,
# timed in new processes (issue 75); the budget rule that keeps the best, chosen leave-one-dataset-out over each set's
# own passages and the two long-chunk variants (issue 77); whether a kept chunk's neighbour joins it, chosen the same way
# over the LlamaIndex and LangChain chunks (issue 77 #2); the learned memory ranker left out set by set on dev splits
# (issue 76: its test step is `python -m benchmarks.memory_ranker --test`, run once).
OPT_IN = (
    "context_long",
    "long_orderings",
    "long_default",
    "long_budget",
    "long_neighbours",
    "long_order",
    "long_depth",
    "long_rerank",
    "read_once",
    "tune",
    "onnx",
    "tune_memory",
    "memory_heldout",
    "memory_late",
    "memory_weights",
    "memory_anchor",
    "memory_ranker",
    "tune_ceiling",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="small slices (default)")
    mode.add_argument("--full", action="store_true", help="every dataset and size")
    parser.add_argument("--data", help="folder holding hotpotqa/, wikipedia/, locomo/ (default ../shared/data)")
    parser.add_argument(
        "--only",
        help="comma-separated sections: " + ",".join(SECTIONS) + " (bm25, race: those parts of speed alone; " + ", ".join(OPT_IN) + ": only when named)",
    )
    parser.add_argument(
        "--race-sizes",
        help="comma-separated corpus sizes for the race (default 1000,10000,100000 with --full); "
        "rows of other sizes already in speed.json are kept, each with its own date",
    )
    parser.add_argument("--long-variants", help="comma-separated context_long variants (default: all); others already saved are kept")
    parser.add_argument("--scale-sizes", help="comma-separated sizes for the scale run (default 10000,100000,1000000 with --full); other rows are kept")
    args = parser.parse_args()
    full = bool(args.full)
    data = data_dir(args.data)
    only = set(args.only.split(",")) if args.only else set(SECTIONS) - set(OPT_IN)
    command = ("make bench" if full else "make bench-quick") + (f" (--only {args.only})" if args.only else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    embedder().inner.encode(["warm up"])  # model load is not part of any timing below

    def save(name: str, payload: dict[str, Any]) -> None:
        payload = {
            **payload,
            "command": command,
            "mode": "full" if full else "quick",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(),
        }
        (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str))
        embedder().save()
        print(f"wrote benchmarks/results/{name}.json", flush=True)

    t0 = time.perf_counter()
    if "context" in only:
        from benchmarks import context

        limit = 300 if full else 40
        save("context", context.add_calibrated(data, context.run(data, dev_limit=200 if full else 40, test_limit=limit), test_limit=limit))
    if "context_long" in only:
        from benchmarks import context_long

        # One variant at a time, each saved as it ends (a full run takes hours on two cores); variants
        # already in context_long.json and not named again are kept, each with its own date.
        kept = json.loads((RESULTS / "context_long.json").read_text()).get("variants", {}) if (RESULTS / "context_long.json").exists() else {}
        for variant in args.long_variants.split(",") if args.long_variants else LONG_VARIANTS:
            one = context_long.run(data, dev_limit=200 if full else 40, test_limit=300 if full else 40, variants=(variant,))
            kept[variant] = {**one["variants"][variant], "elapsed_s": one["elapsed_s"], "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            save("context_long", {**one, "variants": kept, "elapsed_s": round(sum(v.get("elapsed_s", 0) for v in kept.values()), 1)})
    if "long_orderings" in only:
        from benchmarks import long_orderings

        variants = args.long_variants.split(",") if args.long_variants else LONG_VARIANTS
        save("long_orderings", long_orderings.run(data, variants=variants, dev_limit=200 if full else 40))
    if "long_order" in only:
        from benchmarks import long_order

        save("long_order", long_order.run(data, test_limit=300 if full else 40))
    if "long_default" in only:
        from benchmarks import long_default

        save("long_default", long_default.run(data, test_limit=300 if full else 40))
    if "long_budget" in only:
        from benchmarks import long_budget

        variants = args.long_variants.split(",") if args.long_variants else long_budget.VARIANTS
        save("long_budget", long_budget.run(data, dev_limit=100 if full else 20, test_limit=200 if full else 20, variants=variants))
    if "long_neighbours" in only:
        from benchmarks import long_neighbours

        variants = args.long_variants.split(",") if args.long_variants else long_neighbours.VARIANTS
        save("long_neighbours", long_neighbours.run(data, dev_limit=100 if full else 20, test_limit=200 if full else 20, variants=variants))
    if "long_rerank" in only:
        from benchmarks import long_rerank

        save("long_rerank", long_rerank.run(data, n_queries=20 if full else 6))
    if "read_once" in only:
        from benchmarks import read_once

        save("read_once", read_once.run(data, n_queries=20 if full else 6))
    if "long_depth" in only:
        from benchmarks import long_depth

        kept = json.loads((RESULTS / "long_depth.json").read_text()).get("variants", {}) if (RESULTS / "long_depth.json").exists() else {}
        chosen = args.long_variants.split(",") if args.long_variants else long_depth.VARIANTS
        runs = json.loads((RESULTS / "long_depth.json").read_text()).get("runs", {}) if (RESULTS / "long_depth.json").exists() else {}
        one = long_depth.run(data, test_limit=300 if full else 40, variants=chosen)
        when = {"command": command, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "elapsed_s": one["elapsed_s"]}
        save("long_depth", {**one, "variants": {**kept, **one["variants"]}, "runs": {**runs, **dict.fromkeys(chosen, when)}})
    if "tune" in only:
        from benchmarks import tune

        save("tune", {**tune.run(data, dev_limit=50, test_limit=300 if full else 40), "memory": tune.run_memory(data, test_limit=None if full else 40)})
    if "tune_memory" in only and "tune" not in only:
        from benchmarks import tune

        kept = json.loads((RESULTS / "tune.json").read_text())
        memory = tune.run_memory(data, test_limit=None if full else 40)
        memory["command"], memory["date"] = command, datetime.now(timezone.utc).isoformat(timespec="seconds")
        (RESULTS / "tune.json").write_text(json.dumps({**kept, "memory": memory}, indent=2, default=str))
        print("wrote benchmarks/results/tune.json (memory half)", flush=True)
    if "tune_ceiling" in only:
        from benchmarks import tune_ceiling

        started = time.perf_counter()
        sets = tune_ceiling.collect(data, CONTEXT_SETS, dev_limit=200 if full else 40, test_limit=300 if full else 40)
        found = {**tune_ceiling.analyse(sets), "protocol": tune_ceiling.__doc__, "memory": tune_ceiling.analyse_memory(data)}
        save("tune_ceiling", {**found, "elapsed_s": round(time.perf_counter() - started, 1)})
    if "onnx" in only:
        from benchmarks import onnx_probe

        save("onnx", onnx_probe.run(data))
    if "memory_lodo" in only:
        from benchmarks import memory_lodo

        save("memory_lodo", memory_lodo.run(data))
    if "memory_weights" in only:
        from benchmarks import memory_weights

        save("memory_weights", memory_weights.run(data))
    if "memory_anchor" in only:
        from benchmarks import memory_anchor

        save("memory_anchor", memory_anchor.run(data))
    if "memory_ranker" in only:
        from benchmarks import memory_ranker

        save("memory_ranker", memory_ranker.run(data))
    if "memory_late" in only:
        from benchmarks import memory_late

        save("memory_late", memory_late.run(data))
    if "memory_heldout" in only:
        from benchmarks import memory_heldout

        save("memory_heldout", memory_heldout.run())
    if "verifier" in only:
        from benchmarks import verifier

        save("verifier", verifier.run(data, full))
    if "token_store" in only:
        from benchmarks import token_store

        save("token_store", token_store.run(data, dev_limit=200 if full else 40))
    if "int8" in only:
        from benchmarks import int8

        int8_sizes = (
            {"dev_limit": 200, "encode_passages": 2_000, "ingest_passages": 10_000}
            if full
            else {"dev_limit": 40, "encode_passages": 200, "ingest_passages": 1_000}
        )
        save("int8", int8.run(data, **int8_sizes, cli=full))
    if "query_time" in only:
        from benchmarks import query_time

        save("query_time", query_time.run(data, questions=50 if full else 5))
    if "unanswerable" in only:
        from benchmarks import unanswerable

        save("unanswerable", unanswerable.run(data, questions=120 if full else 40))
    if "startup" in only:
        from benchmarks import startup

        save("startup", startup.run(data, repeats=3 if full else 1))
    if "hierarchical" in only:
        from benchmarks import hierarchical

        sizes = [1_000, 10_000, 100_000] if full else [1_000, 10_000]
        save(
            "hierarchical",
            {
                "quality": hierarchical.run(data),  # tuned on dev questions, reported on test questions
                "growth": hierarchical.growth(data, sizes),
                "exact_localisation": hierarchical.exact_localisation(data, sizes),
            },
        )
    if "memory_speed" in only:
        from benchmarks import memory_speed

        save(
            "memory_speed",
            {
                "scaling": memory_speed.memory_scaling([1_000, 10_000, 100_000] if full else [1_000, 10_000]),
                "layout": memory_speed.collection_layout(100_000 if full else 20_000),
                "rss": memory_speed.query_rss(5_000 if full else 1_000, checkpoints=(1_000, 2_500, 5_000) if full else (500, 1_000)),
            },
        )
    if "scale" in only:
        from benchmarks import scale

        sizes_run = tuple(int(x) for x in args.scale_sizes.split(",")) if args.scale_sizes else (scale.SIZES if full else (10_000,))
        result = scale.run(data, sizes_run)
        previous = json.loads((RESULTS / "scale.json").read_text()) if (RESULTS / "scale.json").exists() else {}
        ran = {r["passages"] for r in result["rows"]}
        # Sizes not run this time keep their rows, each with the command and date it was measured with.
        kept = [r for r in previous.get("rows", []) if r["passages"] not in ran]
        for row in result["rows"]:
            row["measured"] = f"{command}, {datetime.now(timezone.utc).date()}"
        result["rows"] = sorted(kept + result["rows"], key=lambda r: r["passages"])
        save("scale", result)
    if "speed" in only or "race" in only or "bm25" in only:
        from benchmarks import speed

        previous = json.loads((RESULTS / "speed.json").read_text()) if (RESULTS / "speed.json").exists() else {}
        # Each part keeps the command (and so the date) it was measured with.
        parts = ("bm25", "verification", "race")
        payload = {k: previous[k] for k in parts if k in previous}
        # Before per-part commands were kept, only the speed section (make bench, --only speed) measured bm25 and verification.
        before = {"bm25": "make bench (--only speed)", "verification": "make bench (--only speed)", "race": previous.get("command")}
        payload.update({f"{k}_command": previous.get(f"{k}_command", before[k]) for k in parts if k in previous})
        # ... and the machine: a part not rerun keeps the CPU it was measured on (save() stamps the file with today's).
        payload.update({f"{k}_machine": previous.get(f"{k}_machine", previous.get("machine")) for k in parts if k in previous})
        here = machine()
        if "speed" in only or "bm25" in only:
            payload["bm25"] = speed.bm25_backends(data, [1_000, 10_000, 100_000] if full else [1_000, 10_000])
            payload["bm25_command"], payload["bm25_machine"] = command, here
        if "speed" in only:
            payload["verification"] = speed.verification_cost(data, n_queries=20 if full else 5)
            payload["verification_command"], payload["verification_machine"] = command, here
        if "speed" in only or "bm25" in only:
            save("speed", payload)  # the race below takes longest: keep what is measured so far
        if "speed" not in only and "race" not in only:
            report.write()
            return
        sizes = [int(x) for x in args.race_sizes.split(",")] if args.race_sizes else ([1_000, 10_000, 100_000] if full else [1_000])
        race = speed.race(data, sizes, n_queries=20 if full else 5)
        for row in race["rows"]:
            row["cpu"] = here.get("cpu")  # rows of other sizes are kept, perhaps from another CPU
        kept = [r for r in payload.get("race", {}).get("rows", []) if r["passages"] not in sizes]
        race["rows"] = sorted(kept + race["rows"], key=lambda r: r["passages"])
        race["not_run"] = sorted(n for n in [1_000, 10_000, 100_000] if n not in {r["passages"] for r in race["rows"]})
        payload["race"] = race
        payload["race_command"], payload["race_machine"] = command, here
        save("speed", payload)
    report.write()
    print(f"done in {time.perf_counter() - t0:.0f}s; BENCHMARKS.md regenerated", flush=True)


if __name__ == "__main__":
    main()
