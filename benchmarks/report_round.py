"""BENCHMARKS.md facts for issue 76's learned memory ranker and latest-exchange cap, and issue 77 #2's neighbours."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.report import RESULTS, _target, table

SETS = {"squad": "SQuAD", "hotpotqa": "HotpotQA", "wikiqa": "WikiQA", "msmarco": "MS MARCO"}


def memory_ranker_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Every setting's left-out dev margin per set and budget, the verdicts of the rule, and the choice."""
    shown = [s for s in d["settings"] if s == "shipped" or s.endswith(("whole", "partners", "in fill"))]
    rows = []
    for n, per_set in d["dev"].items():
        for b, r in per_set.items():
            row: dict[str, Any] = {"set": n, "budget": b, "best fill": f"{r['best_fill']['answerable']:.4f}"}
            for s in shown:
                lo, hi = r[s]["vs_shipped_ci95"]
                row[s] = f"{r[s]['margin']:+.4f}" + ("" if s == "shipped" else f" ({lo:+.3f} to {hi:+.3f})")
            rows.append(row)
    rule = d["rule"]
    target = _target(
        rule["chosen"] != "shipped",
        f"a ranker chosen over the hand rules (target): the rule chose {rule['chosen']} of {rule['settings_tried']} settings.",
    )
    return {"d": d, "rows": table(rows), "verdicts": verdicts_table(rule), "target": target, "recall": d["evidence_among_candidates"]}


def verdicts_table(rule: dict[str, Any]) -> str:
    """Issue 76's rule, as :func:`benchmarks.memory_ranker.choose` gives it: each setting's mean margin and its vetoes."""
    rows = [{"setting": k, "mean margin": f"{v['mean_margin']:+.4f}", "vetoed by": ", ".join(v["vetoed_by"]) or "none"} for k, v in rule["verdicts"].items()]
    return table(rows)


def memory_lean_facts(d: dict[str, Any]) -> dict[str, Any]:
    """The four settings of the latest-exchange rule when nothing earlier is near: dev margins per set and budget
    (only rows where a setting differs from the shipped one), the verdicts, and the choice under the follow-up condition."""
    rows = []
    for n, per_set in d["dev"].items():
        for b, r in per_set.items():
            if all(r[s]["answerable"] == r["shipped"]["answerable"] for s in d["settings"]):
                continue
            row: dict[str, Any] = {"set": n, "budget": b, "best fill": f"{r['best_fill']['answerable']:.4f}"}
            for s in d["settings"]:
                lo, hi = r[s]["vs_shipped_ci95"]
                row[s] = f"{r[s]['margin']:+.4f}" + ("" if s == "shipped" else f" ({lo:+.3f} to {hi:+.3f})")
            rows.append(row)
    unchanged = sum(len(per_set) for per_set in d["dev"].values()) - len(rows)
    probes = []
    for n, per_set in d.get("follow_ups", {}).items():
        for b in ("256", "512", "1024"):
            r = per_set[b]
            if all(r[s] == r["shipped"] for s in d["settings"]):
                continue
            probes.append({"set": n, "budget": b, "probes": per_set["probes"]} | {s: f"{r[s]['coverage']:.3f} ({r[s]['whole']:.2f})" for s in d["settings"]})
    return {"d": d, "rows": table(rows), "verdicts": verdicts_table(d["rule"]), "unchanged": unchanged, "probes": table(probes) if probes else ""}


#: memory_lodo's results before ``cap_turns`` (issue 76), the "before" of the test read of :func:`memory_share_facts`.
BEFORE_CAP = "history/memory_lodo_run19_issue76_before_cap_turns.json"


def memory_share_facts(d: dict[str, Any], lodo: dict[str, Any] | None) -> dict[str, Any]:
    """The four settings of one long turn's share (dev rows, verdicts, probes, as :func:`memory_lean_facts`), the best
    fills with the same cap and the losses the metric cannot credit (dev), and the test read by memory_lodo: the shipped
    arm before and after, per set and budget, against the best fill."""
    out = memory_lean_facts(d)
    capped, lost = [], []
    for n, per_set in d["capped_fills"].items():
        for b, v in per_set.items():
            r = d["dev"][n][b]
            memory, best = r[d["chosen"]]["answerable"], r["best_fill"]["answerable"]
            capped.append({"set": n, "budget": b, "best fill": f"{best:.4f}", "best fill, capped": f"{v:.4f}", "the memory": f"{memory:.4f}"})
            lost.append({"set": n, "budget": b} | {k.replace("_", " "): x for k, x in d["losses"][n][b].items()})
    out |= {"capped": table(capped), "losses": table([r for r in lost if r["lost"] or r["gained"]])}
    before_path = RESULTS / BEFORE_CAP
    if lodo is None or not before_path.exists():
        return out | {"test": ""}
    before, rows = json.loads(before_path.read_text()), []
    for n, per_set in lodo["datasets"].items():
        for b in ("256", "512", "1024"):
            now, was = per_set["test"][b], before["datasets"][n]["test"][b]
            best = max(v["answerable"] for v in now["baselines"].values())
            x, y = was["arms"]["shipped"]["answerable"], now["arms"]["shipped"]["answerable"]
            row = {"set": n, "budget": b, "best fill": f"{best:.4f}", "before": f"{x:.4f} ({x - best:+.4f})", "shipped": f"{y:.4f} ({y - best:+.4f})"}
            rows.append(row | {"change": f"{y - x:+.4f}"})
    return out | {"test": table(rows), "lodo": lodo}


def memory_follow_facts(d: dict[str, Any]) -> dict[str, Any]:
    """The follow-up classifier: each set's left-out AUC and calls beside the hand rule's, and the end-to-end rows
    where it differs from the hand rule (both regimes), with the rule's verdicts."""

    def both(r: dict[str, Any], key: str) -> str:
        return f"{r['classifier'][key]:.2f} / {r['hand_rule'][key]:.2f}"

    sets = [
        {"set": n, "AUC": r["auc"], "questions": r["questions"], "probes": r["probes"]}
        | {f"{k} called follow-ups (classifier / rule)": both(r, f"{k}_called_follow_up") for k in ("probes", "questions")}
        for n, r in d["sets"].items()
    ]
    rows = []
    for regime in ("end_to_end", "end_to_end_permissive"):
        for n, per in d[regime].items():
            for b, r in per.items() if n != "verdict" else ():
                old, new = r["shipped"], r["learned"]
                if old["margin"] == new["margin"] and old["probe_coverage"] == new["probe_coverage"]:
                    continue
                lo, hi = new["vs_shipped_ci95"]
                rows.append(
                    {"fitted on": "other six" if regime == "end_to_end" else "permissive others", "set": n, "budget": b}
                    | {"margin (rule -> classifier)": f"{old['margin']:+.4f} -> {new['margin']:+.4f} ({lo:+.3f} to {hi:+.3f})"}
                    | {"reply coverage (rule -> classifier)": f"{old['probe_coverage']:.3f} -> {new['probe_coverage']:.3f}"}
                )
    verdicts = {r: d[r]["verdict"] for r in ("end_to_end", "end_to_end_permissive")}
    return {"d": d, "sets": table(sets), "rows": table(rows), "verdicts": verdicts}


def memory_paired_facts(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The shipped memory before and after the latest-exchange cap, dev rows that changed, and the mean margins."""
    rows, margins = [], {"before": 0.0, "after": 0.0}
    count = 0
    for n, per_set in before.items():
        for b, old in per_set.items():
            new = after[n][b]
            margins["before"] += old["answerable"] - old["best_fill"]
            margins["after"] += new["answerable"] - new["best_fill"]
            count += 1
            change = f"{new['answerable'] - old['answerable']:+.4f}"
            rows.append({"set": n, "budget": b, "before": f"{old['answerable']:.4f}", "after": f"{new['answerable']:.4f}", "change": change})
    return {"rows": table(rows), "before": f"{margins['before'] / count:+.4f}", "after": f"{margins['after'] / count:+.4f}"}


def long_neighbours_facts(d: dict[str, Any]) -> dict[str, Any]:
    """Per variant, set and budget: off and on on test, the paired difference, the joins; the left-out choices."""
    rows = []
    for variant, sets in d["test"].items():
        for name, t in sets.items():
            for budget, bb in t["budgets"].items():
                a, diff = bb["arms"], bb["on_less_off"]
                rows.append(
                    {
                        "variant": variant,
                        "set": SETS.get(name, name),
                        "budget": budget,
                        "off": f"{a['off']['evidence']:.4f} at {a['off']['tokens']:.0f}, {a['off']['margin']:+.4f}",
                        "on": f"{a['on']['evidence']:.4f} at {a['on']['tokens']:.0f}, {a['on']['margin']:+.4f}",
                        "on less off": f"{diff['mean']:+.4f} ({diff['ci95'][0]:+.4f} to {diff['ci95'][1]:+.4f})",
                        "joins (questions with one)": f"{a['on']['joins']} ({a['on']['joined_rate']:.2f})",
                    }
                )
    means = {n: c["dev_mean_margin"] for n, c in d["choices"].items()}
    choices = {SETS.get(n, n): f"{c['setting']} (off {means[n]['off']:+.4f}, on {means[n]['on']:+.4f})" for n, c in d["choices"].items()}
    return {"d": d, "rows": table(rows), "choices": choices}


def memory_statements_facts(d: dict[str, Any]) -> dict[str, Any]:
    """The user-statement pass (issue 76 #2): the rule's verdicts on dev, and before/shipped on test (read once)."""
    verdicts = [
        {"setting": k, "mean dev margin": f"{v['mean_margin']:+.4f}", "vetoed by": ", ".join(v["vetoed_by"]) or "none"}
        for k, v in d["rule"]["verdicts"].items()
    ]
    rows = []
    for n, per_set in d.get("test", {}).items():
        for b, r in per_set.items():
            before, shipped = r["before"], r["shipped"]
            lo, hi = shipped["vs_before_ci95"]
            change = f"{shipped['answerable'] - before['answerable']:+.4f} ({lo:+.3f} to {hi:+.3f})"
            row = {"set": n, "budget": b, "best fill": f"{r['best_fill']:.4f}", "before": f"{before['answerable']:.4f}"}
            rows.append(row | {"shipped": f"{shipped['answerable']:.4f}", "change": change})
    shipped_dev = d["shipped_on_dev"]["shipped"]["mean_margin"]
    return {"d": d, "verdicts": table(verdicts), "rows": table(rows), "shipped_dev": f"{shipped_dev:+.4f}", "chosen": d["rule"]["chosen"]}


def memory_fresh_facts(d: dict[str, Any]) -> dict[str, Any]:
    """MemoryCode's test split (issue 76 #5): each arm's answerable evidence and margin over the best fill per budget."""
    rows = []
    for b, r in d["budgets"].items():
        row: dict[str, Any] = {"budget": b, "best fill": f"{r['best_fill']:.4f}"}
        for arm in ("before", "shipped", "paper"):
            row[arm] = f"{r[arm]['answerable']:.4f} ({r[arm]['margin']:+.4f})"
        lo, hi = r["shipped"]["vs_before_ci95"]
        rows.append(row | {"shipped - before": f"{r['shipped']['answerable'] - r['before']['answerable']:+.4f} ({lo:+.3f} to {hi:+.3f})"})
    dropped = ", ".join(f"{k.removeprefix('memorycode: ')}: {v}" for k, v in sorted(d["dropped"].items()))
    margins = {b: r["shipped"]["margin"] for b, r in d["budgets"].items()}
    said = "MemoryCode (fresh, test, read once): the shipped memory at or above the best fill at every budget (target): " + ", ".join(
        f"{m:+.4f} at {b}" for b, m in margins.items()
    )
    same = all(r["shipped"]["answerable"] == r["before"]["answerable"] for r in d["budgets"].values())
    return {"d": d, "rows": table(rows), "dropped": dropped, "target": _target(min(margins.values()) >= 0, said + "."), "unchanged": same}


def memory_adapter_facts(d: dict[str, Any]) -> dict[str, Any]:
    """The query adapter (issue 76 #3), left out: the memory and the dense fill with base and adapted query vectors."""
    rows, wins = [], 0
    for n, per_set in d["left_out"].items():
        mean = {k: sum(r[k] for r in per_set.values()) / len(per_set) for k in ("memory_base", "memory_adapter", "dense_base", "dense_adapter")}
        wins += mean["memory_adapter"] > mean["memory_base"]
        for b, r in per_set.items():
            lo, hi = r["ci"]
            memory = f"{r['memory_base']:.4f} -> {r['memory_adapter']:.4f} ({lo:+.3f} to {hi:+.3f})"
            dense = f"{r['dense_base']:.4f} -> {r['dense_adapter']:.4f}"
            rows.append({"left-out set": n, "budget": b, "memory (base -> adapted)": memory, "dense fill": dense})
    said = f"the adapter above the base model on every left-out set (target; shipped only then): {wins} of {len(d['left_out'])}."
    target = _target(wins == len(d["left_out"]), said)
    return {"d": d, "rows": table(rows), "target": target}
