"""Chat memory: no one turn recalled by relevance takes the budget while others score (issue 76
item 1: "no single turn may take the budget while others score, and a turn worth recalling that
does not fit the room left is cut to its best part rather than skipped"), on the shipped
selection rather than a learned ranker's.

What it is for, read on PrefEval's dev split at 256 tokens (an ad-hoc trace read of the 9 of 108
questions the dense fill wins, 2026-11-29): in 4 a turn of over 200 tokens ranked second or third
took most of the room the preference needed (a 250-token answer about smart-home hubs at rank 2;
"I dislike using any devices from Google due to privacy concerns", 15 tokens, at relevance rank
33); 3 are the latest-exchange rule of ``benchmarks/memory_lean.py``, 2 a fill of shorter turns.

Settings, 4 (``shipped`` and three), fixed before any figure of this module; the first two were
read first in a throwaway probe of the same replay, whose figures this module repeats:

- ``shipped``: the selection as shipped when this module was written: ``MemoryConfig(cap_turns=False)``
  since the library took ``share, best whole`` (below) as ``cap_turns=True``, its default.
- ``share``: a turn chosen by relevance (or a partner turn) whose line fits the room left but is
  over :data:`meve.memory.decide.TURN_SHARE` (half) of ``l_max`` is cut to its part the query
  matches (:func:`meve.memory.render.truncate_turn`) of that size; one that does not fit is passed
  over, as shipped.
- ``share, best whole``: the same, except the best of the relevance order (the highest worth) is
  taken whole when it fits. Measured as a patch first; since it was chosen, the library's
  ``MemoryConfig()`` (``cap_turns=True``, :func:`meve.memory.select._take_in_order`), the same
  figures.
- ``share, best whole, cut misfits`` (new in this module, not in the probe): as ``share, best
  whole``, and a turn whose line does not fit the room left is cut to the smaller of the room and
  half of ``l_max`` rather than passed over, when that keeps at least
  :data:`meve.memory.select.MIN_CUT` tokens of its text (the issue's "cut rather than skipped": a
  pasted 6,900-token message ranked first comes in as its best part).

Nothing else changes: the latest exchange, the user's statements, kept roles, the fused scores and
partner worth are the shipped selection's. The metric (memory_lodo's answerable evidence) counts a
turn only when its whole text stands in the context, so a cut evidence turn never counts and always
costs its tokens: the cutting settings are measured at a disadvantage (docs/design/memory-ranker.md).

The rule that chooses, fixed before any figure of this module: :func:`benchmarks.memory_ranker.choose`
(issue 76 item 4: the highest mean margin over the best fill across seven sets x 256/512/1,024
tokens on the dev splits, vetoed by a row whose paired 95% interval against the shipped setting
lies wholly below zero), among the settings that keep at least as much of the follow-up probes'
replies as the shipped one at every set and budget (:mod:`benchmarks.harness.follow_ups`; the
issue: "a follow-up still keeps the reply"). Dev splits only; a chosen setting is built into the
library and its test rows read once by ``benchmarks/memory_lodo.py``. Beside them, chosen nothing
by: ``capped_fills``, the best plain fill with the same cap (:func:`capped_fills`), and
``losses``, how many questions the cap costs whose evidence turn is still in, cut (:func:`losses`).

    python -m benchmarks.memory_share [--data DIR]     # writes benchmarks/results/memory_share.json
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks import memory_lean as lean
from benchmarks import memory_lodo as ml
from benchmarks import memory_ranker as mr
from benchmarks.harness.common import dev_main
from benchmarks.harness.conversations import Replay, evidence_kept
from meve import MemoryConfig
from meve.memory import select
from meve.memory.decide import TURN_SHARE
from meve.memory.render import render
from meve.memory.select import MIN_CUT

SETTINGS = ("shipped", "share", "share, best whole", "share, best whole, cut misfits")
#: ``MemoryConfig`` fields by setting: the patched forms replace the relevance fill whole, so only
#: the selection before (``shipped``) needs the library's cap turned off.
FIELDS = {"shipped": {"cap_turns": False}}


def _take_cut(fill: Any, i: int, text_budget: int, reason: str) -> bool:
    """Turn ``i`` cut to ``text_budget`` tokens of its part the query matches (the library's
    ``_Fill.cut``), if that keeps :data:`MIN_CUT` tokens of text and fits the room left."""
    got = fill.cut(i, text_budget) if text_budget >= MIN_CUT else None
    if got is None:
        return False
    short, line = got
    return bool(fill.take(i, short, line, f"{reason}, cut to its best part (a line of {line} tokens)"))


def sharing(best_whole: bool, cut_misfits: bool) -> Callable[..., None]:
    """A relevance fill (:func:`meve.memory.select._take_in_order`'s place) under one of the settings."""

    def take_in_order(fill: Any, order: Sequence[int], why: Callable[[int], str]) -> None:
        cap = int(TURN_SHARE * fill.cfg.l_max)
        for k, i in enumerate(order):
            if i in fill.sel.reasons:
                continue
            line, best = fill.line(i), best_whole and k == 0
            fits = fill.ledger.cost(line) <= fill.ledger.left
            if fits and (best or line <= cap) and fill.take(i, fill.snap.turns[i], line, why(i)):
                continue
            if (fits or cut_misfits) and _take_cut(fill, i, min(cap, fill.ledger.room) - fill.head(i), why(i)):
                continue
            fill.refuse(i, f"{why(i)}: needs {fill.ledger.cost(line)} tokens, {fill.ledger.left} left of l_max {fill.cfg.l_max}")

    return take_in_order


@contextmanager
def variant(name: str) -> Iterator[None]:
    """The code of setting ``name`` in force (the shipped relevance fill patched for the benchmark only)."""
    forms = {"share": (False, False), "share, best whole, cut misfits": (True, True)}
    if name not in forms:
        yield
        return
    with mock.patch.object(select, "_take_in_order", sharing(*forms[name])):
        yield


def allowed(follow: dict[str, dict[str, Any]], settings: Sequence[str]) -> list[str]:
    """The settings that keep at least the shipped setting's reply coverage at every set and budget."""
    return [s for s in settings if all(r[s]["coverage"] >= r["shipped"]["coverage"] for per in follow.values() for b, r in per.items() if b != "probes")]


def capped_fills(data: Path) -> dict[str, dict[str, float]]:
    """A diagnostic, chosen nothing by: the best plain fill's answerable evidence per set and budget
    (dev) when its turns too are capped at half of ``l_max`` (the best-ranked whole; a plain fill
    passes no query, so a cut keeps a turn's end). Is the gain the memory's, or the cap's alone?"""

    def fill(rp: Replay, ranked: Sequence[int], l_max: int, dates: bool = False) -> tuple[Any, str]:
        cfg = MemoryConfig(l_max=l_max, partner_turns=False, dates=dates, recent_turns=0)
        sel = select.select_turns(rp.snap, cfg, rp.counter, recent=[], pinned=[], ranked=ranked, partner=rp.partner)
        return sel, render(sel.turns, dates=dates)

    out: dict[str, dict[str, float]] = {}
    for n, s in ml.conversations(data).items():
        if n in ml.LODO_SETS:
            reps, qvecs, stem = ml.dev_replays(s["dev"])
            with mock.patch.object(Replay, "fill", fill):
                out[n] = {str(b): max(x[ml.METRIC] for x in ml.baselines(reps, qvecs, b, stem).values()) for b in ml.BUDGETS}
    return out


def losses(data: Path) -> dict[str, dict[str, dict[str, int]]]:
    """A diagnostic of the metric, chosen nothing by: per set and budget (dev), the questions whose
    answerable evidence the library's cap (``cap_turns``) lowers, how many of those still hold an
    evidence turn cut to its best part (which this metric never credits), and the questions it raises."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for n, s in ml.conversations(data).items():
        if n not in ml.LODO_SETS:
            continue
        reps, qvecs, _ = ml.dev_replays(s["dev"])
        out[n] = {}
        for b in ml.BUDGETS:
            row = {"lost": 0, "lost_with_evidence_cut": 0, "gained": 0}
            for rp, vecs in zip(reps, qvecs, strict=True):
                by_id, where = {t.id: t for t in rp.conv.turns}, {t.id: i for i, t in enumerate(rp.conv.turns)}
                for q, qv in zip(rp.conv.questions, vecs, strict=True):
                    _, before = rp.memory(q.text, qv, MemoryConfig(l_max=b, cap_turns=False))
                    sel, after = rp.memory(q.text, qv, MemoryConfig(l_max=b))
                    was, now = evidence_kept(q, before, by_id), evidence_kept(q, after, by_id)
                    row["gained"] += now > was
                    row["lost"] += now < was
                    cut = any(sel.picked[p].metadata.get("meve_truncated") for e in q.evidence if (p := where[e]) in sel.picked)
                    row["lost_with_evidence_cut"] += now < was and cut
            out[n][str(b)] = row
    return out


def run(data: Path) -> dict[str, Any]:
    """Every setting's dev rows and probe coverage, and the rule's choice."""
    t0 = time.perf_counter()
    dev, follow = lean.measure(data, SETTINGS, variant, "memory_share", FIELDS)
    keep = allowed(follow, SETTINGS)
    out: dict[str, Any] = {"protocol": __doc__, "settings": list(SETTINGS), "dev": dev, "follow_ups": follow, "rule": mr.choose(dev, SETTINGS)}
    out["keep_follow_ups"] = keep
    out["capped_fills"] = capped_fills(data)
    out["losses"] = losses(data)
    out["chosen"] = mr.choose(dev, keep)["chosen"]
    return {**out, "elapsed_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    """Dev rows, written to benchmarks/results/memory_share.json."""
    dev_main("memory_share", run, __doc__, argv)


if __name__ == "__main__":
    main()
