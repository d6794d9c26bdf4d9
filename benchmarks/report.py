"""BENCHMARKS.md, generated from ``benchmarks/results/*.json`` through the templates in
``benchmarks/templates``: this module only computes each section's facts (targets met or
missed and by how much, tables, plots); the words are in the templates.

    python -m benchmarks.report
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TEMPLATES = ROOT / "benchmarks" / "templates"
NAMES = {
    "squad": "SQuAD",
    "hotpotqa": "HotpotQA",
    "wikiqa": "WikiQA",
    "selqa": "SelQA",
    "msmarco": "MS MARCO",
    "covidqa": "COVID-QA",
    "locomo": "LoCoMo",
    "selqa_chat": "SelQA-chat",
    "memorybank": "MemoryBank",
    "realtalk": "REALTALK",
    "realmem": "RealMem",
    "longmemeval": "LongMemEval_S (sample)",
    "beam": "BEAM (100K)",
    "prefeval": "PrefEval (every tenth)",
}
ARMS = {
    "lodo_choice": "MeVe, chosen without this set (LODO)",
    "lodo_choice_calibrated": "MeVe, LODO choice + `meve calibrate` on this corpus",
    "default_in_distribution": "MeVe default (in-distribution: this set's dev split helped choose it)",
    "paper": "MeVe, the paper's untuned phases",
    "no_verification": "LODO choice, verification off",
    "lodo_choice_prune_flipped": "LODO choice, sentence pruning switched the other way",
    "meveconfig_at_start": "MeVeConfig() before this run",
    "memoryconfig_at_start": "MemoryConfig() before this run",
    "shipped": "MemoryConfig() as shipped (not the pick: see above; in-distribution)",
    "default_before_this_run": 'the default 0.2.0 shipped (keep_recent="auto": one recent turn, kept only for a follow-up)',
    "memory_paper": "the Momentary Contexts paper's settings (equal BM25 and vector weights, no dates, no partner turns)",
    "choice_undated": "the LODO choice without dated lines (dates=False; a diagnostic, chosen nowhere)",
}


def load() -> dict[str, Any]:
    """Every results file by name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}


def fmt(value: Any) -> str:
    """A table cell: floats to 4 significant places, dicts and lists compact."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    return "" if value is None else str(value)


def table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str] | None = None) -> str:
    """A markdown table of ``rows`` (columns ``keys``, else every key of every row in order)."""
    if not rows:
        return ""
    cols = list(keys or dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)).replace("|", "/") for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def knobs(setting: Mapping[str, Any]) -> str:
    """A MeVe setting in words, only the knobs that act."""
    s = dict(setting)
    parts = [f"{s['candidates']} candidates", f"tau {s['tau']}"]
    if s.get("cut", "none") != "none":
        parts.append(f"cut {s['cut']}" + (f" {s['cut_ratio']}" if s["cut"] == "ratio" else ""))
    if s.get("coverage"):
        parts.append(f"coverage {s['coverage']} (floor {s['coverage_floor']})")
    parts.append(f"n_min {s['n_min']}")
    parts.append("no pruning" if s.get("prune", "none") == "none" else f"pruning {s['prune_ratio']} (gate {s['prune_gate']})")
    if "theta_redundancy" in s:
        parts.append(f"redundancy theta {s['theta_redundancy']}")
    if s.get("verify") is False:
        parts.append("verification off")
    return ", ".join(parts)


#: Context sets whose left-out figure followed a change made after an earlier run's test figure on that set had
#: been seen (benchmarks/context.py, GRID's comment): met or missed, such a figure is not a clean held-out one.
POST_HOC = {
    "msmarco": "not a clean held-out figure: the redundancy threshold left the grid after this set's earlier test miss (-0.047) was seen",
    "hotpotqa": (
        "not a clean held-out figure: COVID-QA joined and the redundancy threshold left the grid after this set's earlier test miss"
        " (-0.023) was seen; chosen on the other four earlier sets alone, the rule turns coverage off"
    ),
}


def _target(ok: bool, text: str) -> str:
    return f"- {'MET' if ok else 'MISSED'}: {text}"


def context_facts(c: dict[str, Any]) -> dict[str, Any]:
    """Per data set: the test arms against the frontier, and the issue-35/40 targets."""
    sets, targets = [], []
    saving_half = 0
    for name, d in c["datasets"].items():
        test = d["test"]
        arms = test["arms"]
        lodo_arm = arms["lodo_choice"]
        on_frontier = lodo_arm["margin"] >= 0
        saving = lodo_arm.get("token_saving_at_equal_evidence")
        saving_half += bool(saving is not None and saving >= 0.25)
        verdict = f"{lodo_arm['margin']:+.4f} evidence over the best top-k curve at its {lodo_arm['tokens']:.0f} tokens"
        if "margin_ci95" in lodo_arm:
            verdict += f" (95% paired bootstrap interval {_interval(lodo_arm)})"
        if name in POST_HOC:
            verdict += f" ({POST_HOC[name]})"
        targets.append(_target(on_frontier, f"{NAMES[name]} (left out): the LODO choice lies on or above the top-k frontier: {verdict}."))
        curves = test["baselines"]
        rows = [{"system": ARMS.get(k, k), **_arm_row(a)} for k, a in arms.items()]
        rows += [{"system": f"{n} top-{r['k']}", **_arm_row(r)} for n, rs in curves.items() for r in rs if r["k"] in (1, 2, 3, 5, 10)]
        pruned = [a for a in arms.values() if a.get("prune", "none") != "none" and "prune_ms_p50" in a]
        prune_ms = max((a["prune_ms_p50"] for a in pruned), default=None)
        sets.append(
            {
                "name": NAMES[name],
                "key": name,
                "d": d,
                "rows": rows,
                "choice": knobs(d["lodo_choice"]),
                "dev_margins": d["lodo_choice_dev_margins"],
                "prune_ms": prune_ms,
            }
        )
    n = len(c["datasets"])
    targets.append(
        _target(
            saving_half * 2 >= n,
            f"on {saving_half} of {n} sets the LODO choice keeps as much evidence as the frontier with at least 25% fewer tokens (target: at least half).",
        )
    )
    sentence_sets = [k for k in ("squad", "hotpotqa", "wikiqa", "selqa", "covidqa") if k in c["datasets"]]
    below = [
        f"{NAMES[k]} {c['datasets'][k]['test']['arms']['lodo_choice']['margin']:+.4f}"
        for k in sentence_sets
        if c["datasets"][k]["test"]["arms"]["lodo_choice"]["margin"] < 0
    ]
    targets.append(
        _target(
            not below and len(sentence_sets) >= 4,
            f"issue 40: evidence-sentence recall on or above the frontier on all {len(sentence_sets)} sentence-annotated sets ({', '.join(NAMES[k] for k in sentence_sets)})"
            + (f"; below it: {', '.join(below)}." if below else "."),
        )
    )
    return {
        "sets": sets,
        "targets": targets,
        "calibrated": calibrated_facts(c),
        "default": knobs(c["default"]),
        "grid": c["grid"],
        "tried": c["settings_tried"],
        "c": c,
    }


LONG_ARMS = {
    "shipped_default": "MeVe as shipped (MeVeConfig()), t_max three chunks",
    "shipped_default_t_max_as_shipped": "MeVe as shipped, t_max 512 as shipped",
    "lodo_choice": "MeVe, chosen on this variant without this set (LODO)",
    "paper": "MeVe, the paper's untuned phases",
    "shipped_default_no_verification": "MeVe as shipped, verification off",
}


def context_long_facts(c: dict[str, Any]) -> dict[str, Any]:
    """Per long-chunk variant: each set's chunks, the shipped default and the LODO choice against
    the top-k frontier at their own tokens, and the full test rows (arms and top-1..3)."""
    variants = []
    for variant, r in c["variants"].items():
        summary, rows = [], []
        above = 0
        for name, d in r["datasets"].items():
            test = d["test"]
            shipped, chosen = test["arms"]["shipped_default"], test["arms"]["lodo_choice"]
            above += shipped["margin"] >= 0
            summary.append(
                {
                    "set": NAMES[name],
                    "test passages": test["passages"],
                    "mean passage tokens": test.get("passage_tokens_mean"),
                    "shipped: evidence / tokens": f"{shipped['evidence']:.4f} / {shipped['tokens']:.0f}",
                    "shipped: margin (95% interval)": f"{shipped['margin']:+.4f}" + (f" ({_interval(shipped)})" if "margin_ci95" in shipped else ""),
                    "LODO choice: margin": f"{chosen['margin']:+.4f}",
                    "LODO choice": knobs(d["lodo_choice"]),
                }
            )
            rows += [{"set": NAMES[name], "system": LONG_ARMS.get(k, k), **_arm_row(a)} for k, a in test["arms"].items()]
            rows += [{"set": NAMES[name], "system": f"{n} top-{p['k']}", **_arm_row(p)} for n, ps in test["baselines"].items() for p in ps if p["k"] <= 3]
        variants.append(
            {
                "name": variant,
                "t_max": r.get("base", {}).get("t_max"),
                "summary": table(summary),
                "rows": table(rows),
                "above": above,
                "n": len(r["datasets"]),
                "default": knobs(r["default"]),
                "empty_as_shipped": {NAMES[n]: d["test"]["arms"]["shipped_default_t_max_as_shipped"]["empty_rate"] for n, d in r["datasets"].items()},
            }
        )
    tried = max((r["settings_tried"] for r in c["variants"].values()), default=0)
    from benchmarks.harness.data import LONG_VARIANTS

    missing = [v for v in LONG_VARIANTS if v not in c["variants"]]
    return {"variants": variants, "shipped": knobs(c["shipped_default"]), "tried": tried, "c": c, "missing": missing}


def long_orderings_facts(o: dict[str, Any]) -> dict[str, Any]:
    """Per long-chunk variant: each candidate order's margin over the top-k frontier at top-1..3 on
    every dev split, and the orders on or above it everywhere."""
    variants = []
    for variant, found in o["variants"].items():
        rows, everywhere = [], []
        for order in next(iter(found.values()))["orders"]:
            row: dict[str, Any] = {"order": order}
            for name, d in found.items():
                row[NAMES[name]] = " / ".join(f"{p['margin']:+.3f}" for p in d["orders"][order])
            rows.append(row)
            if all(p["margin"] >= 0 for d in found.values() for p in d["orders"][order]):
                everywhere.append(order)
        variants.append({"name": variant, "rows": table(rows), "everywhere": everywhere})
    return {"variants": variants, "o": o}


def long_default_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Per long-chunk variant and set: MeVe with every default at t_max 512 against the top-k frontier."""
    variants, targets = [], []
    for variant, found in d["variants"].items():
        rows = []
        for name, r in found.items():
            for arm, a in r["arms"].items():
                rows.append(
                    {
                        "set": NAMES[name],
                        "arm": arm,
                        "evidence": a["evidence"],
                        "tokens": a["tokens"],
                        "frontier there": a["frontier_at_tokens"],
                        "margin": f"{a['margin']:+.4f}",
                        "interval": _interval(a),
                        "empty": a["empty_rate"],
                        "cut": a["cut_rate"],
                        "best fill at t_max": f"{a['best_fill']} {r['fills'][a['best_fill']]['evidence']:.4f} ({r['fills'][a['best_fill']]['tokens']:.0f} tokens)",
                        "over it": f"{a['over_best_fill']:+.4f}",
                    }
                )
            shipped = r["arms"]["shipped"]
            targets.append(
                _target(
                    shipped["margin"] >= 0 and shipped["over_best_fill"] >= 0 and shipped["empty_rate"] == 0,
                    f"{variant}, {NAMES[name]}, every default (t_max 512): margin {shipped['margin']:+.4f} over the top-k frontier "
                    f"({_interval(shipped)}), {shipped['over_best_fill']:+.4f} over the best fill cut at t_max ({shipped['best_fill']}), "
                    f"empty contexts {shipped['empty_rate']:.4f} (target: both >= 0, no empty context).",
                )
            )
        variants.append({"name": variant, "rows": table(rows), "passage_tokens": {NAMES[n]: r["passage_tokens_mean"] for n, r in found.items()}})
    return {"variants": variants, "targets": targets, "d": d}


def long_order_facts(d: dict[str, Any], ranked: dict[str, Any] | None) -> dict[str, Any]:
    """MS MARCO's long-chunk rows with each query's passages out of BM25 order, beside
    ``long_default``'s (``ranked``) in BM25 order: each arm's and each fill's evidence at t_max."""
    rows = []
    for variant, found in d["variants"].items():
        r = found["msmarco"]
        before = (ranked or {}).get("variants", {}).get(variant, {}).get("msmarco")
        for arm, a in r["arms"].items():
            was = before["arms"][arm] if before else None
            rows.append(
                {
                    "variant": variant,
                    "arm or fill": arm,
                    "evidence, BM25 order": was["evidence"] if was else None,
                    "evidence, out of order": a["evidence"],
                    "tokens": a["tokens"],
                    "over the best fill, BM25 order": f"{was['over_best_fill']:+.4f}" if was else None,
                    "over the best fill, out of order": f"{a['over_best_fill']:+.4f} ({a['best_fill']})",
                }
            )
        for fill, f in r["fills"].items():
            rows.append(
                {
                    "variant": variant,
                    "arm or fill": fill,
                    "evidence, BM25 order": before["fills"][fill]["evidence"] if before else None,
                    "evidence, out of order": f["evidence"],
                    "tokens": f["tokens"],
                }
            )
    shipped = {v: f["msmarco"]["arms"]["shipped"] for v, f in d["variants"].items()}
    fills = {v: max(x["evidence"] for x in f["msmarco"]["fills"].values()) for v, f in d["variants"].items()}
    return {"d": d, "rows": table(rows), "shipped": shipped, "best_fill": fills}


def long_depth_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Per long-chunk variant: recall of a gold chunk by the evidence's depth, with and without windows."""
    variants, targets = [], []
    arms = ("dense", "dense_windows", "bm25", "hybrid", "hybrid_windows")
    for variant, found in d["variants"].items():
        rows = []
        for name, r in found.items():
            groups = sorted((g for g in r["by_depth"] if g != "all"), key=lambda g: int(g.split("-")[0].rstrip("+")))
            for g in [*groups, "all"]:
                b = r["by_depth"][g]
                for k in d["ks"]:
                    rows.append({"set": NAMES[name], "depth (pieces)": g, "questions": b["n"], "k": k, **{a: f"{b[f'{a}@{k}']:.2f}" for a in arms}})
            deep = [b for g, b in r["by_depth"].items() if g not in ("all", "0-254")]
            n = sum(b["n"] for b in deep)
            if n:
                before = sum(b["hybrid@20"] * b["n"] for b in deep) / n
                after = sum(b["hybrid_windows@20"] * b["n"] for b in deep) / n
                dense_before = sum(b["dense@20"] * b["n"] for b in deep) / n
                dense_after = sum(b["dense_windows@20"] * b["n"] for b in deep) / n
                targets.append(
                    _target(
                        after >= before and r["by_depth"]["all"]["hybrid_windows@20"] >= r["by_depth"]["all"]["hybrid@20"],
                        f"{variant}, {NAMES[name]}: evidence past the first window ({n} questions), gold chunk in the first 20 candidates: "
                        f"hybrid {before:.2f} -> {after:.2f} with windows (dense alone {dense_before:.2f} -> {dense_after:.2f}); "
                        f"all questions {r['by_depth']['all']['hybrid@20']:.2f} -> {r['by_depth']['all']['hybrid_windows@20']:.2f} "
                        "(target: no lower, deep or overall).",
                    )
                )
        variants.append(
            {"name": variant, "rows": table(rows), "windows": {NAMES[n]: f"{r['windows']} windows over {r['passages']} chunks" for n, r in found.items()}}
        )
    falls = [
        f"{variant} {NAMES[name]} depth {g} k {k} {arm} {b[f'{arm}@{k}']:.2f} -> {b[f'{arm}_windows@{k}']:.2f} ({b['n']} questions)"
        for variant, found in d["variants"].items()
        for name, r in found.items()
        for g, b in r["by_depth"].items()
        for k in d["ks"]
        for arm in ("dense", "hybrid")
        if b[f"{arm}_windows@{k}"] < b[f"{arm}@{k}"]
    ]
    return {"variants": variants, "targets": targets, "falls": falls, "d": d}


def long_rerank_facts(d: dict[str, Any]) -> dict[str, Any]:
    """meve's postprocessor and compressor against the frameworks' rerankers over 1,024-token nodes."""
    rows = [{"arm": arm, **{k: v for k, v in a.items() if "ratio" not in k}} for arm, a in d["arms"].items()]
    targets = []
    meve = d["arms"]["meve_unseen_nodes"]
    cold = d["arms"]["meve_postprocessor"]
    for base in ("llamaindex_rerank", "langchain_rerank"):
        targets.append(
            _target(
                meve[f"warm_ratio_to_{base}"] <= 2,
                f"meve over {d['k']} default LlamaIndex nodes ({d['node_tokens_mean']:.0f} tokens on average), each query's nodes met first: "
                f"{meve['warm_p50_ms']:.0f} ms p50, {meve[f'warm_ratio_to_{base}']:.2f}x {base} ({d['arms'][base]['warm_p50_ms']:.0f} ms); "
                f"MeVePostprocessor's first query {cold['first_ms']:.0f} ms ({cold[f'first_ratio_to_{base}']:.2f}x, reported, not targeted) "
                "(target: the query over unseen nodes <= 2x).",
            )
        )
    ing = d.get("ingestion")
    if ing:
        targets.append(
            _target(
                ing["ratio"] <= 2,
                f"indexing the {d['nodes']} nodes: MeVe.from_texts {ing['meve_s']:.1f} s, langchain-chroma Chroma.from_texts with the same MiniLM "
                f"{ing['langchain_chroma_s']:.1f} s: {ing['ratio']:.2f}x (target: <= 2x)." + _same_work(ing),
            )
        )
    return {"rows": table(rows), "targets": targets, "d": d}


def read_once_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Issue 75: each passage read once, at ingestion, timed in new processes in both frameworks."""
    names = {
        "llamaindex": ("LlamaIndex", "MeVePostprocessor", "MeVeRetriever(index)"),
        "langchain": ("LangChain", "MeVeCompressor", "MeVeRetriever.from_vectorstore(store)"),
    }
    targets, rows = [], []
    for fw, (label, step, retriever) in names.items():
        x, t = d[fw], d[fw]["targets"]
        b = x["build"]
        targets.append(
            _target(
                max(t["warm_step_ratio_to_rerank"]) <= 0.25,
                f"{label}: {step} over the dense top-{d['k']} takes {t['warm_step_ratio_to_rerank'][0]:.3f}x / {t['warm_step_ratio_to_rerank'][1]:.3f}x "
                "the cross-encoder reranker over the same nodes (p50, fresh process / after a restart; target <= 0.25x).",
            )
        )
        targets.append(
            _target(
                max(t["first_query_over_model_load_ms"]) <= 500 and not any(t["passages_read_at_query_time"]),
                f"{label}: {retriever}'s first query in a new process over the persisted index takes {t['first_query_over_model_load_ms'][0]:.0f} / "
                f"{t['first_query_over_model_load_ms'][1]:.0f} ms beyond the model's load ({x['fresh']['model_load_ms']:.0f} ms); passages the model read "
                f"at query time in those processes: {t['passages_read_at_query_time'][0]} / {t['passages_read_at_query_time'][1]} (targets: <= 500 ms, none).",
            )
        )
        targets.append(
            _target(
                b["ratio_same_work"] <= 1.2,
                f"{label}: indexing {b['passages']} passages through meve's embeddings {b['meve_s']:.1f} s, {b['ratio_same_work']:.2f}x the same model reading "
                f"every window of the same text with nothing kept ({b['same_work_s']:.1f} s; a guard: <= 1.2x); {b['ratio_plain']:.2f}x the same model in a "
                f"plain store ({b['plain_s']:.1f} s), which reads each passage's first 254 word pieces only.",
            )
        )
        for when in ("fresh", "restart"):
            p = x[when]
            for arm, a in p["arms"].items():
                rows.append(
                    {"framework": label, "process": when, "arm": arm, "first_ms": a["first_ms"], "p50_ms": a["p50_ms"], "passages_read": p["passages_read"]}
                )
    return {"targets": targets, "rows": table(rows), "d": d}


def long_budget_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Issue 77 #1: the budget rule chosen leave-one-dataset-out, and its test rows beside 0.6.0's."""
    names = {"squad": "SQuAD", "hotpotqa": "HotpotQA", "wikiqa": "WikiQA", "msmarco": "MS MARCO"}
    rows, targets = [], []
    for variant, sets in d["test"].items():
        for name, t in sets.items():
            a, diff, dev = t["arms"], t["keep_best_less_skip"], d["dev"][variant][name]["arms"]
            choice = d["choices"][name]["rule"]
            rows.append(
                {
                    "variant": variant,
                    "set": names.get(name, name),
                    "dev margin skip / keep_best": f"{dev['skip']['margin']:+.4f} / {dev['keep_best']['margin']:+.4f}",
                    "LODO choice": choice,
                    "skip (0.6.0)": f"{a['skip']['evidence']:.4f} at {a['skip']['tokens']:.0f}, {a['skip']['margin']:+.4f}",
                    "keep_best": f"{a['keep_best']['evidence']:.4f} at {a['keep_best']['tokens']:.0f}, {a['keep_best']['margin']:+.4f}",
                    "keep_best less skip": f"{diff['mean']:+.4f} ({diff['ci95'][0]:+.4f} to {diff['ci95'][1]:+.4f})",
                    "empty / cut (keep_best)": f"{a['keep_best']['empty_rate']:.3f} / {a['keep_best']['cut_rate']:.3f}",
                    "paper": f"{a['paper']['margin']:+.4f}",
                    "no verification": f"{a['no_verification']['margin']:+.4f}",
                }
            )
            if variant == "passages":
                targets.append(
                    _target(
                        diff["ci95"][1] >= 0,
                        f"{names.get(name, name)}, own passages: keep_best less skip {diff['mean']:+.4f} (95% interval {diff['ci95'][0]:+.4f} to "
                        f"{diff['ci95'][1]:+.4f}; target: the interval not wholly below zero, no short-passage row falls).",
                    )
                )
    for name, c in d["choices"].items():
        means = c["dev_mean_margin"]
        targets.append(
            _target(
                c["rule"] == "keep_best",
                f"{names.get(name, name)} left out: the other sets' mean dev margin skip {means['skip']:+.4f}, keep_best {means['keep_best']:+.4f}: "
                f"chose {c['rule']} (target: the new rule chosen).",
            )
        )
    every = {
        r: sum(d["dev"][v][s]["arms"][r]["margin"] for v in d["dev"] for s in d["dev"][v]) / sum(len(x) for x in d["dev"].values())
        for r in ("skip", "keep_best")
    }
    shipped = max(every, key=lambda r: (every[r], r == "skip"))
    return {"d": d, "rows": table(rows), "targets": targets, "all_dev": {r: f"{m:+.4f}" for r, m in every.items()}, "shipped": shipped}


def _same_work(ing: dict[str, Any]) -> str:
    """The ingestion target's context: how much text each arm's model read (a run before the
    same-work arm existed has none of it)."""
    if "pieces_read" not in ing:
        return ""
    read = ing["pieces_read"]
    rate, lc_rate = read["meve"] / ing["meve_s"], read["langchain_chroma"] / ing["langchain_chroma_s"]
    return (
        f" The model reads {read['meve']:,} word pieces in meve's arm and {read['langchain_chroma']:,} in langchain-chroma's "
        f"({read['meve'] / read['langchain_chroma']:.2f}x: MiniLM truncates a node at 254), {rate:,.0f} and {lc_rate:,.0f} pieces/s, "
        f"so within 2x meve could read {2 * ing['langchain_chroma_s'] * rate / read['meve']:.0%} of the text it reads. "
        f"langchain-chroma reading all the text, the nodes split by LangChain's splitter into {ing['chunks_all_text']:,} chunks of at most 254 "
        f"pieces ({read['langchain_chroma_all_text']:,}), takes {ing['langchain_chroma_all_text_s']:.1f} s: meve {ing['ratio_same_work']:.2f}x that (the same work, reported, not targeted)."
    ) + _kept_store(ing)


def _kept_store(ing: dict[str, Any]) -> str:
    if "ratio_kept_store" not in ing:
        return ""
    return (
        f" Keeping the app's store (`Chroma.from_documents`, then `langchain_meve.MeVeRetriever.from_vectorstore` over it, which adds BM25) "
        f"takes {ing['langchain_chroma_then_meve_s']:.1f} s, {ing['ratio_kept_store']:.2f}x: within the target by construction, so not counted as meeting it; "
        "on that path a long node is found by its first window and BM25, and the verifier reads all of it when a query first meets it."
    )


def calibrated_facts(c: dict[str, Any]) -> dict[str, Any]:
    """`meve calibrate` against the fixed LODO choice, per left-out set."""
    rows, targets = [], []
    for name, d in c["datasets"].items():
        arms = d["test"]["arms"]
        cal = arms.get("lodo_choice_calibrated")
        if cal is None:
            continue
        base = arms["lodo_choice"]
        rows.append(
            {
                "left-out set": NAMES[name],
                "calibration": fmt(cal["calibration"]["config"]),
                "pseudo-question recall": cal["calibration"]["pseudo_recall"],
                "evidence (fixed -> calibrated)": f"{base['evidence']:.4f} -> {cal['evidence']:.4f}",
                "tokens (fixed -> calibrated)": f"{base['tokens']:.0f} -> {cal['tokens']:.0f}",
                "margin (fixed -> calibrated)": f"{base['margin']:+.4f} -> {cal['margin']:+.4f}",
            }
        )
        targets.append(
            _target(
                cal["margin"] >= 0,
                f"{NAMES[name]}, `meve calibrate` on the test corpus: margin {cal['margin']:+.4f} over the frontier (fixed default {base['margin']:+.4f}).",
            )
        )
    return {"table": table(rows), "targets": targets, "n": len(rows)}


def _interval(a: Mapping[str, Any]) -> str:
    lo, hi = a["margin_ci95"]
    return f"{lo:+.3f} to {hi:+.3f}"


def _arm_row(a: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("evidence", "all_evidence", "answer", "passages", "tokens", "margin", "token_saving_at_equal_evidence")
    row = {k: a.get(k) for k in keys}
    if "margin_ci95" in a:
        row["margin 95% interval"] = _interval(a)
    return row


def _best_fill(baselines: dict[str, Any], metric: str) -> str:
    return max(baselines, key=lambda k: baselines[k][metric])


HELDOUT_ARMS = {
    "shipped": "MemoryConfig() as shipped",
    "shipped_without_role_cue": "without the role cue",
    "memory_paper": "the paper's settings",
    "default_before_issue_48": "the default before issue 48",
    "default_0_2_0": 'the default 0.2.0 shipped (keep_recent="auto")',
}


def _gain_line(where: str, budget: str, mt: str, t: dict[str, Any], arm: str, best: str, labels: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """One memory table row (every arm, the best fill, ``arm``'s gain over it with its interval) and
    its target line (gain >= 0); ``labels`` names the arms (an arm it lacks keeps its key)."""
    gain = t["gains"][mt]
    interval = f"{gain['ci95'][0]:+.3f} to {gain['ci95'][1]:+.3f}"
    row = {
        "l_max": budget,
        "metric": mt,
        **{labels.get(k, k): a[mt] for k, a in t["arms"].items()},
        "best fill": t["baselines"][best][mt],
        "which fill": best,
        "gain": f"{gain['gain']:+.4f}",
        "95% interval": interval,
    }
    text = f"{where}, {budget} tokens, {mt}: {t['arms'][arm][mt]:.4f} vs {best} fill {t['baselines'][best][mt]:.4f} ({gain['gain']:+.4f}; interval {interval}; target >= 0)."
    return row, _target(gain["gain"] >= 0, text)


def memory_facts(m: dict[str, Any]) -> dict[str, Any]:
    """Per memory set: the LODO choice against the best fill at each budget on both metrics, the
    per-question-type breakdown at 512 tokens, and issue 48's targets (>= 0 at every budget on
    every set; >= +0.03 at 512 tokens on at least half the sets, on the answerable metric and, the
    issue's "the same holds", on the all-evidence metric)."""
    metric = m.get("metric", "evidence")
    metrics = ("answerable", "all_evidence")
    sets, targets = [], []
    wins = dict.fromkeys((metric, "all_evidence"), 0)
    for name, d in m["datasets"].items():
        rows = []
        for budget, t in ((b, t) for b, t in d["test"].items() if b.isdigit()):
            for mt in metrics:
                row, target = _gain_line(f"{NAMES[name]} (left out)", budget, mt, t, "lodo_choice", _best_fill(t["baselines"], mt), ARMS)
                rows.append(row)
                targets.append(target)
            if budget == "512":
                for mt in wins:
                    wins[mt] += t["gains"][mt]["gain"] >= 0.03
        types = {}
        for budget, at in ((b, t) for b, t in d["test"].items() if b.isdigit()):
            best, best_all = _best_fill(at["baselines"], metric), _best_fill(at["baselines"], "all_evidence")
            types[budget] = [
                {
                    "type": cat,
                    "questions": v["questions"],
                    "LODO choice": v["answerable"],
                    f"best fill ({best})": at["baselines"][best]["by_type"].get(cat, {}).get("answerable"),
                    "paper's settings": at["arms"]["memory_paper"]["by_type"].get(cat, {}).get("answerable"),
                    "LODO choice, all evidence": v["all_evidence"],
                    f"best fill on all evidence ({best_all})": at["baselines"][best_all]["by_type"].get(cat, {}).get("all_evidence"),
                }
                for cat, v in at["arms"]["lodo_choice"]["by_type"].items()
            ]
        base = [{"fill": k, **{x: y for x, y in v.items() if x != "by_type"}} for k, v in d["test"]["512"]["baselines"].items()]
        sets.append({"name": NAMES[name], "d": d, "rows": rows, "base": base, "types": types, "choice": d["lodo_choice"]})
    half = (len(m["datasets"]) + 1) // 2
    fresh = [_fresh_row(name, b, m["datasets"][name]["test"][b]) for name in FRESH_SETS if name in m["datasets"] for b in ("256", "512", "1024")]
    for mt, won in wins.items():
        targets.append(_target(won >= half, f"gain >= +0.03 at 512 tokens ({mt}) on {won} of {len(m['datasets'])} sets (target: at least {half})."))
    return {"sets": sets, "targets": targets, "metric": metric, "m": m, "fresh": table(fresh) if fresh else None}


#: The memory sets whose test splits issue 64's fifth run read first (the shipped default was fixed before them).
FRESH_SETS = ("beam", "prefeval")


def _fresh_row(name: str, budget: str, t: Mapping[str, Any]) -> dict[str, Any]:
    """The shipped MemoryConfig() on a fresh set's test split: against the best fill (answerable) and
    against the dense fill on the share of questions with all their evidence (issue 64's target: +0.03)."""
    base, shipped = t["baselines"], t["arms"]["shipped"]
    dense_all = max(base["dense"]["all_evidence"], base["dense, dated for time questions"]["all_evidence"])
    best = _best_fill(base, "answerable")
    return {
        "set": NAMES[name],
        "tokens": budget,
        "shipped, answerable": shipped["answerable"],
        "best fill": f"{base[best]['answerable']} ({best})",
        "margin": round(shipped["answerable"] - base[best]["answerable"], 4),
        "shipped, all evidence": shipped["all_evidence"],
        "dense fill, all evidence": dense_all,
        "over dense (target +0.03)": round(shipped["all_evidence"] - dense_all, 4),
        "the default 0.2.0 shipped": t["arms"]["default_before_this_run"]["answerable"],
        "paper's settings": t["arms"]["memory_paper"]["answerable"],
    }


def memory_late_facts(m: dict[str, Any]) -> dict[str, Any]:
    """Issue 64 #3 on dev: each late-interaction setting's dev margin over the best fill per set and
    budget beside the shipped setting's, and the summary the module's rule reads."""
    arms = list(m["summary"])
    rows = [
        {"set": NAMES[n], "tokens": b, **{a: r["margins"][a]["answerable"] for a in arms}} for n, d in m["datasets"].items() for b, r in d["budgets"].items()
    ]
    summary = [{"setting": a, **m["summary"][a], **({"kept": "(the reference)"} if a == "shipped" else {})} for a in arms]
    return {"m": m, "rows": table(rows), "summary": table(summary)}


def memory_weights_facts(m: dict[str, Any]) -> dict[str, Any]:
    """The BM25 weight's trade on the dev splits, and two per-query choices of which signal to
    trust: each arm's margin over the best fill, per set and budget; how often each choice fires;
    each against the rule it was judged by."""

    def head(arm: str) -> str:
        return f"BM25 weight {arm}" if arm[0].isdigit() else arm

    rows = [{"set": NAMES[n], "tokens": b, **{head(a): r["margins"][a] for a in r["margins"]}} for n, d in m["datasets"].items() for b, r in d.items()]
    fires = [
        {"set": NAMES[n], "names nothing (the weight's arms fire)": f["unnamed"], "the addressee changes the cue": f["addressee"]}
        for n, f in m.get("fires", {}).items()
    ]
    verdicts = [
        {
            "arm": a,
            "rows below the shipped": v["rows_below"],
            "worst change": v["worst"],
            "mean margin": v["mean"],
            "shipped's mean": v["shipped_mean"],
            "kept by the rule": v["kept"],
        }
        for a, v in m.get("verdicts", {}).items()
    ]
    return {"m": m, "rows": table(rows), "fires": table(fires), "verdicts": table(verdicts), "v": m.get("verdicts", {})}


def memory_anchor_facts(m: dict[str, Any]) -> dict[str, Any]:
    """Issue 64 #1: the follow-up probes' reply coverage and the questions' margin per arm (dev), and
    each left-out set's choice on its test split beside the rule off."""

    def cell(r: dict[str, Any], arm: str) -> str:
        return f"{r['follow_ups'][arm]['coverage']:.2f} / {r['margins'][arm]:+.3f}"

    dev = [{"set": NAMES[n], "tokens": b, **{a: cell(d["dev"][b], a) for a in m["arms"]}} for n, d in m["datasets"].items() for b in ("256", "512", "1024")]
    test = []
    for n, d in m["datasets"].items():
        for b in ("256", "512", "1024"):
            r, pick = d["test"][b], d["lodo_choice"]["short"]
            row = {"set": NAMES[n], "tokens": b, "probes": d["test"]["probes"], "chosen without it": pick}
            row |= {"rule off": cell(r, "short None"), "left-out choice": cell(r, f"short {pick}")}
            row |= {"shipped (0.3)": cell(r, "short 0.3"), "always, 0.3": cell(r, "always 0.3")}
            test.append(row | {"dense fill": f"{r['follow_ups']['dense fill']['coverage']:.2f}"})
    return {"m": m, "dev": table(dev), "test": table(test)}


def memory_heldout_facts(h: dict[str, Any]) -> dict[str, Any]:
    """The held-out check (:mod:`benchmarks.memory_heldout`): every arm and the best fill at each
    budget on both metrics, the shipped default's gain with its interval, the per-type breakdown at
    each budget, and the claim it checks (gain >= 0 at every budget, both metrics)."""
    rows, targets = [], []
    for budget, t in h["budgets"].items():
        for mt in ("answerable", "all_evidence"):
            row, target = _gain_line("held out", budget, mt, t, "shipped", t["gains"][mt]["best_fill"], HELDOUT_ARMS)
            rows.append(row)
            targets.append(target)
    types = {}
    for budget, at in h["budgets"].items():
        best, best_all = at["gains"]["answerable"]["best_fill"], at["gains"]["all_evidence"]["best_fill"]
        types[budget] = table(
            [
                {
                    "type": cat,
                    "questions": v["questions"],
                    "MemoryConfig()": v["answerable"],
                    f"best fill ({best})": at["baselines"][best]["by_type"].get(cat, {}).get("answerable"),
                    "without the role cue": at["arms"]["shipped_without_role_cue"]["by_type"].get(cat, {}).get("answerable"),
                    "paper's settings": at["arms"]["memory_paper"]["by_type"].get(cat, {}).get("answerable"),
                    "MemoryConfig(), all evidence": v["all_evidence"],
                    f"best fill on all evidence ({best_all})": at["baselines"][best_all]["by_type"].get(cat, {}).get("all_evidence"),
                }
                for cat, v in at["arms"]["shipped"]["by_type"].items()
            ]
        )
    return {"rows": table(rows), "types": types, "targets": targets, "h": h}


def frontier_plot(c: dict[str, Any]) -> str | None:
    """One panel per data set: the top-k curves on test and the MeVe arms (the README's picture)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the bench extra installs it
        return None
    from meve.evaluate.render import draw_panel

    sets = list(c["datasets"].items())
    fig, axes = plt.subplots(1, len(sets), figsize=(3.2 * len(sets), 3.1), squeeze=False)
    styles = (("lodo_choice", "*", "black"), ("paper", "s", "crimson"), ("meveconfig_at_start", "x", "grey"))
    for ax, (name, d) in zip(axes[0], sets, strict=True):
        arms = d["test"]["arms"]
        marks = {ARMS[key].split(" (")[0]: (arms[key]["tokens"], arms[key]["evidence"], marker, colour) for key, marker, colour in styles if arms.get(key)}
        draw_panel(ax, d["test"]["baselines"], marks)  # the same picture `meve evaluate` draws for a user's corpus
        ax.set_title(NAMES[name], fontsize=9)
    axes[0][0].set_ylabel("evidence kept (by text)", fontsize=8)
    axes[0][-1].legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    out = RESULTS / "frontier.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out.name


def speed_facts(s: dict[str, Any]) -> dict[str, Any]:
    """The race against the issue-38 targets (same-work ratios at every size, overhead at the
    largest), and its tables: builds, latency per arm, same-work ratios, meve's phases."""
    race = s["race"]
    rows = race["rows"]
    if "arms" not in race:  # a race from before the interleaved same-work arms (2026-11-25)
        return {"targets": ["- NOT MEASURED: the same-work race has not been run with this report's arms."], "old": True, "s": s}
    big = rows[-1]
    targets = []
    for group, label in (("ce", "the same cross-encoder"), ("meve_verifier", "meve's default verifier plugged into each framework")):
        mine, *others = race["same_work"][group]
        worst = {r["passages"]: min(r[f"{o}_over_{mine}_p50"] for o in others) for r in rows}
        detail = "; ".join(
            f"{n:,}: " + ", ".join(f"{o.split('_')[0]} {r[f'{o}_over_{mine}_p50']:.2f}x" for o in others) for n, r in zip(worst, rows, strict=True)
        )
        targets.append(_target(min(worst.values()) >= 1.0, f"{label} in every arm, their p50 over meve's ({detail}; target >= 1.0x at every size)."))
    for arm in ("meve_default", "meve_ce"):
        targets.append(
            _target(
                big[f"{arm}_overhead_ms_p50"] <= 5.0,
                f"meve's overhead ({arm}: everything but the verifier's model time and the vector search) at {big['passages']:,} passages: "
                f"{big[f'{arm}_overhead_ms_p50']:.2f} ms p50 (target <= 5 ms).",
            )
        )
    sizes = [r["passages"] for r in rows]
    latency = [
        {"arm": arm, **{f"{n:,} p50 / p95 ms": f"{r[f'{arm}_ms_p50']} / {r[f'{arm}_ms_p95']}" for n, r in zip(sizes, rows, strict=True)}}
        | {f"{n:,} model ms p50": r.get(f"{arm}_model_ms_p50", "") for n, r in zip(sizes, rows, strict=True)}
        for arm in race["arms"]
    ]
    own = [
        {"arm": arm, "passages": r["passages"], "overhead ms p50": r[f"{arm}_overhead_ms_p50"]}
        | {"inside MeVe.run ms p50": r.get(f"{arm}_core_overhead_ms_p50", ""), "vector search ms p50": r[f"{arm}_ann_ms_p50"]}
        | {f"{k} ms p50": v for k, v in r[f"{arm}_phase_ms_p50"].items()}
        for r in rows
        for arm in race["arms"]
        if f"{arm}_overhead_ms_p50" in r
    ]
    build = ["passages", "cpu", "embed_s_uncached_or_cached", *[k for k in rows[-1] if "_build_" in k]]
    return {
        "targets": targets,
        "arms": [f"- `{k}`: {v}" for k, v in race["arms"].items()],
        "build_table": table(rows, build),
        "latency_table": table(latency),
        "ratio_table": table(rows, ["passages", *[k for k in rows[-1] if "_over_" in k]]),
        "own_table": table(own),
        "old": False,
        "s": s,
    }


def scale_facts(sc: dict[str, Any], ts: dict[str, Any] | None) -> dict[str, Any]:
    """The scale run's largest size and the compressed store's AUC cost against issue 38's targets."""
    rows = sc["rows"]
    big = rows[-1]
    n = f"{big['passages']:,}"
    targets = [
        _target(big["replica_rss_gb"] <= 12, f"resident memory of a replica answering over {n} passages: {big['replica_rss_gb']} GB (target <= 12 GB)."),
        _target(
            big["query_ms_p50"] <= 200,
            f"p50 query over {n} passages with the default verifier: {big['query_ms_p50']} ms (target <= 200 ms"
            + ("; under an earlier default: see the Scale section)." if "meve_config" not in sc else ")."),
        ),
        _target(
            big["replica_first_answer_s"] <= 60,
            f"a new replica's first answer over {n} passages: {big['replica_first_answer_s']} s after its process started (target <= 60 s).",
        ),
    ]
    if "from_texts_mb_per_1k_passages" in sc:
        per_1k = sc["from_texts_mb_per_1k_passages"]
        sizes = " and ".join(f"{g['passages']:,}" for g in sc["from_texts_growth"] if g.get("bm25_indexing", True))
        targets.append(
            _target(
                per_1k <= 12,
                f"resident memory growth of `MeVe.from_texts` into a persistent collection: {per_1k} MB per 1k passages ({sizes} passages, fresh processes; 12 GB at 1M needs <= 12).",
            )
        )
    if big["passages"] < 1_000_000:
        targets.append(f"- NOT MEASURED: 1,000,000 passages (the largest size run is {n}).")
    if ts:
        loss = {k: round(v["auc_int8"] - v["auc_pq32"], 4) for k, v in ts["datasets"].items()}
        worst = max(loss.values())
        targets.append(
            _target(
                worst <= 0.01,
                f"AUC lost to 32-byte token vectors on the dev splits: at most {worst:+.4f} ({', '.join(f'{NAMES.get(k, k)} {v:+.4f}' for k, v in loss.items())}; target <= 0.01).",
            )
        )
    flat = [{k: v for k, v in r.items() if not isinstance(v, dict)} | {f"disk_{k}_gb": v for k, v in r["disk_gb"].items()} for r in rows]
    phases = [{"passages": r["passages"], **{f"{k} ms p50": v for k, v in r["phase_ms_p50"].items()}} for r in rows]
    quality = [
        {"data": NAMES.get(k, k), "AUC int8": v["auc_int8"], "AUC pq32": v["auc_pq32"], "pairs": v["pairs"]}
        | {f"{arm} evidence": v[f"default_{arm}"]["evidence"] for arm in ("int8", "pq32")}
        | {f"{arm} tokens": v[f"default_{arm}"]["tokens"] for arm in ("int8", "pq32")}
        for k, v in (ts or {}).get("datasets", {}).items()
    ]
    return {"targets": targets, "table": table(flat), "phases": table(phases), "quality": table(quality) if quality else "", "plot": scale_plot(rows)}


def scale_plot(rows: list[dict[str, Any]]) -> str:
    """Log-log: p50 query, replica start and resident memory against passages."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["passages"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("query_ms_p50", "p50 query (ms)"), ("replica_first_answer_s", "replica first answer (s)"), ("replica_rss_gb", "replica RSS (GB)")):
        ax.loglog(n, [r[key] for r in rows], marker="o", label=label)
    ax.set_xlabel("passages")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    out = ROOT / "benchmarks" / "results" / "scale_loglog.png"
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return "benchmarks/results/" + out.name


def hierarchical_facts(h: dict[str, Any]) -> dict[str, Any]:
    """The hierarchy's test figures against flat retrieval (test rows; ``dev_*`` rows are dev)."""
    res = h["quality"]["results"]["hotpotqa"]
    hier, flat = res["hierarchical"], res["flat_dense"]
    gain = hier["doc_r_precision"] - flat["doc_r_precision"]
    targets = [
        _target(
            gain >= 0.05,
            f"HotpotQA test document R-precision: hierarchical {hier['doc_r_precision']} vs flat {flat['doc_r_precision']} ({gain:+.3f}; target >= +0.05).",
        ),
        _target(
            hier["sent_recall"] >= flat["sent_recall"],
            f"HotpotQA test supporting-sentence recall: hierarchical {hier['sent_recall']} vs flat {flat['sent_recall']} (target >= flat).",
        ),
    ]
    rows = [
        {"data": NAMES.get(n, n), "split": "dev" if sysname.startswith("dev_") else "test", "system": sysname.removeprefix("dev_"), **vals}
        for n, systems in h["quality"]["results"].items()
        for sysname, vals in systems.items()
        if isinstance(vals, dict)
    ]
    return {
        "targets": targets,
        "table": table(rows),
        "growth": table(h["growth"]["rows"]) if h.get("growth") else "",
        "exact": table(h["exact_localisation"]),
        "h": h,
    }


def _model(m: Mapping[str, Any] | None) -> str:
    """A model figure as GFLOP/s and its fraction of this CPU's limit for its precision."""
    if not m:
        return ""
    if "of_float32" in m:
        return f"{m['gflops']} GFLOP/s ({m['of_float32']:.0%} of float32)"
    return f"{m['gflops']} GFLOP/s ({m['of_int8_linear']:.0%} of meve's int8 layer, {m['of_int8_int_mm']:.0%} of the int8 kernel)"


def query_time_facts(q: dict[str, Any] | None, i: dict[str, Any] | None) -> dict[str, Any]:
    """Issue 49: the drop-in path's query time against a plain encode and the frameworks' filters,
    int8's quality and ingestion speed, each model figure against the CPU's limit."""
    targets: list[str] = []
    out: dict[str, Any] = {"q": q, "i": i}
    if q:
        sets = q["datasets"]
        meve = [a for a in next(iter(sets.values())) if a.endswith("_over_plain_encode_p50")]
        for arm in meve:
            got = ", ".join(f"{NAMES[n]} {r[arm]:.2f}x" for n, r in sets.items())
            name = arm.removesuffix("_over_plain_encode_p50")
            targets.append(
                _target(
                    all(r[arm] <= 0.5 for r in sets.values()),
                    f"`{name}` over 20 new candidates, its p50 over a plain float32 encode of them: {got} (target <= 0.5x).",
                )
            )
        for other, mine in q["same_work"].items():
            for m in mine:
                for suffix in ("", "_int8"):
                    key = f"{other}_over_{m}{suffix}_p50"
                    if all(key in r for r in sets.values()):
                        got = ", ".join(f"{NAMES[n]} {r[key]:.2f}x" for n, r in sets.items())
                        targets.append(_target(all(r[key] >= 1.0 for r in sets.values()), f"`{other}` over `{m}{suffix}`, p50: {got} (target >= 1.0x)."))
        arms = [k.removesuffix("_ms_p50") for k in next(iter(sets.values())) if k.endswith("_ms_p50")]
        out["latency"] = table(
            [
                {"arm": a}
                | {f"{NAMES[n]} p50 / p95 ms": f"{r[f'{a}_ms_p50']} / {r[f'{a}_ms_p95']}" for n, r in sets.items()}
                | {f"{NAMES[n]} model": _model(r.get(f"{a}_model")) for n, r in sets.items()}
                for a in arms
            ]
        )
        out["ratios"] = table([{"data": NAMES[n], **{k.removesuffix("_p50"): v for k, v in r.items() if "_over_" in k}} for n, r in sets.items()])
        out["sets"] = table([{"data": NAMES[n], **{k: r[k] for k in ("questions", "candidates_mean", "tokens_mean")}} for n, r in sets.items()])
        out["arms"] = [f"- `{k}`: {v}" for k, v in q["arms"].items()]
    if i:
        quality = i["quality"]
        worst_auc = max(r["auc_lost"] for r in quality.values())
        worst_ev = max(abs(r["evidence_change"]) for r in quality.values())
        lim = i["limits_issue_49"]
        targets.append(_target(worst_auc <= lim["auc_lost"], f"int8: AUC lost on the dev splits at most {worst_auc:+.4f} (target <= {lim['auc_lost']})."))
        targets.append(
            _target(
                worst_ev <= lim["evidence_change"],
                f"int8: the default's evidence changed by at most {worst_ev:.4f} on the dev splits (target <= {lim['evidence_change']}).",
            )
        )
        ing = i["ingestion"]
        ratio = ing["from_texts_int8_over_float32"]
        targets.append(
            _target(
                ratio >= lim["ingestion_speedup"],
                f"ingestion (`from_texts`, {ing['passages']:,} passages): int8 {ing['from_texts_int8']['passages_per_s']} passages/s against float32's "
                f"{ing['from_texts_float32']['passages_per_s']} in the same run, {ratio:.2f}x (target >= {lim['ingestion_speedup']}x, within the quality limits above).",
            )
        )
        out["quality"] = table(
            [
                {"data": NAMES.get(n, n), "AUC float32": r["auc_float32"], "AUC int8": r["auc_int8"], "AUC lost": r["auc_lost"], "pairs": r["pairs"]}
                | {
                    "evidence float32": r["default_float32"]["evidence"],
                    "evidence int8": r["default_int8"]["evidence"],
                    "evidence change": r["evidence_change"],
                }
                | {
                    "tokens float32": r["default_float32"]["tokens"],
                    "tokens int8": r["default_int8"]["tokens"],
                    "dense cosine mean / min": f"{r['dense_cos_mean']} / {r['dense_cos_min']}",
                }
                for n, r in quality.items()
            ]
        )
        enc = i["encode"]
        rows = [
            {"what": f"encode pass, {enc['passages']:,} passages", "precision": p, "passages/s": enc[p]["passages_per_s"], "model": _model(enc[p]["model"])}
            for p in ("float32", "int8")
        ]
        rows += [
            {
                "what": f"`from_texts`, {ing['passages']:,} passages",
                "precision": p,
                "passages/s": ing[f"from_texts_{p}"]["passages_per_s"],
                "model": _model(ing[f"from_texts_{p}"]["model"]),
            }
            for p in ("float32", "int8")
        ]
        rows += [
            {
                "what": f"`meve index`, {ing[f'meve_index_{p}']['chunks']:,} chunks",
                "precision": p,
                "passages/s": ing[f"meve_index_{p}"]["chunks_per_s"],
                "model": "",
            }
            for p in ("float32", "int8")
            if f"meve_index_{p}" in ing
        ]
        out["speed"] = table(rows)
    limit = (q or i or {}).get("limit")
    if limit:
        out["limit"] = limit
        out["limit_table"] = table([{"product": k, **v} for k, v in limit["per_shape"].items()])
    out["targets"] = targets
    return out


def _ci(value: float, ci: Sequence[float]) -> str:
    return f"{value:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"


def tune_facts(t: dict[str, Any]) -> dict[str, Any]:
    """`meve tune` measured (issue 50): per set the dev best on 50 dev questions, whether it
    replaced the default (clearly better on dev), and on test what is written, the dev best and the
    shipped default, each margin with its interval; the issue's two targets."""
    rows = []
    for name, d in t["datasets"].items():
        arms, dev = d["test"]["arms"], d["dev"]
        tuned, default, best = arms["tuned"], arms["default"], arms.get("dev_best", arms["tuned"])
        diff, ci = dev.get("dev_over_default", [None, None])
        rows.append(
            {
                "set": NAMES[name],
                "dev best": knobs(dev.get("dev_best", dev["chosen"])),
                "dev margin": dev["dev_margin"],
                "dev: best minus default [95% CI]": "" if diff is None else _ci(diff, ci),
                "written": "default" if dev.get("kept_default") else "dev best",
                "test: written margin [95% CI]": _ci(tuned["margin"], tuned["margin_ci95"]),
                "written evidence @ tokens": f"{tuned['evidence']:.4f} @ {tuned['tokens']:.0f}",
                "test: dev best margin": f"{best['margin']:+.4f}",
                "test: default margin [95% CI]": _ci(default["margin"], default["margin_ci95"]),
            }
        )
    n = len(rows)
    d = t["datasets"].values()
    ungated = sum(x.get("dev_best_beats_default", x["beats_default"]) for x in d)
    below = sum(x["test"]["arms"].get("dev_best", x["test"]["arms"]["tuned"])["margin"] < x["test"]["arms"]["default"]["margin"] for x in d)
    written_below = sum(x["test"]["arms"]["tuned"]["margin"] < x["test"]["arms"]["default"]["margin"] for x in d)
    targets = [
        _target(
            t["on_or_above_frontier"] >= 5,
            f"the tuned setting lies on or above the test frontier on {t['on_or_above_frontier']} of {n} sets (target: at least 5 of 6).",
        ),
        _target(
            t["beats_default"] >= 3,
            f"it beats the shipped default's test margin on {t['beats_default']} of {n} sets (target: at least 3 of 6) and is below it on {written_below}; "
            f"the dev best taken unchecked beats it on {ungated} and is below it on {below}.",
        ),
    ]
    memory = []
    for name, r in t.get("memory", {}).get("datasets", {}).items():
        diff, ci = r.get("dev_over_default", [None, None])
        memory.append(
            {
                "set": NAMES.get(name, name),
                "dev best": fmt(r.get("dev_best", r["chosen"])),
                "dev: best minus default [95% CI]": "" if diff is None else _ci(diff, ci),
                "written": "MemoryConfig()" if r.get("kept_default") else "dev best",
                "test questions": r["questions"],
                "written: gain over best fill [95% CI]": _ci(r["gain"], r["gain_ci95"]),
                "dev best: gain": f"{r.get('dev_best_gain', r['gain']):+.4f}",
                "default gain [95% CI]": _ci(r["default_gain"], r["default_gain_ci95"]),
                "best fill": r["best_fill"],
            }
        )
    if memory:
        m = t["memory"]["datasets"].values()
        half = (len(memory) + 1) // 2
        targets.append(
            _target(
                sum(r["beats_best_fill"] for r in m) >= len(memory) - 1,
                f"memory at {t['memory']['l_max']} tokens: the tuned setting keeps at least the best fill's evidence on {sum(r['beats_best_fill'] for r in m)} of {len(memory)} sets.",
            )
        )
        unchecked = sum(r.get("dev_best_gain", r["gain"]) > r["default_gain"] for r in m)
        targets.append(
            _target(
                sum(r["beats_default"] for r in m) >= half,
                f"memory: it beats MemoryConfig()'s gain on {sum(r['beats_default'] for r in m)} of {len(memory)} sets (the dev best unchecked: {unchecked}).",
            )
        )
    return {"table": table(rows), "memory_table": table(memory), "targets": targets, "t": t}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _shares(s: Mapping[str, float]) -> str:
    return f"{s['beats']:.2f} / {s['ties']:.2f} / {s['below']:.2f}"


def _ceiling_row(name: str, d: Mapping[str, Any], grid: int, first: Mapping[str, str]) -> dict[str, str]:
    """A set's row of the tune-ceiling tables: ``first`` (its own columns) after the set's name."""
    ceiling = d["ceiling"]
    return {
        "set": NAMES.get(name, name),
        **first,
        "settings above the default on test": f"{d['settings_above_default_on_test']} of {grid}",
        "ceiling: the best on test, over the default [95% CI]": _ci(ceiling["over_default"], ceiling["ci95"]),
        "draws of 50, checked: beats / ties / below": _shares(d["gated_share"]) + ("" if d["draws"] > 1 else " (one draw: every dev question)"),
        "checked: kept the default": f"{d['gated_kept_default']:.2f}" if "gated_kept_default" in d else "",
        "unchecked: beats / ties / below": _shares(d["unchecked_share"]),
    }


def ceiling_facts(c: dict[str, Any]) -> dict[str, Any]:
    """How often a tuner on 50 dev questions beats the default, and its grid's ceiling on test
    (``benchmarks/tune_ceiling.py``, issue 50): a row per set, context and memory."""
    rows = []
    for name, d in c["datasets"].items():
        written = "default" if d["all_dev"]["kept_default"] else knobs(d["all_dev"]["setting"])
        own = {
            "default's test margin": f"{d['default_test_margin']:+.4f}",
            "the first 50 (the tune run's draw): over the default": f"{d['first_50']['over_default']:+.4f}",
            "all dev questions: written, over the default": f"{written}, {d['all_dev']['over_default']:+.4f}",
        }
        rows.append(_ceiling_row(name, d, 48, own))
    memory = [
        _ceiling_row(
            name,
            d,
            18,
            {
                "dev / test questions": f"{d['dev_questions']} / {d['test_questions']}",
                "all dev questions: over the default": ("default kept, " if d["all_dev"]["kept_default"] else "") + f"{d['all_dev']['over_default']:+.4f}",
            },
        )
        for name, d in c.get("memory", {}).get("datasets", {}).items()
    ]
    sets = list(c["datasets"].values())
    rules = [k.removesuffix("_share") for k in sets[0] if k.endswith("_share")]
    words = {"gated": "the dev check (`meve tune`: the 95% interval of the lead above zero)", "unchecked": "unchecked (the dev best)"}
    rule_rows = [
        {
            "rule": words.get(r, f"the dev best when it leads on more than {r.removeprefix('lead_')} of the draws"),
            "expected sets beaten (of 6)": c[f"expected_sets_beaten_{r}"],
            "expected sets below": c[f"expected_sets_below_{r}"],
            "test: mean over the default, per set": ", ".join(f"{d[f'{r}_mean_over_default']:+.4f}" for d in sets),
            "dev holdout: mean over the default": f"{_mean([d[f'{r}_holdout_over_default'] for d in sets if f'{r}_holdout_over_default' in d]):+.4f}",
        }
        for r in rules
    ]
    reading = _ceiling_reading(c, rules)
    lodo = "; ".join(
        f"{NAMES.get(n, n)} {d['lodo_rule']['rule'].replace('lead_', 'lead > ')} ({d['lodo_rule']['test_over_default']:+.4f})"
        for n, d in c["datasets"].items()
        if "lodo_rule" in d
    )
    return {"table": table(rows), "memory_table": table(memory), "rules_table": table(rule_rows), "lodo": lodo, "reading": reading, "c": c}


def _ceiling_reading(c: Mapping[str, Any], rules: Sequence[str]) -> dict[str, Any]:
    """The figures the tune-ceiling section's reading quotes: the sets with little to find (the
    best on test under +0.01, its interval reaching zero), the sets whose test ceiling no rule
    finds on the dev holdouts, the rule closest to three sets, and what the check trades."""
    sets = c["datasets"]
    flat = {n: d for n, d in sets.items() if d["ceiling"]["over_default"] < 0.01 and d["ceiling"]["ci95"][0] <= 0}
    unseen = []
    for n, d in sets.items():
        held = [d[f"{r}_holdout_over_default"] for r in rules if f"{r}_holdout_over_default" in d]
        if held and max(held) <= 0.001 and d["ceiling"]["ci95"][0] > 0:
            unseen.append(
                f"{NAMES.get(n, n)} (dev holdouts {min(held):+.4f} to {max(held):+.4f}; test ceiling {_ci(d['ceiling']['over_default'], d['ceiling']['ci95'])})"
            )
    closest = max(rules, key=lambda r: c[f"expected_sets_beaten_{r}"])
    looser = [_mean([d[f"{r}_holdout_over_default"] for d in sets.values() if f"{r}_holdout_over_default" in d]) for r in rules if r != "gated"]
    return {
        "flat": ", ".join(
            f"{NAMES.get(n, n)} {d['ceiling']['over_default']:+.4f} ({d['settings_above_default_on_test']} of 48 settings above the default)"
            for n, d in flat.items()
        ),
        "flat_count": len(flat),
        "rich": ", ".join(NAMES.get(n, n) for n in sets if n not in flat),
        "unseen": "; ".join(unseen) or "none",
        "closest": f"{closest} ({c[f'expected_sets_beaten_{closest}']} sets, below the default on {c[f'expected_sets_below_{closest}']})",
        "trade": f"{c['expected_sets_beaten_unchecked'] - c['expected_sets_beaten_gated']:.2f} expected wins for "
        f"{c['expected_sets_below_unchecked'] - c['expected_sets_below_gated']:.2f} fewer expected losses",
        "looser": f"{min(looser):+.4f} to {max(looser):+.4f}",
        "gated": f"{_mean([d['gated_holdout_over_default'] for d in sets.values() if 'gated_holdout_over_default' in d]):+.4f}",
    }


def environment() -> Any:
    """The templates' Jinja environment: strict (a missing fact is an error, not an empty string)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(table=table, fmt=fmt, knobs=knobs)
    return env


def write() -> Path:
    """Render BENCHMARKS.md from the results files."""
    res = load()
    env = environment()
    facts: dict[str, Any] = {"res": res, "names": NAMES, "arms": ARMS}
    if "context" in res:
        facts["context"] = context_facts(res["context"])
        facts["frontier_png"] = frontier_plot(res["context"])
    facts["context_long"] = context_long_facts(res["context_long"]) if "context_long" in res else None
    facts["long_orderings"] = long_orderings_facts(res["long_orderings"]) if "long_orderings" in res else None
    facts["long_default"] = long_default_facts(res["long_default"]) if "long_default" in res else None
    facts["long_order"] = long_order_facts(res["long_order"], res.get("long_default")) if "long_order" in res else None
    facts["long_depth"] = long_depth_facts(res["long_depth"]) if "long_depth" in res else None
    facts["long_rerank"] = long_rerank_facts(res["long_rerank"]) if "long_rerank" in res else None
    facts["read_once"] = read_once_facts(res["read_once"]) if "read_once" in res else None
    facts["long_budget"] = long_budget_facts(res["long_budget"]) if "long_budget" in res else None
    facts["tune"] = tune_facts(res["tune"]) if "tune" in res else None
    facts["ceiling"] = ceiling_facts(res["tune_ceiling"]) if "tune_ceiling" in res else None
    if "memory_lodo" in res:
        facts["memory"] = memory_facts(res["memory_lodo"])
    facts["memory_heldout"] = memory_heldout_facts(res["memory_heldout"]) if "memory_heldout" in res else None
    facts["memory_late"] = memory_late_facts(res["memory_late"]) if "memory_late" in res else None
    facts["memory_weights"] = memory_weights_facts(res["memory_weights"]) if "memory_weights" in res else None
    facts["memory_anchor"] = memory_anchor_facts(res["memory_anchor"]) if "memory_anchor" in res else None
    from benchmarks import report_round  # it reads this module's helpers

    facts["memory_ranker"] = report_round.memory_ranker_facts(res["memory_ranker"]) if "memory_ranker" in res else None
    statements = res.get("memory_statements_test") or res.get("memory_statements")
    facts["memory_statements"] = report_round.memory_statements_facts(statements) if statements else None
    facts["memory_follow"] = report_round.memory_follow_facts(res["memory_follow"]) if "memory_follow" in res else None
    facts["memory_lean"] = report_round.memory_lean_facts(res["memory_lean"]) if "memory_lean" in res else None
    facts["memory_share"] = report_round.memory_share_facts(res["memory_share"], res.get("memory_lodo")) if "memory_share" in res else None
    facts["memory_adapter"] = report_round.memory_adapter_facts(res["memory_adapter"]) if "memory_adapter" in res else None
    facts["memory_fresh"] = report_round.memory_fresh_facts(res["memory_statements_fresh"]) if "memory_statements_fresh" in res else None
    paired = ("memory_paired_before", "memory_paired_after")
    facts["memory_paired"] = report_round.memory_paired_facts(*(res[k] for k in paired)) if all(k in res for k in paired) else None
    facts["long_neighbours"] = report_round.long_neighbours_facts(res["long_neighbours"]) if "long_neighbours" in res else None
    if "speed" in res:
        facts["speed"] = speed_facts(res["speed"])
    if "hierarchical" in res:
        facts["hierarchical"] = hierarchical_facts(res["hierarchical"])
    facts["scale"] = scale_facts(res["scale"], res.get("token_store")) if "scale" in res else None
    facts["query_time"] = query_time_facts(res.get("query_time"), res.get("int8")) if "query_time" in res or "int8" in res else None
    first = [res["context"]] if "context" in res else []
    machine: dict[str, Any] = next((r["machine"] for r in [*first, *res.values()] if "machine" in r), {})
    facts["machine"] = machine
    out = ROOT / "BENCHMARKS.md"
    out.write_text(env.get_template("BENCHMARKS.md.j2").render(**facts))
    return out


if __name__ == "__main__":
    print(f"wrote {write()}")
