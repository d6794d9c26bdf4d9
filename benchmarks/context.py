"""Context quality, leave-one-dataset-out (issues 35 and 40): is MeVe's default context as small as
its evidence, on data its default was not chosen on?

Six data sets (:mod:`benchmarks.harness.data`): SQuAD, HotpotQA, WikiQA, SelQA, COVID-QA
(sentence evidence) and the MS MARCO sample (passage-labelled), each split by the registry. The metric that
chooses is evidence recall counted on the text of the context (:mod:`benchmarks.harness.metrics`);
answer-in-context and passage-id recall are reported beside it.

Protocol, fixed before the run:
1. On each dev split: the dense, BM25 and hybrid (RRF) top-k curves for k = 1..10, and every
   setting of GRID (48 MeVe settings, listed below).
2. For each data set D: the setting with the best worst-case margin over the top-k frontier on
   the other five dev splits (:func:`benchmarks.harness.lodo.choose`), reported on D's test split
   beside the frontier there. That is the leave-one-dataset-out figure.
3. The shipped default: the same rule over all six dev splits. On each test split it is shown
   labelled in-distribution (D's dev split helped choose it).
4. Beside them on every test split: the MeVe paper's untuned phases, the LODO choice with
   verification off, the LODO choice with pruning switched the other way, and MeVeConfig() as it
   stood when the run began.

(The run of 2026-11-25 afternoon had five data sets and 96 settings. Since then COVID-QA joined,
its test split unseen by anyone, and the redundancy threshold left the grid; both changes were made
after that run's test figures had been seen: see GRID's comment.)

    python -m benchmarks.run --full --only context [--data DIR]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import lodo
from benchmarks.harness.arms import evaluate, meve_system
from benchmarks.harness.common import MEVE_KNOBS, default_verifier, pct
from benchmarks.harness.corpus import Corpus
from benchmarks.harness.data import CONTEXT_SETS, Dataset, load
from benchmarks.harness.splits import write_fitted
from meve import ContextResult, MeVeConfig, get_token_counter
from meve.evaluate.report import arm_summary, measure_curves
from meve.evaluate.tune import GRID as TUNE_GRID

# 2 candidate sources x 6 verification rules (tau alone at four values, and two per-query cuts at
# tau 0.1) x query coverage off/on x sentence pruning off/on = 48 settings; n_min 1 and the
# redundancy threshold 0.95 throughout.
# The threshold (phase 4: a candidate whose cosine with a kept one exceeds it is dropped as a
# near-duplicate) was a grid knob (0.85 / 0.95) in the run of 2026-11-25 afternoon, after a
# diagnosis on MS MARCO's dev split: at 0.85 the filter dropped distinct passages on the same topic
# (evidence 0.786 at 402 tokens against 0.896 at 422), while on the other four dev splits it changed
# evidence by at most 0.009. That run's LODO choice for MS MARCO, made on the other four, took 0.85
# (a few tokens fewer) and lost 0.047 there. Phase 4 is a duplicate filter, not a relevance knob, so
# the threshold left the grid at the one value that drops the same text reworded and keeps distinct
# passages. This was decided after that run's test figures were seen (BENCHMARKS.md says so).
GRID: list[dict[str, Any]] = TUNE_GRID  # the same 48 settings `meve tune` chooses among (meve.evaluate.tune.GRID)
# The paper drops redundancy "via embedding similarity" without a threshold; 0.85 is the one this
# project shipped until the redundancy threshold joined the grid.
PAPER = {
    "candidates": "dense",
    "tau": 0.5,
    "cut": "none",
    "cut_ratio": 0.8,
    "coverage": 0.0,
    "coverage_floor": 0.0,
    "n_min": 3,
    "prune": "none",
    "theta_redundancy": 0.85,
}
SHIPPED_AT_START = {k: getattr(MeVeConfig(), k) for k in MEVE_KNOBS}
REFERENCE_K = 3  # the token scale of the tie-break: each set's dense top-3


Points = dict[str, list[tuple[int, list[tuple[float, float]]]]]


def baselines(corpus: Corpus, ds: Dataset, split: str, points: Points | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every top-k curve on one split (``points`` collects each point's per-question scores)."""
    return measure_curves(corpus, ds.splits[split].questions, get_token_counter(), points=points)


def _meve(corpus: Corpus, ds: Dataset, split: str, setting: dict[str, Any], scores: list[tuple[float, float]] | None = None) -> dict[str, Any]:
    kept: list[ContextResult] = []
    row = {**setting, **evaluate(meve_system(corpus, setting), ds.splits[split].questions, get_token_counter(), keep=kept, scores=scores)}
    for phase in ("verify", "prune"):
        row[f"{phase}_ms_p50"] = round(pct([r.phase(phase).ms for r in kept], 50), 2)
    row["empty_rate"] = round(sum(not r.documents for r in kept) / max(1, len(kept)), 4)
    return row


def _flip_prune(setting: dict[str, Any]) -> dict[str, Any]:
    return {**setting, "prune": "none" if setting["prune"] != "none" else "scorer", "prune_ratio": 0.5, "prune_gate": 0.2}


def _test_arms(chosen: dict[str, Any], default: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "lodo_choice": chosen,
        "default_in_distribution": default,
        "paper": PAPER,
        "no_verification": {**chosen, "verify": False},
        "lodo_choice_prune_flipped": _flip_prune(chosen),
        "meveconfig_at_start": SHIPPED_AT_START,
    }


def _summary(arm: dict[str, Any], curves: dict[str, list[dict[str, Any]]], reference: float, interval: tuple[float, float] | None = None) -> dict[str, Any]:
    """A test row with its margin over the frontier (and the margin's paired bootstrap interval,
    when given) and the tokens the frontier needs for its evidence (:func:`meve.evaluate.report.arm_summary`)."""
    return arm_summary(arm, curves, reference, interval)


def load_sets(data: Path, dev_limit: int, test_limit: int, names: Sequence[str] = CONTEXT_SETS) -> dict[str, Dataset]:
    """The context sets, each split's questions cut to the fixed sample's first ``*_limit``."""
    sets = {name: load(name, data, None) for name in names}
    for ds in sets.values():
        ds.splits["dev"].questions = ds.splits["dev"].questions[:dev_limit]
        ds.splits["test"].questions = ds.splits["test"].questions[:test_limit]
    return sets


TestArms = Callable[[dict[str, Any], dict[str, Any]], dict[str, dict[str, Any]]]


def lodo_protocol(sets: dict[str, Dataset], test_arms: TestArms = _test_arms, tag: str = "", base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Steps 1-4 of the protocol (module docstring) over ``sets``: the grid and the top-k curves on
    every dev split, the default and each left-out choice, and ``test_arms(choice, default)`` on
    each test split. ``tag`` names the corpora (and their progress lines) apart from the plain sets';
    ``base`` (MeVeConfig fields) is run under every setting, which overrides it."""
    base = base or {}
    t0 = time.perf_counter()
    li, disk = default_verifier()
    dev: dict[str, dict[str, Any]] = {}
    for name, ds in sets.items():
        part = ds.splits["dev"]
        corpus = Corpus(f"{name}{tag}-dev", part.ids, part.texts, li)
        dev[name] = {"baselines": baselines(corpus, ds, "dev"), "grid": [_meve(corpus, ds, "dev", {**base, **s}) for s in GRID]}
        corpus.close()
        disk.save(li.cache)
        print(f"context{tag}: {name} dev done ({len(part.questions)} questions, {len(part.ids)} passages) at {time.perf_counter() - t0:.0f}s", flush=True)
    curves = {n: dev[n]["baselines"] for n in sets}
    reference = {n: curves[n]["dense"][REFERENCE_K - 1]["tokens"] for n in sets}
    rows = [{n: dev[n]["grid"][i] for n in sets} for i in range(len(GRID))]
    default_i = lodo.choose(rows, curves, reference)
    choices = {}
    for held_out in sets:
        others = {n: c for n, c in curves.items() if n != held_out}
        choices[held_out] = lodo.choose([{n: r[n] for n in others} for r in rows], others, reference)
    print(f"context{tag}: default {GRID[default_i]}; LODO choices { {n: GRID[i] for n, i in choices.items()} }", flush=True)
    out: dict[str, Any] = {"protocol": __doc__, "grid": GRID, "settings_tried": len(GRID), "default": GRID[default_i], "base": base, "datasets": {}}
    for name, ds in sets.items():
        part = ds.splits["test"]
        corpus = Corpus(f"{name}{tag}-test", part.ids, part.texts, li)
        points: Points = {}
        test_curves = baselines(corpus, ds, "test", points)
        ref = test_curves["dense"][REFERENCE_K - 1]["tokens"]
        arms = {}
        for label, s in test_arms(GRID[choices[name]], GRID[default_i]).items():
            scores: list[tuple[float, float]] = []
            row = _meve(corpus, ds, "test", {**base, **s}, scores)
            arms[label] = _summary(row, test_curves, ref, lodo.margin_interval(scores, points))
        corpus.close()
        disk.save(li.cache)
        dev_margins = {n: round(lodo.margin(dev[n]["grid"][choices[name]], curves[n]), 4) for n in sets if n != name}
        out["datasets"][name] = {
            "source": ds.source,
            "evidence": ds.evidence,
            "dev": {"questions": len(ds.splits["dev"].questions), "passages": len(ds.splits["dev"].ids), **dev[name]},
            "test": {"questions": len(part.questions), "passages": len(part.ids), "baselines": test_curves, "arms": arms},
            "lodo_choice": GRID[choices[name]],
            "lodo_choice_dev_margins": dev_margins,
        }
        print(f"context{tag}: {name} test done at {time.perf_counter() - t0:.0f}s: {arms[next(iter(arms))]}", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def run(data: Path, dev_limit: int = 200, test_limit: int = 300) -> dict[str, Any]:
    """The protocol over the six sets as they are chunked; its default is what MeVeConfig ships."""
    sets = load_sets(data, dev_limit, test_limit)
    out = lodo_protocol(sets)
    items = [q.id for ds in sets.values() for q in ds.splits["dev"].questions]
    write_fitted(
        "meve_config",
        "MeVeConfig defaults (candidates, tau, cut, coverage, n_min, prune, theta_redundancy)",
        items,
        "python -m benchmarks.run --full --only context",
        out["default"],
    )
    return out


CALIBRATION_TARGET = 0.9  # fixed before any calibrated run; not tuned


def add_calibrated(data: Path, out: dict[str, Any], test_limit: int = 300, queries: int = 200) -> dict[str, Any]:
    """The arm for issue 35's `meve calibrate`: on each left-out set, calibrate on its test corpus
    (pseudo-questions made from the passages; no question or label of the set is read), apply the
    calibration's tau and cut to the LODO choice, and evaluate on the test questions."""
    li, disk = default_verifier()
    for name, d in out["datasets"].items():
        ds = load(name, data, None)
        part = ds.splits["test"]
        part.questions = part.questions[:test_limit]
        corpus = Corpus(f"{name}-test", part.ids, part.texts, li)
        corpus.meve.config = corpus.meve.config.replace(**{k: v for k, v in d["lodo_choice"].items() if k in MEVE_KNOBS})
        cal = corpus.meve.calibrate(target=CALIBRATION_TARGET, queries=queries, seed=0)
        setting = {**d["lodo_choice"], **cal.config}
        curves = d["test"]["baselines"]
        arm = _summary(_meve(corpus, ds, "test", setting), curves, curves["dense"][REFERENCE_K - 1]["tokens"])
        arm["calibration"] = {"config": cal.config, "pseudo_questions": cal.queries, "pseudo_recall": round(cal.recall, 4), "target": CALIBRATION_TARGET}
        d["test"]["arms"]["lodo_choice_calibrated"] = arm
        corpus.close()
        disk.save(li.cache)
        print(f"context: {name} calibrated: {cal.config} -> evidence {arm['evidence']}, tokens {arm['tokens']}, margin {arm['margin']}", flush=True)
    return out
