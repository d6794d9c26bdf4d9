"""Chat memory, issue 76 items 1 and 4: a learned ranker in place of the memory's hand rules.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

Measured leave-one-dataset-out on the dev splits; then, only with ``--test``, once on the test
splits.

What is learned. Per question, the candidates are what the memory's rebuild reads
(:mod:`meve.memory.rebuild` through the replay, with the latest exchange competing instead of kept
first): the vector pool and the BM25 pool (256 each, the memory's ``candidate_pool``), the latest
exchange (2 turns) and each one's partner turn. Each candidate gets the 17 features of
:mod:`meve.memory.features` (docs/design/memory-ranker.md lists them) and the label "is one of the
question's evidence turns". A logistic regression (:func:`meve.memory.ranker.fit`: L2, Newton's
method, deterministic) is trained on the other sets' dev splits, each set weighing the same in the
loss and each question the same within its set (so LoCoMo's dev questions do not outvote
LongMemEval's 32), and ranks the left-out set's dev candidates. The memory is then filled in that
order (:func:`meve.memory.fill.fill_by_score`; each line's date counted in the budget, dated as
``dates="auto"`` decides) and rendered as the memory renders.

The metric is memory_lodo's, unchanged (:func:`benchmarks.memory_lodo.score`): answerable evidence,
a question's evidence turns whose whole text stands in the rendered context (a time question's only
when the context is dated). A cut turn's text no longer stands whole, so this metric never credits a
cut evidence turn and always charges its tokens: the "cut" settings' figures are a lower bound of
what cutting keeps. The baseline is memory_lodo's best fill (the best of dense, BM25 and hybrid
fills, each plain or dated for time questions) per set and budget; "shipped" is ``MemoryConfig()``
through the replay (the memory's own rebuild, every hand rule of decide.py in force).

Settings, 13 tried in all. The first run's 7, fixed before any figure: the shipped selection, and
the ranker at L2 penalty 1e-4, 1e-3 or 1e-2 (on the weighted mean log-loss) x the fill whole (a
turn that does not fit is passed over) or cut (a turn over half of ``l_max`` is cut to its best
part of that size, and the first that does not fit the room left is cut to it). The first run
chose the shipped selection: every ranker was vetoed by LoCoMo, where the shipped fill's partner
turns are worth +0.064 (partner_turns=False, dev, 256 tokens) and the rankers had none. The second
run adds 2, fixed before its figures: the ranker at 1e-4 or 1e-3, whole, with each partner turn
lifted toward its anchor as the shipped fill lifts it (:func:`meve.memory.fill.with_partners`,
``partner_weight`` 0.5). The third run adds 4, fixed before its figures: the ranker's odds against
the query's best candidate (:meth:`meve.memory.ranker.Ranker.relative`) in place of the fused score
inside the memory's own selection ("in fill": ``MemoryConfig()``'s latest exchange, user statements
and partner worth, so only the fusion and the role discount are replaced), at 1e-3 fitted per turn,
and at 1e-3 or 1e-2 fitted listwise (:func:`meve.memory.ranker.fit_listwise`: each question's
softmax over its candidates, the order a fill reads); and the listwise ranker at 1e-3, whole, with
partners. Nothing else varies: features, pools, the latest exchange's two turns and
the sets are fixed.

The rule that chooses (issue 76 item 4), fixed before any figure:

1. Every setting on each of the seven sets' dev splits at 256, 512 and 1,024 tokens, its ranker
   trained on the other six sets' dev splits; margin = its answerable minus the best fill's.
2. A setting is vetoed only by a row (set, budget) whose paired-bootstrap 95% interval of its
   answerable minus the shipped setting's (the questions resampled, 2,000 draws, seed 0:
   :func:`benchmarks.harness.lodo.gain_interval`) lies wholly below 0. The shipped setting is never
   vetoed.
3. Chosen: the setting not vetoed with the highest mean margin over the 21 rows (seven sets x three
   budgets), rounded to 0.0001; a tie goes to the earlier setting of :data:`SETTINGS` (shipped first).
4. Only then, and only with ``--test``: the chosen setting (its ranker trained on the other six sets'
   dev splits) on each set's test split beside the shipped selection and the best fill, with paired
   intervals. The test splits are read once; nothing is chosen from them.

Splits come from the one registry (:mod:`benchmarks.harness.splits`): training reads dev questions
only (the loaders also return the test conversations, which are neither embedded nor scored without
``--test``). ``--save PATH`` writes the chosen ranker fitted on all seven dev splits (or those
``--save-sets`` names: LoCoMo and PrefEval are CC BY-NC 4.0, see ``meve/weights/MEMORY_RANKER_CARD.md``)
and records its items in ``benchmarks/fitted/memory_ranker.json`` (``tests/unit/test_splits.py``
fails on a test item).

    python -m benchmarks.run --full --only memory_ranker [--data DIR]     # steps 1-3 (dev splits)
    python -m benchmarks.memory_ranker --test [--data DIR] [--save PATH [--save-sets a,b]]  # steps 1-4
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks.harness.common import data_dir, embedder, parser, write_result
from benchmarks.harness.conversations import Conversation, Replay
from benchmarks.harness.lodo import gain_interval
from benchmarks.harness.splits import write_fitted
from meve import MemoryConfig, get_token_counter
from meve.memory import features
from meve.memory.decide import decide_dates
from meve.memory.fill import fill_by_score, with_partners
from meve.memory.ranker import Ranker, fit, fit_listwise, order_by_score
from meve.memory.render import render
from meve.memory.select import latest_turns
from meve.retrieval.terms import stemmed_tokenize, terms_held

#: The ranker's settings (the shipped selection is the first candidate, :data:`SHIPPED`).
SETTINGS: tuple[dict[str, Any], ...] = (
    *({"l2": l2, "cut": cut} for l2 in (1e-4, 1e-3, 1e-2) for cut in (False, True)),
    # Second run (added after the first run's figures, docs/design/memory-ranker.md): the partner turn competes at its worth
    # lifted toward its anchor's, as the shipped fill lifts it (partner_weight 0.5); the first run's rankers lacked it.
    *({"l2": l2, "cut": False, "partners": True} for l2 in (1e-4, 1e-3)),
    # Third run (added after the second run's figures, docs/design/memory-ranker.md): the learned score in place of the fused
    # score inside the memory's own selection ("in fill": the latest exchange, the user's statements and partner turns as
    # the memory decides them), and the fit as a choice among each question's candidates (listwise) instead of per turn.
    {"l2": 1e-3, "cut": False, "in_fill": True},
    *({"l2": l2, "cut": False, "in_fill": True, "listwise": True} for l2 in (1e-3, 1e-2)),
    {"l2": 1e-3, "cut": False, "partners": True, "listwise": True},
)
SHIPPED = "shipped"
POOL = 256  # MomentaryMemory's candidate_pool
RECENT_TURNS = MemoryConfig().recent_turns
COMMAND = "python -m benchmarks.memory_ranker --test --save PATH"


def name_of(s: Mapping[str, Any]) -> str:
    """A ranker setting's name in the results."""
    name = f"ranker l2={s['l2']:g} " + ("listwise " if s.get("listwise") else "")
    return name + ("in fill" if s.get("in_fill") else ("cut" if s["cut"] else "whole") + (" partners" if s.get("partners") else ""))


def fitted_key(s: Mapping[str, Any]) -> tuple[float, bool]:
    """The ranker a setting reads: its L2 penalty and whether it is fitted listwise."""
    return s["l2"], bool(s.get("listwise"))


@dataclass
class Item:
    """One question's candidates: positions, ages (turns after each), features and labels."""

    qid: str
    positions: np.ndarray
    age: np.ndarray
    x: np.ndarray
    y: np.ndarray


@dataclass
class Prepared:
    """One split of one set: replays, question vectors, the BM25 stemming its fills use, and each
    question's :class:`Item` (in order, and by conversation and text, as a run is called)."""

    replays: list[Replay]
    qvecs: list[np.ndarray]
    stem: bool
    items: list[Item] = field(default_factory=list)
    by_text: dict[tuple[str, str], Item] = field(default_factory=dict)


def doc_freq(rp: Replay) -> Counter[str]:
    """How many of the conversation's turns hold each stemmed term (for the terms' idf)."""
    return Counter(t for turn in rp.turns for t in set(stemmed_tokenize(turn.text)))


def item_of(rp: Replay, qid: str, query: str, qvec: np.ndarray, evidence: Sequence[str], df: Mapping[str, int]) -> Item:
    """One question's candidates and features, read as the memory's rebuild reads them (the latest
    exchange competing: ``keep_recent=False``)."""
    found = rp.candidates(query, qvec, MemoryConfig(l_max=max(ml.BUDGETS), keep_recent=False), POOL)
    terms = list(dict.fromkeys(stemmed_tokenize(query)))
    weights = features.idf(terms, df, len(rp.turns))

    def coverage(pos: Sequence[int]) -> np.ndarray:
        return features.term_coverage(weights, terms_held(terms, [rp.turns[i].text for i in pos]))

    latest = latest_turns(rp.snap, RECENT_TURNS, (), ())
    sig = features.gather(query, rp.snap, dense=found.dense[rp.embedder], bm25=found.bm25, latest=latest, partner=rp.partner, coverage=coverage)
    wanted = set(evidence)
    y = np.asarray([rp.turns[int(i)].id in wanted for i in sig.positions], dtype=np.float64)
    return Item(qid, sig.positions, sig.age, features.matrix(sig).astype(np.float32), y)


def prepare(convs: list[Conversation], stem: bool | None = None, emb: Any = None) -> Prepared:
    """A split's replays (``emb``: the benchmarks' cached MiniLM by default) and every question's
    :class:`Item`; ``stem``: the fills' BM25, else decided on this split (a dev split decides)."""
    emb, counter = emb or embedder(), get_token_counter()
    replays = [Replay(c, counter, emb.encode, emb.name) for c in convs]
    qvecs = [emb.encode([q.text for q in rp.conv.questions]) for rp in replays]
    prep = Prepared(replays, qvecs, ml.stemming_helps(replays, qvecs) if stem is None else stem)
    for rp, vecs in zip(replays, qvecs, strict=True):
        df = doc_freq(rp)
        for q, qv in zip(rp.conv.questions, vecs, strict=True):
            it = item_of(rp, q.id, q.text, qv, q.evidence, df)
            prep.items.append(it)
            prep.by_text.setdefault((rp.conv.name, q.text), it)
    return prep


def train(preps: Mapping[str, Prepared], names: Sequence[str], l2: float, listwise: bool = False) -> Ranker:
    """The ranker fitted on ``names``' items, each set weighing 1 in all and each of its questions
    alike (``listwise``: :func:`meve.memory.ranker.fit_listwise`, one weight per question)."""
    xs, ys, ws, qs = [], [], [], []
    for n in names:
        items = [it for it in preps[n].items if len(it.y)]
        for it in items:
            xs.append(it.x)
            ys.append(it.y)
            ws.append(np.full(len(it.y), 1.0 / (len(items) * len(it.y))))
            qs.append(1.0 / len(items))
    about = {"sets": list(names), "questions": {n: len(preps[n].items) for n in names}}
    x, y = np.concatenate(xs), np.concatenate(ys)
    if listwise:
        return fit_listwise(x, y, [len(v) for v in ys], l2=l2, weight=qs, about=about)
    return fit(x, y, l2=l2, weight=np.concatenate(ws), about=about)


def learned(model: Ranker, prep: Prepared, l_max: int, cut: bool, partners: bool = False) -> Callable[[Replay, str, np.ndarray], tuple[Any, str]]:
    """A run for :func:`benchmarks.memory_lodo.score`: the memory filled in the ranker's order
    (``partners``: each partner turn lifted toward its anchor, :func:`meve.memory.fill.with_partners`)."""

    def run(rp: Replay, query: str, qvec: np.ndarray) -> tuple[Any, str]:
        it = prep.by_text[(rp.conv.name, query)]
        # A listwise fit's logits mean something only within a query: its worth is the odds against the best candidate's.
        scores = model.relative(it.x) if model.about.get("objective") == "listwise" else model.score(it.x)
        ranked = order_by_score(scores, it.age)
        order = it.positions[ranked].tolist()
        if partners:
            order = with_partners(order, scores[ranked].tolist(), rp.partner, MemoryConfig().partner_weight)
        dated = decide_dates("auto", query)[0]
        sel = fill_by_score(rp.snap, rp.counter, order, l_max=l_max, dates=dated, query=query, cut=cut)
        return sel, render(sel.turns, dates=dated)

    return run


def in_fill(model: Ranker, prep: Prepared, l_max: int) -> Callable[[Replay, str, np.ndarray], tuple[Any, str]]:
    """A run for :func:`benchmarks.memory_lodo.score`: the memory's own selection (``MemoryConfig()``
    at ``l_max``: what goes in first, the user's statements, partner turns by worth) over the
    ranker's score in place of the fused score; a pooled turn the ranker did not see scores 0."""
    cfg = MemoryConfig(l_max=l_max)

    def run(rp: Replay, query: str, qvec: np.ndarray) -> tuple[Any, str]:
        it = prep.by_text[(rp.conv.name, query)]
        found = rp.candidates(query, qvec, cfg, POOL)
        first = found.first
        fused = {int(p): float(v) for p, v in zip(it.positions, model.relative(it.x), strict=True) if int(p) not in first}
        return rp.choose(query, replace(found, fused=fused | {p: 0.0 for p in found.fused if p not in fused}))

    return run


def run_of(model: Ranker, prep: Prepared, l_max: int, s: Mapping[str, Any]) -> Callable[[Replay, str, np.ndarray], tuple[Any, str]]:
    """The run a setting names."""
    return in_fill(model, prep, l_max) if s.get("in_fill") else learned(model, prep, l_max, s["cut"], s.get("partners", False))


def rows_at(prep: Prepared, runs: Mapping[str, Any], l_max: int) -> dict[str, dict[str, Any]]:
    """Each run's row at ``l_max``: answerable, its margin over the best fill, and paired 95%
    intervals against the shipped selection (the veto) and against the fills (the margin)."""
    per: dict[str, dict[str, list[float]]] = {k: {} for k in runs}
    fills: dict[str, dict[str, list[float]]] = {}
    base = ml.baselines(prep.replays, prep.qvecs, l_max, prep.stem, fills)
    best = max(x[ml.METRIC] for x in base.values())
    scored = {k: ml.score(prep.replays, prep.qvecs, run, per[k]) for k, run in runs.items()}
    shipped = per[SHIPPED][ml.METRIC]
    out = {}
    for k, s in scored.items():
        mine = per[k][ml.METRIC]
        out[k] = {
            "answerable": s[ml.METRIC],
            "all_evidence": s["all_evidence"],
            "tokens": s["tokens"],
            "margin": round(s[ml.METRIC] - best, 4),
            "margin_ci95": [round(v, 4) for v in gain_interval(mine, {f: v[ml.METRIC] for f, v in fills.items()})],
            "vs_shipped_ci95": [round(v, 4) for v in gain_interval(mine, {SHIPPED: shipped})],
        }
    return {"best_fill": {"answerable": best}, **out}


def choose(dev: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]], order: Sequence[str]) -> dict[str, Any]:
    """The rule (module docstring, steps 2-3) over ``dev[set][budget][setting]`` rows: each
    setting's mean margin, the rows that veto it, and the chosen one."""
    rows = [r for per_set in dev.values() for r in per_set.values()]
    verdicts = {}
    for k in order:
        vetoes = [f"{n} at {b}" for n, per_set in dev.items() for b, r in per_set.items() if k != SHIPPED and r[k]["vs_shipped_ci95"][1] < 0]
        verdicts[k] = {"mean_margin": round(float(np.mean([r[k]["margin"] for r in rows])), 4), "vetoed_by": vetoes}
    allowed = [k for k in order if not verdicts[k]["vetoed_by"]]
    chosen = max(allowed, key=lambda k: (verdicts[k]["mean_margin"], -order.index(k)))
    return {"settings_tried": len(order), "verdicts": verdicts, "chosen": chosen}


def dev_step(sets: Mapping[str, Mapping[str, list[Conversation]]], emb: Any = None) -> tuple[dict[str, Any], dict[str, Prepared]]:
    """Steps 1-3 on the dev splits: every setting's left-out rows, and the choice."""
    t0 = time.perf_counter()
    names = list(sets)
    preps = {n: prepare(sets[n]["dev"], emb=emb) for n in names}
    print(f"memory_ranker: dev candidates ready at {time.perf_counter() - t0:.0f}s", flush=True)
    dev: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, Any]] = {}
    for n in names:
        fitted = {k: train(preps, [m for m in names if m != n], *k) for k in sorted({fitted_key(s) for s in SETTINGS})}
        models[n] = {
            f"l2={k[0]:g}" + (" listwise" if k[1] else ""): dict(zip(r.features, np.round(r.weights, 4).tolist(), strict=True)) | {"bias": round(r.bias, 4)}
            for k, r in fitted.items()
        }
        dev[n] = {}
        for b in ml.BUDGETS:
            runs: dict[str, Any] = {SHIPPED: ml.setting({}, b)} | {name_of(s): run_of(fitted[fitted_key(s)], preps[n], b, s) for s in SETTINGS}
            dev[n][str(b)] = rows_at(preps[n], runs, b)
        print(f"memory_ranker: {n} left out, dev done at {time.perf_counter() - t0:.0f}s", flush=True)
    recall = {n: round(float(np.mean([it.y.sum() > 0 for it in p.items])), 4) for n, p in preps.items()}
    out: dict[str, Any] = {"protocol": __doc__, "settings": [SHIPPED, *map(name_of, SETTINGS)], "dev": dev, "weights_left_out": models}
    out["evidence_among_candidates"] = recall  # the share of questions with an evidence turn among their candidates
    out["rule"] = choose(dev, out["settings"])
    return out, preps


def final_step(sets: Mapping[str, Mapping[str, list[Conversation]]], preps: Mapping[str, Prepared], chosen: str, emb: Any = None) -> dict[str, Any]:
    """Step 4: the chosen setting and the shipped selection on each set's test split (read once)."""
    setting = next((s for s in SETTINGS if name_of(s) == chosen), None)
    out: dict[str, Any] = {}
    for n in sets:
        test = prepare(sets[n]["test"], stem=preps[n].stem, emb=emb)
        model = train(preps, [m for m in sets if m != n], *fitted_key(setting)) if setting else None
        out[n] = {}
        for b in ml.BUDGETS:
            runs: dict[str, Any] = {SHIPPED: ml.setting({}, b)}
            if setting and model:
                runs[chosen] = run_of(model, test, b, setting)
            out[n][str(b)] = rows_at(test, runs, b)
        print(f"memory_ranker: {n} test done", flush=True)
    return out


def save_chosen(preps: Mapping[str, Prepared], chosen: str, path: Path, sets: Sequence[str] | None = None) -> Path:
    """The chosen ranker fitted on the dev splits of ``sets`` (default: every set; the model card
    says why a shipped one may leave out a set whose licence is non-commercial), written to
    ``path``; its items recorded in ``benchmarks/fitted/memory_ranker.json``."""
    setting = next((s for s in SETTINGS if name_of(s) == chosen), None)
    if setting is None:
        raise SystemExit(f"the rule chose {chosen!r}, not a ranker: nothing to save")
    names = list(sets) if sets else list(preps)
    if unknown := [n for n in names if n not in preps]:
        raise SystemExit(f"--save-sets {unknown} are not among the sets: {', '.join(preps)}")
    model = train(preps, names, *fitted_key(setting))
    about = {**model.about, "setting": setting, "embedder": preps[names[0]].replays[0].embedder, "command": COMMAND}
    Ranker(model.features, model.weights, model.bias, about).save(path)
    items = [it.qid for n in names for it in preps[n].items]
    knob = "meve.memory.ranker weights (issue 76), fitted on these dev questions"
    write_fitted("memory_ranker", knob, items, COMMAND, {"setting": setting, "path": str(path), "sets": names})
    return path


def run(data: Path, *, test: bool = False, save: Path | None = None, save_sets: Sequence[str] | None = None) -> dict[str, Any]:
    """Steps 1-3 (dev), and step 4 with ``test``; ``save``: write the chosen ranker there, fitted
    on the dev splits of ``save_sets`` (default: all)."""
    t0 = time.perf_counter()
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    out, preps = dev_step(sets)
    embedder().save()
    chosen = out["rule"]["chosen"]
    if test:
        out["test"] = final_step(sets, preps, chosen)
        embedder().save()
    if save is not None:
        out["saved"] = str(save_chosen(preps, chosen, save, save_sets))
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    """Steps 1-3, and 4 with ``--test`` (results: benchmarks/results/memory_ranker[_test].json)."""
    ap = parser(__doc__)
    ap.add_argument("--test", action="store_true", help="step 4: the chosen setting on the test splits, read once")
    ap.add_argument("--save", type=Path, help="write the chosen ranker, fitted on every dev split, to this JSON file")
    ap.add_argument("--save-sets", help="comma-separated sets the saved ranker is fitted on (default: all seven; see the model card on licences)")
    args = ap.parse_args(argv)
    sets = args.save_sets.split(",") if args.save_sets else None
    out = run(data_dir(args.data), test=args.test, save=args.save, save_sets=sets)
    write_result("memory_ranker_test" if args.test else "memory_ranker", out, "python -m benchmarks.memory_ranker" + (" --test" if args.test else ""))


if __name__ == "__main__":
    main()
