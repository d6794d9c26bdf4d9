"""Chat memory, issue 76 item 2: what the user told it, recalled for a request in other words.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

A request rarely repeats the words of the preference it must honour ("Can you recommend a film for
me?" after "I can't stand horror films"), so BM25, half of the memory's fused score, ranks it low and
a dense fill beats the memory on PrefEval by 0.07-0.08 of answerable evidence on its dev split.
Each setting below lets some user turns go in before the relevance fill (after the most recent and
kept-role turns), whole, nearest the query first, while they hold at most a share of ``l_max``
(:func:`meve.memory.select.select_turns`, ``stated``); everything else is the shipped rebuild.

Settings, 8 tried on the dev splits in three exploratory runs of a probe, then written down here as
they were run (each row is this module's ``VARIANTS`` entry); the cosine bar is always the memory's
"about the query" cosine, ``follow_up_cosine`` (0.3):

* A/B: user turns a classifier calls durable, at or above the bar, share 0.25 / 0.5 of ``l_max``.
  The classifier is a logistic regression (L2 1e-2 on the class-balanced, set-balanced log-loss) over
  the turn's MiniLM vector, trained on the other six sets' dev splits with the label "the user turn
  is evidence of a dev question" (item 2's "small classifier over the vector the turn already has").
* C: every user turn at or above the bar, share 0.25 (the classifier's contribution, by its absence).
* D/E: the nearest one / two user turns at or above the bar, share 0.5.
* F: D with the classifier.
* G/H: of the nearest one / two turns of any role, the user's at or above the bar, share 0.5.

The rule (issue 76 item 4, as benchmarks/memory_ranker.py applies it): the highest mean margin over
the best fill across the seven sets x 256/512/1,024 tokens, a setting vetoed by any row whose
paired-bootstrap 95% interval against the memory without the pass ("before") lies wholly below 0.
The settings have no fitted value but the classifier's weights (left out per set); the bar is the
memory's own (follow_up_cosine), and the chosen share is ``decide.TURN_SHARE``, the memory's other
"no single turn takes the budget" share.

"shipped" is the memory as it is now (its rebuild computes ``stated`` itself, from the whole query's
cosines; the variants read the vector pool's scores, which differ only for a query of three or more
sentences). With ``--test``: before, shipped and the best fill on each set's test split, read once.

    python -m benchmarks.memory_statements [--data DIR]           # the dev rows and the rule
    python -m benchmarks.memory_statements --test [--data DIR]    # and the test splits, read once
    python -m benchmarks.memory_statements --auc [--data DIR]   # the classifier's left-out AUC
    python -m benchmarks.memory_statements --fresh              # MemoryCode's test split, read once
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks.harness.common import data_dir, embedder, parser, write_result
from benchmarks.harness.conversations import Replay
from benchmarks.harness.lodo import gain_interval
from benchmarks.harness.splits import write_fitted
from meve import MemoryConfig
from meve.memory.render import render
from meve.memory.select import rank, select_turns

BEFORE, SHIPPED = "before", "shipped"
BAR = MemoryConfig().follow_up_cosine or 0.0
#: name -> (classifier, nearest how many (None: every candidate), of any role first, share of l_max)
VARIANTS: dict[str, tuple[bool, int | None, bool, float]] = {
    "A classifier, all, 0.25": (True, None, False, 0.25),
    "B classifier, all, 0.5": (True, None, False, 0.5),
    "C user, all, 0.25": (False, None, False, 0.25),
    "D nearest user, 0.5": (False, 1, False, 0.5),
    "E nearest 2 user, 0.5": (False, 2, False, 0.5),
    "F classifier, nearest user, 0.5": (True, 1, False, 0.5),
    "G nearest turn if the user's, 0.5": (False, 1, True, 0.5),
    "H nearest 2 turns, the user's, 0.5": (False, 2, True, 0.5),
}
Run = Callable[[Replay, str, np.ndarray], tuple[Any, str]]


def user_turns(replays: Sequence[Replay]) -> tuple[np.ndarray, np.ndarray]:
    """Every user turn's vector, and whether it is evidence of one of its conversation's questions."""
    xs, ys = [], []
    for rp in replays:
        wanted = {e for q in rp.conv.questions for e in q.evidence}
        for i, t in enumerate(rp.turns):
            if t.role == "user":
                xs.append(rp.vecs[i])
                ys.append(t.id in wanted)
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)


def classifier(data: Mapping[str, tuple[np.ndarray, np.ndarray]], names: Sequence[str], l2: float = 1e-2) -> np.ndarray:
    """Logistic regression (Newton's method) over ``names``' user turns: each set weighs 1, its
    evidence and other turns half each. Returns the weights with the bias last."""
    xs, ys, ws = [], [], []
    for n in names:
        x, y = data[n]
        if y.sum() == 0 or y.sum() == len(y):
            continue
        xs.append(x)
        ys.append(y)
        ws.append(np.where(y > 0, 0.5 / y.sum(), 0.5 / (len(y) - y.sum())) / len(names))
    x1 = np.hstack([np.vstack(xs), np.ones((sum(len(x) for x in xs), 1))])
    y, w = np.concatenate(ys), np.concatenate(ws)
    beta, reg = np.zeros(x1.shape[1]), np.full(x1.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x1 @ beta)))
        step = np.linalg.solve((x1 * (w * p * (1 - p))[:, None]).T @ x1 + np.diag(reg), x1.T @ (w * (p - y)) + reg * beta)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """The area under the ROC curve of ``scores`` for labels ``y`` (ties broken by order)."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    pos = y.sum()
    return float((ranks[y > 0].sum() - pos * (pos + 1) / 2) / (pos * (len(y) - pos)))


def classifier_auc(data: Path) -> dict[str, Any]:
    """Each set's user turns scored by the classifier trained on the other six sets' dev splits: left-out AUC, and the
    share of its evidence and of its other user turns the classifier calls durable (logit > 0)."""
    sets = list(ml.LODO_SETS)
    convs = ml.conversations(data)
    users = {n: user_turns(ml.replays_of(convs[n]["dev"])[0]) for n in sets}
    out = {}
    for n in sets:
        beta = classifier(users, [m for m in sets if m != n])
        x, y = users[n]
        s = x @ beta[:-1] + beta[-1]
        called = {"evidence_called_durable": float((s[y > 0] > 0).mean()), "others_called_durable": float((s[y == 0] > 0).mean())}
        out[n] = {"auc": round(auc(s, y), 3)} | {k: round(v, 3) for k, v in called.items()}
    embedder().save()
    return out


def variant(l_max: int, spec: tuple[bool, int | None, bool, float] | None, beta: np.ndarray | None) -> Run:
    """A run of :func:`benchmarks.memory_lodo.score`: the shipped rebuild with ``stated`` replaced by
    the variant's choice (None: no pass, the memory before it)."""
    cfg = MemoryConfig(l_max=l_max)

    def run(rp: Replay, query: str, qvec: np.ndarray) -> tuple[Any, str]:
        found = rp.candidates(query, qvec, cfg)
        told: list[tuple[int, float]] = []
        if spec is not None:
            use_p, top, any_role, share = spec
            dense = found.dense[rp.embedder]
            pool = sorted(dense, key=lambda i: -dense[i])
            if not any_role:
                pool = [i for i in pool if rp.turns[i].role == "user"]
            pool = pool[:top] if top is not None else pool
            pool = [i for i in pool if rp.turns[i].role == "user" and dense[i] >= BAR]
            if use_p and beta is not None:
                pool = [i for i in pool if float(rp.vecs[i] @ beta[:-1] + beta[-1]) > 0]
            told = [(i, dense[i]) for i in pool]
        share = spec[3] if spec is not None else 0.0
        ranked = rank(found.fused, rp.snap.keys)
        sel = select_turns(
            rp.snap,
            found.cfg,
            rp.counter,
            recent=found.recent,
            pinned=found.pinned,
            ranked=ranked,
            partner=rp.partner,
            scores=found.fused,
            query=query,
            recent_cap=found.decided.recent_cap,
            stated=told,
            stated_share=share,
        )
        return sel, render(sel.turns, dates=bool(found.cfg.dates))

    return run


def rows(replays: list[Replay], qvecs: list[np.ndarray], stem: bool, runs: Mapping[str, Run], l_max: int) -> dict[str, Any]:
    """Each run's answerable evidence, margin over the best fill and paired interval against "before"."""
    per: dict[str, dict[str, list[float]]] = {k: {} for k in runs}
    base = ml.baselines(replays, qvecs, l_max, stem)
    best = max(x[ml.METRIC] for x in base.values())
    out: dict[str, Any] = {"best_fill": best}
    for k, run in runs.items():
        s = ml.score(replays, qvecs, run, per[k])
        ci = gain_interval(per[k][ml.METRIC], {BEFORE: per[BEFORE][ml.METRIC]}) if k != BEFORE else (0.0, 0.0)
        out[k] = {"answerable": s[ml.METRIC], "tokens": s["tokens"], "margin": round(s[ml.METRIC] - best, 4), "vs_before_ci95": [round(v, 4) for v in ci]}
    return out


def choose(dev: Mapping[str, Mapping[str, Mapping[str, Any]]], order: Sequence[str]) -> dict[str, Any]:
    """The rule: mean margin, vetoes, the chosen setting (ties to the earlier one)."""
    verdicts = {}
    for k in order:
        margins = [r[k]["margin"] for per in dev.values() for r in per.values()]
        vetoes = [f"{n} at {b}" for n, per in dev.items() for b, r in per.items() if k != BEFORE and r[k]["vs_before_ci95"][1] < 0]
        verdicts[k] = {"mean_margin": round(float(np.mean(margins)), 4), "vetoed_by": vetoes}
    allowed = [k for k in order if not verdicts[k]["vetoed_by"]]
    return {"settings_tried": len(order) - 1, "verdicts": verdicts, "chosen": max(allowed, key=lambda k: (verdicts[k]["mean_margin"], -order.index(k)))}


def record(sets: Mapping[str, Mapping[str, Sequence[Any]]], chosen: str) -> Path:
    """Record the dev questions the choice saw (``benchmarks/fitted/user_statements.json``;
    tests/unit/test_splits.py fails on a test item)."""
    items = [q.id for per in sets.values() for c in per["dev"] for q in c.questions]
    knob = "meve.memory.signals.STATED_NEAREST and the user-statement pass (issue 76 #2), chosen on these dev questions"
    return write_fitted("user_statements", knob, items, "python -m benchmarks.memory_statements --test", {"chosen": chosen})


def run(data: Path, *, test: bool = False) -> dict[str, Any]:
    """The dev rows and the rule; with ``test``, the test rows (read once)."""
    t0 = time.perf_counter()
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    dev_data = {n: ml.dev_replays(sets[n]["dev"]) for n in sets}
    users = {n: user_turns(d[0]) for n, d in dev_data.items()}
    print(f"memory_statements: dev ready at {time.perf_counter() - t0:.0f}s", flush=True)
    order = [BEFORE, *VARIANTS, SHIPPED]
    dev: dict[str, dict[str, Any]] = {}
    for n, (rps, qv, stem) in dev_data.items():
        beta = classifier(users, [m for m in sets if m != n])
        dev[n] = {}
        for b in ml.BUDGETS:
            runs = {BEFORE: variant(b, None, None)} | {k: variant(b, spec, beta) for k, spec in VARIANTS.items()} | {SHIPPED: ml.setting({}, b)}
            dev[n][str(b)] = rows(rps, qv, stem, runs, b)
        print(f"memory_statements: {n} dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    out: dict[str, Any] = {"protocol": __doc__, "dev": dev, "rule": choose(dev, order[:-1]), "shipped_on_dev": choose(dev, [BEFORE, SHIPPED])["verdicts"]}
    record(sets, out["rule"]["chosen"])
    if test:
        out["test"] = {}
        for n in sets:
            rps, qv = ml.replays_of(sets[n]["test"])
            out["test"][n] = {str(b): rows(rps, qv, dev_data[n][2], {BEFORE: variant(b, None, None), SHIPPED: ml.setting({}, b)}, b) for b in ml.BUDGETS}
            print(f"memory_statements: {n} test done at {time.perf_counter() - t0:.0f}s", flush=True)
    embedder().save()
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def fresh() -> dict[str, Any]:
    """Issue 76 #5: MemoryCode's test split (:mod:`benchmarks.harness.memorycode`), read once after the
    choice: the memory without the pass, shipped, the paper's settings and the best fill (BM25 over
    stems, the fills' default; nothing is chosen on this set)."""
    from benchmarks.harness.memorycode import memorycode

    t0 = time.perf_counter()
    dropped: Counter[str] = Counter()
    convs = memorycode(dropped=dropped)["test"]
    rps, qv = ml.replays_of(convs)
    embedder().save()
    out: dict[str, Any] = {"dropped": dict(dropped), "conversations": len(convs), "questions": sum(len(c.questions) for c in convs), "budgets": {}}
    for b in ml.BUDGETS:
        runs = {BEFORE: ml.setting({"user_statements": False}, b), SHIPPED: ml.setting({}, b), "paper": ml.setting(ml.PAPER, b)}
        out["budgets"][str(b)] = rows(rps, qv, True, runs, b)
        print(f"memory_statements: MemoryCode test at {b} tokens done at {time.perf_counter() - t0:.0f}s", flush=True)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    """Dev rows and the rule (and ``--test``): benchmarks/results/memory_statements[_test].json."""
    ap = parser(__doc__)
    ap.add_argument("--test", action="store_true", help="also the test splits, read once")
    ap.add_argument("--auc", action="store_true", help="only the classifier's left-out AUC on each dev split")
    ap.add_argument("--fresh", action="store_true", help="only MemoryCode's test split, read once (issue 76 #5)")
    args = ap.parse_args(argv)
    if args.fresh:
        write_result("memory_statements_fresh", fresh(), "python -m benchmarks.memory_statements --fresh")
    elif args.auc:
        write_result("memory_statements_auc", {"auc": classifier_auc(data_dir(args.data))}, "python -m benchmarks.memory_statements --auc")
    else:
        name = "memory_statements_test" if args.test else "memory_statements"
        write_result(name, run(data_dir(args.data), test=args.test), "python -m benchmarks.memory_statements" + (" --test" if args.test else ""))


if __name__ == "__main__":
    main()
