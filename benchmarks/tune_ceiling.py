"""How often can `meve tune`, given 50 of a set's dev questions, beat the shipped default on its test split?
(issue 50's target: on at least three of the six context sets, and half the memory sets).

One run of ``benchmarks/tune.py`` answers for one draw of 50 dev questions. This study measures the
chance behind that answer, with the same choice (:func:`meve.evaluate.frontier.choose` and the same
gate) on many draws, and the ceiling any choice from the grid could reach:

1. For each context set: every one of the 48 settings of :data:`meve.evaluate.tune.GRID` and every
   top-k point, per question, on all of the set's dev questions (200) and its first 300 test
   questions (the registry's splits, as ``benchmarks/tune.py`` runs them).
2. **Ceiling**: the best setting on the test split itself (chosen on test, so no tuner can do
   better with this grid) and its test margin minus the default's, with a paired bootstrap interval.
3. **More questions**: the choice made on all 200 dev questions, with the gate, and its test margin
   minus the default's.
4. **The chance**: ``draws`` random draws of 50 of the 200 dev questions (seeded); on each, the
   gated choice (the library's rule: the same tie rule, reference tokens, bootstrap seed and 2,000
   draws; the study's means are not rounded to 4 places as the library's rows are, which can only
   matter at the edge of the 0.002 tie window) and the unchecked dev best; the share of draws whose
   choice beats the default's test margin, ties it (the default kept, or a setting with the same
   margin) or loses to it, and the share that kept the default. The sum over the six sets of the
   share that beats is the expected number of sets a tuner on 50 questions beats the default on:
   the target asks for three. Rules between the two (the dev best when it leads the default on
   more than 0.5, 0.75 or 0.9 of the bootstrap draws) are measured on the same draws, on test and
   on the dev questions outside each draw (a choice of rule that sees no test question).

Memory (:func:`analyse_memory`): the same on each memory set at 512 tokens over
:data:`meve.evaluate.memory.MEMORY_GRID` (18 settings), evidence kept (the tune benchmark's metric),
the default being ``MemoryConfig()``; a set with at most 50 dev questions has one draw (all of them).

Nothing here chooses anything that ships; it measures a procedure. The context half's per-question
scores are cached in ``benchmarks/.cache/tune_ceiling/`` (named by the grid's hash; a rerun redoes
the analysis); the memory half replays every time (minutes).

    python -m benchmarks.run --full --only tune_ceiling              # benchmarks/results/tune_ceiling.json
    python -m benchmarks.tune_ceiling --sets wikiqa --draws 20       # a look, printed (nothing saved)
    python -m benchmarks.tune_ceiling --memory --draws 20
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import data_dir
from benchmarks.harness.data import CONTEXT_SETS
from meve.evaluate import frontier
from meve.evaluate.tune import GRID, shipped_default

__all__ = ["analyse", "analyse_memory", "collect", "main"]

CACHE = Path(__file__).parent / ".cache" / "tune_ceiling"
#: cached scores belong to one grid: a changed grid is scored again, never read against the old one
GRID_TAG = hashlib.sha256(json.dumps(GRID, sort_keys=True).encode()).hexdigest()[:8]
Split = dict[str, Any]  # {"arms": (settings, n, 2), "points": {ranking: [(k, (n, 2))]}}


def _save(path: Path, split: Split) -> None:
    from meve.core.durable import write_atomically

    arrays = {"arms": np.asarray(split["arms"], dtype=np.float64)}
    for name, rows in split["points"].items():
        for k, q in rows:
            arrays[f"pt|{name}|{k}"] = np.asarray(q, dtype=np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def _load(path: Path) -> Split:
    with np.load(path) as z:
        points: dict[str, list[tuple[int, np.ndarray]]] = {}
        for key in sorted(k for k in z.files if k.startswith("pt|")):
            _, name, k = key.split("|")
            points.setdefault(name, []).append((int(k), z[key]))
        for rows in points.values():
            rows.sort(key=lambda r: r[0])
        return {"arms": z["arms"], "points": points}


def collect(data: Path, names: Sequence[str], dev_limit: int = 200, test_limit: int = 300) -> dict[str, dict[str, Split]]:
    """Step 1: per set and split, every grid setting's and every top-k point's per-question (evidence, tokens)."""
    from benchmarks.context import load_sets
    from benchmarks.harness.common import default_verifier
    from benchmarks.harness.corpus import Corpus
    from meve.evaluate.report import Points, measure_arm, measure_curves

    out: dict[str, dict[str, Split]] = {}
    limits = {"dev": dev_limit, "test": test_limit}
    todo = [n for n in names if not all((CACHE / f"{n}-{s}-{limits[s]}-{GRID_TAG}.npz").exists() for s in limits)]
    if todo:
        li, disk = default_verifier()
        sets = load_sets(data, dev_limit, test_limit, todo)
    t0 = time.perf_counter()
    for name in names:
        out[name] = {}
        for split in ("dev", "test"):
            path = CACHE / f"{name}-{split}-{limits[split]}-{GRID_TAG}.npz"
            if not path.exists():
                part = sets[name].splits[split]
                corpus = Corpus(f"{name}-{split}", part.ids, part.texts, li)
                counter = corpus.meve.token_counter
                points: Points = {}
                measure_curves(corpus, part.questions, counter, points=points)
                arms = [measure_arm(corpus, part.questions, counter, s)[1] for s in GRID]
                corpus.close()
                disk.save(li.cache)
                _save(path, {"arms": arms, "points": points})
                print(f"tune_ceiling: {name} {split} collected ({len(part.questions)} questions) at {time.perf_counter() - t0:.0f}s", flush=True)
            out[name][split] = _load(path)
    return out


def _curves(points: Mapping[str, Sequence[tuple[int, np.ndarray]]], idx: np.ndarray) -> dict[str, list[dict[str, float]]]:
    return {name: [{"k": k, "evidence": float(q[idx, 0].mean()), "tokens": float(q[idx, 1].mean())} for k, q in rows] for name, rows in points.items()}


def _margins(split: Split, idx: np.ndarray) -> tuple[np.ndarray, dict[str, list[dict[str, float]]]]:
    curves = _curves(split["points"], idx)
    means = split["arms"][:, idx, :].mean(axis=1)
    return np.array([frontier.margin({"evidence": e, "tokens": t}, curves) for e, t in means]), curves


#: Lead shares between "unchecked" and the gate: the dev best is taken when its dev margin beats the
#: default's on more than this share of bootstrap draws (the gate of `meve tune` asks ~0.975).
LEVELS = (0.5, 0.75, 0.9)


def _choose(split: Split, idx: np.ndarray, default: int, reps: int) -> dict[str, int]:
    """Each rule's pick on the questions ``idx``: "gated" (what ``choose_setting`` does: the dev
    best when the paired bootstrap 95% interval of its lead lies above zero), "unchecked" (the dev
    best) and "lead L" for each of LEVELS (the dev best when it leads on more than L of the draws)."""
    from meve.evaluate.report import reference_tokens

    curves = _curves(split["points"], idx)
    means = split["arms"][:, idx, :].mean(axis=1)
    rows = [{"dev": {"evidence": float(e), "tokens": float(t)}} for e, t in means]
    best = frontier.choose(rows, {"dev": curves}, {"dev": reference_tokens(curves)})
    if best == default:
        return {"gated": default, "unchecked": best, **{f"lead_{c}": default for c in LEVELS}}
    points = {name: [(k, q[idx]) for k, q in pts] for name, pts in split["points"].items()}
    lead = frontier.difference_draws(split["arms"][best, idx], split["arms"][default, idx], points, reps=reps)  # one bootstrap serves every rule
    gated = best if np.quantile(lead, 0.025) > 0 else default
    return {"gated": gated, "unchecked": best, **{f"lead_{c}": best if (lead > 0).mean() > c else default for c in LEVELS}}


def _outcome(diff: float) -> str:
    return "beats" if diff > 1e-9 else "below" if diff < -1e-9 else "ties"


Choose = Callable[[np.ndarray], dict[str, int]]
Holdout = Callable[[np.ndarray], np.ndarray]


def _draws(
    choose: Choose, over: np.ndarray, n_dev: int, dev_size: int, draws: int, rng: np.random.Generator, default: int, holdout: Holdout | None = None
) -> dict[str, Any]:
    """Step 4 on one set: ``choose(idx)`` gives each rule's pick on dev questions ``idx`` (``default``:
    the pick that keeps the default), ``over[pick]`` that pick's test figure minus the default's, and ``holdout(idx)`` (when given)
    every setting's figure minus the default's on the dev questions outside ``idx``; a set with at
    most ``dev_size`` dev questions has one draw, all of them."""
    n_draws = 1 if n_dev <= dev_size else draws
    gains: dict[str, list[float]] = {}
    held: dict[str, list[float]] = {}
    kept: dict[str, int] = {}
    for _ in range(n_draws):
        idx = np.arange(n_dev) if n_dev <= dev_size else rng.choice(n_dev, dev_size, replace=False)
        rest = holdout(idx) if holdout is not None and n_dev > dev_size else None
        for label, pick in choose(idx).items():
            gains.setdefault(label, []).append(float(over[pick]))
            kept[label] = kept.get(label, 0) + (pick == default)
            if rest is not None:
                held.setdefault(label, []).append(float(rest[pick]))
    out: dict[str, Any] = {"draws": n_draws}
    for label, g in gains.items():
        outcomes = [_outcome(x) for x in g]
        out[f"{label}_share"] = {k: round(outcomes.count(k) / n_draws, 3) for k in ("beats", "ties", "below")}
        out[f"{label}_mean_over_default"] = round(float(np.mean(g)), 4)
        out[f"{label}_kept_default"] = round(kept[label] / n_draws, 3)
        if label in held:
            out[f"{label}_holdout_over_default"] = round(float(np.mean(held[label])), 4)
    return out


def _holdout(split: Split, default: int, idx: np.ndarray) -> np.ndarray:
    """Every setting's margin minus the default's on the dev questions outside ``idx``."""
    margins, _ = _margins(split, np.setdiff1d(np.arange(split["arms"].shape[1]), idx))
    return margins - margins[default]


def _lodo_rule(out: dict[str, Any]) -> dict[str, Any]:
    """The rule a dev-only choice would take for each set: the best mean margin over the default on
    the other sets' dev holdouts (the dev questions outside each draw), and its test figures there."""
    sets = out["datasets"]
    rules = [k.removesuffix("_holdout_over_default") for k in next(iter(sets.values())) if k.endswith("_holdout_over_default")]
    if not rules:  # no set had more dev questions than a draw: nothing held out to choose a rule on
        return out
    for name, d in sets.items():
        others = [n for n in sets if n != name and f"{rules[0]}_holdout_over_default" in sets[n]]
        if not others:
            continue
        rule = max(rules, key=lambda r: float(np.mean([sets[n][f"{r}_holdout_over_default"] for n in others])))
        d["lodo_rule"] = {"rule": rule, "test_over_default": d[f"{rule}_mean_over_default"], "share": d[f"{rule}_share"]}
    return out


def _expected(out: dict[str, Any], tag: str) -> dict[str, Any]:
    """The sums over the sets of the shares that beat and fall below the default."""
    for name, d in out["datasets"].items():
        print(f"tune_ceiling{tag}: {name}: ceiling {d['ceiling']['over_default']:+.4f} {d['ceiling']['ci95']}; gated {d['gated_share']}", flush=True)
    labels = [k.removesuffix("_share") for k in next(iter(out["datasets"].values())) if k.endswith("_share")]
    for label in labels:
        for outcome, key in (("beats", "beaten"), ("below", "below")):
            out[f"expected_sets_{key}_{label}"] = round(sum(d[f"{label}_share"][outcome] for d in out["datasets"].values()), 2)
    return out


def analyse(per_set: Mapping[str, Mapping[str, Split]], dev_size: int = 50, draws: int = 200, reps: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Steps 2-4 (module docstring)."""
    default = next(i for i, s in enumerate(GRID) if s == shipped_default())
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"dev_size": dev_size, "draws": draws, "reps": reps, "datasets": {}}
    for name, splits in per_set.items():
        dev, test = splits["dev"], splits["test"]
        n_dev, n_test = dev["arms"].shape[1], test["arms"].shape[1]
        test_margins, _ = _margins(test, np.arange(n_test))
        over = test_margins - test_margins[default]
        oracle = int(np.argmax(test_margins))
        oracle_ci = frontier.difference_interval(test["arms"][oracle], test["arms"][default], {k: list(v) for k, v in test["points"].items()}, reps=2000)
        all_dev = _choose(dev, np.arange(n_dev), default, reps)["gated"]
        first = _choose(dev, np.arange(min(dev_size, n_dev)), default, reps)  # benchmarks/tune.py's draw
        out["datasets"][name] = {
            "dev_questions": n_dev,
            "test_questions": n_test,
            "default_test_margin": round(float(test_margins[default]), 4),
            "settings_above_default_on_test": int((over > 1e-9).sum()),
            "ceiling": {"setting": GRID[oracle], "over_default": round(float(over[oracle]), 4), "ci95": [round(x, 4) for x in oracle_ci]},
            "all_dev": {"setting": GRID[all_dev], "kept_default": all_dev == default, "over_default": round(float(over[all_dev]), 4)},
            "first_50": {"written": GRID[first["gated"]], "dev_best": GRID[first["unchecked"]], "over_default": round(float(over[first["gated"]]), 4)},
            **_draws(
                functools.partial(_choose, dev, default=default, reps=reps),
                over,
                n_dev,
                dev_size,
                draws,
                rng,
                default,
                functools.partial(_holdout, dev, default),
            ),
        }
    return _lodo_rule(_expected(out, ""))


def _memory_evidence(data: Path, name: str, l_max: int) -> dict[str, np.ndarray]:
    """Per split: (18 grid settings + MemoryConfig(), questions) evidence kept at ``l_max``."""
    from benchmarks.harness import conversations as conv
    from benchmarks.harness.common import embedder
    from benchmarks.tune import _memory_inputs
    from meve.core.config import MemoryConfig
    from meve.evaluate.memory import MEMORY_GRID, _arms, prepare

    loaders = {"locomo": lambda: conv.locomo(data), "selqa_chat": conv.selqa_chat, "memorybank": conv.memorybank, "realmem": conv.realmem}
    splits = loaders[name]()
    configs = {str(i): MemoryConfig(l_max=l_max, **s) for i, s in enumerate(MEMORY_GRID)} | {"default": MemoryConfig(l_max=l_max)}
    out = {}
    for split in ("dev", "test"):
        prepared, counter = prepare(*_memory_inputs(splits[split], None), embedder(), None)
        # The library's own replay of each config (meve.evaluate.memory), as `meve tune` runs it.
        per = _arms(prepared, counter, configs, l_max)
        out[split] = np.array([[r[0] for r in per[c]] for c in configs])
    embedder().save()
    return out


def _memory_choose(dev: np.ndarray, idx: np.ndarray, reps: int = 2000) -> dict[str, int]:
    """``choose_memory``'s rule (:func:`meve.evaluate.memory.pick_by_evidence`) on dev questions
    ``idx`` (rows: the grid, then the default): the gated pick (the default's row when kept) and
    the unchecked one."""
    from meve.evaluate.memory import pick_by_evidence

    best, _, kept = pick_by_evidence(dev[:-1, idx].tolist(), dev[-1, idx].tolist(), reps=reps)
    return {"gated": len(dev) - 1 if kept else best, "unchecked": best}


def analyse_memory(
    data: Path, names: Sequence[str] = ("locomo", "selqa_chat", "memorybank", "realmem"), l_max: int = 512, dev_size: int = 50, draws: int = 200, seed: int = 0
) -> dict[str, Any]:
    """The memory half (module docstring)."""
    from meve.evaluate.frontier import gain_interval
    from meve.evaluate.memory import MEMORY_GRID

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"l_max": l_max, "dev_size": dev_size, "draws": draws, "datasets": {}}
    for name in names:
        ev = _memory_evidence(data, name, l_max)
        dev, test = ev["dev"], ev["test"]
        over = test.mean(axis=1) - test[-1].mean()  # the last row, the default's: 0
        oracle = int(np.argmax(over[:-1]))
        all_dev = _memory_choose(dev, np.arange(dev.shape[1]))["gated"]
        out["datasets"][name] = {
            "dev_questions": dev.shape[1],
            "test_questions": test.shape[1],
            "settings_above_default_on_test": int((over > 1e-9).sum()),
            "ceiling": {
                "setting": MEMORY_GRID[oracle],
                "over_default": round(float(over[oracle]), 4),
                "ci95": [round(x, 4) for x in gain_interval(test[oracle], {"d": test[-1]})],
            },
            "all_dev": {"kept_default": all_dev == len(dev) - 1, "over_default": round(float(over[all_dev]), 4)},
            **_draws(functools.partial(_memory_choose, dev), over, dev.shape[1], dev_size, draws, rng, len(dev) - 1),
        }
    return _expected(out, " memory")


def main() -> None:
    """A look at a few sets, printed; the results file is written by ``benchmarks.run`` (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder holding the data sets (default ../shared/data)")
    parser.add_argument("--sets", help="comma-separated sets (default: the six context sets, or the four memory sets with --memory)")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--memory", action="store_true")
    args = parser.parse_args()
    data = data_dir(args.data)
    if args.memory:
        result = analyse_memory(data, **({"names": args.sets.split(",")} if args.sets else {}), draws=args.draws)
    else:
        result = analyse(collect(data, args.sets.split(",") if args.sets else CONTEXT_SETS), draws=args.draws)
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
