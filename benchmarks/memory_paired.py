"""The shipped chat memory (``MemoryConfig()``) before and after a change, question by question, on the dev splits.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

Run once in each checkout (the code on ``PYTHONPATH`` is what is measured), then compare:

    python -m benchmarks.memory_paired rows OUT.json           # in the checkout before, then after
    python -m benchmarks.memory_paired compare BEFORE.json AFTER.json

Each row is memory_lodo's metric (answerable evidence on the rendered text) for the seven sets'
dev splits at 256, 512 and 1,024 tokens, with the best plain fill beside it; ``compare`` prints each
row's paired difference with its bootstrap 95% interval (questions resampled) and the mean margin
over the best fill before and after. Dev splits only: nothing here reads a test split.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks import memory_ranker as mr
from benchmarks.harness.common import data_dir
from benchmarks.harness.lodo import gain_interval


def rows(data: Path) -> dict[str, Any]:
    """Every set's dev rows for the shipped selection of the code on the path."""
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    out: dict[str, Any] = {}
    for n, s in sets.items():
        p = mr.prepare(s["dev"])
        out[n] = {}
        for b in ml.BUDGETS:
            per: dict[str, list[float]] = {}
            got = ml.score(p.replays, p.qvecs, ml.setting({}, b), per)
            base = ml.baselines(p.replays, p.qvecs, b, p.stem, {})
            best = max(x[ml.METRIC] for x in base.values())
            out[n][str(b)] = {"answerable": got[ml.METRIC], "tokens": got["tokens"], "best_fill": best, "per_question": per[ml.METRIC]}
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per row (after less before, its 95% interval, tokens), then the mean margins."""
    lines: list[str] = []
    margins: dict[str, list[float]] = {"before": [], "after": []}
    for n, per_set in before.items():
        for b, old in per_set.items():
            new = after[n][b]
            lo, hi = gain_interval(new["per_question"], {"before": old["per_question"]})
            diff = new["answerable"] - old["answerable"]
            tokens = f"tokens {old['tokens']:.0f} -> {new['tokens']:.0f}"
            lines.append(f"{n} {b}: {old['answerable']:.4f} -> {new['answerable']:.4f} ({diff:+.4f}, {lo:+.4f} to {hi:+.4f}); {tokens}")
            margins["before"].append(old["answerable"] - old["best_fill"])
            margins["after"].append(new["answerable"] - new["best_fill"])
    lines.append(f"mean margin over the best fill: before {np.mean(margins['before']):+.4f}, after {np.mean(margins['after']):+.4f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    """``rows OUT`` or ``compare BEFORE AFTER``."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows", help="the shipped selection's dev rows for the code on the path")
    r.add_argument("out", type=Path)
    r.add_argument("--data", help="folder holding locomo/ (default ../shared/data)")
    c = sub.add_parser("compare", help="paired differences of two rows files")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "rows":
        args.out.write_text(json.dumps(rows(data_dir(args.data))))
        print(f"wrote {args.out}")
    else:
        print("\n".join(compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))))


if __name__ == "__main__":
    main()
