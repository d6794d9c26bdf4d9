"""Chat memory: the rule that keeps the latest exchange whole when nothing earlier is near the query,
questioned in the open (issue 76; DEVELOPERS.md: "when a selection rule rejects every candidate,
question the rule").

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

The rule (:func:`meve.memory.decide.leans_on_latest`, :func:`meve.memory.decide.decide_recent_cap`):
a query of over six words with no earlier turn at or above ``follow_up_cosine`` (0.3) "is about what
was just said", so the latest exchange goes in first, whole, and a reply longer than ``l_max`` is cut
to all the room. On PrefEval's dev split at 256 tokens (an ad-hoc trace read of the questions the
dense fill wins) it fires on standalone requests ("Can you suggest some fulfilling career paths that
involve helping others?") whose preference ("I dislike working in the healthcare industry") is
under the bar: a 475-token reply cut to 254 tokens is the whole context, and no earlier turn can come in.

Settings, 4, fixed before any figure of this module (the first three were also read once in a
throwaway probe of the same replay, whose figures this module repeats):

- ``shipped``: ``MemoryConfig()``.
- ``capped``: such a query's latest turns keep at most ``TURN_SHARE`` (half) of ``l_max`` each, as a
  short question that an earlier turn is about does.
- ``compete``: only a short query leans on the latest exchange; a longer one lets it compete by
  relevance (the "nothing near" reason removed).
- ``cut half``: such a query's latest turn is kept whole when it fits, and one that must be cut
  anyway keeps at most half of ``l_max`` instead of all the room left.

The rule that chooses is :func:`benchmarks.memory_ranker.choose` (issue 76 item 4): the highest mean
margin over the best fill across seven sets x 256/512/1,024 tokens on the dev splits, vetoed by a row
whose paired 95% interval against the shipped setting lies wholly below zero. One more condition, fixed
before any figure: the memory sets hold no follow-up request, so a setting that changes what a long
follow-up keeps ("Rewrite the whole thing in a friendlier tone" after a reply longer than half of
``l_max``) is judged by the tests that pin it (tests/unit/test_memory_anchor.py,
tests/integration/test_memory_real.py), not by these rows. Dev splits only.

Result (2026-11-29, at 3de10a8): mean dev margin shipped +0.0292, ``capped`` +0.0333, ``compete``
+0.0333, ``cut half`` +0.0322; no veto. The rule alone picks ``capped``; the condition leaves
``shipped`` and ``cut half``, and picks ``cut half`` (PrefEval +0.019 at 256, LongMemEval +0.016 at
256 and 512, BEAM +0.006 at 256 and 512; every other row unchanged). Built, and the test splits read
once by memory_lodo: PrefEval -0.123 to -0.097 at 256 tokens, BEAM +0.006 at 256 and 512, the rest
of the shipped rows unchanged (benchmarks/results/history/memory_lodo_run18_issue76_cut_half.json).

What the condition was blind to, found after that: :mod:`benchmarks.harness.follow_ups` (issue 64)
has follow-up probes, a conversation cut after a reply and a request that leans on it, so the
sets do hold follow-ups. This module now reports each setting's reply coverage over the dev probes
(``follow_ups``: the share of the reply's tokens kept, :func:`benchmarks.memory_anchor.coverage`).
``cut half`` keeps 0.05 to 0.12 less of the long replies on LongMemEval, BEAM, PrefEval and RealMem
(BEAM at 512 tokens: 0.627 to 0.508), for +0.006 to +0.019 on the questions. The issue asks that "a
follow-up still keeps the reply", so the rule stands and nothing ships: a standalone request whose
earlier turns sit under the bar and a follow-up that names nothing said before read alike to every
signal the rule has. A ranker trained with the probes as data could tell them apart; none is
trained on them yet.

    python -m benchmarks.memory_lean [--data DIR]     # writes benchmarks/results/memory_lean.json
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from benchmarks import memory_anchor as anchor
from benchmarks import memory_lodo as ml
from benchmarks import memory_ranker as mr
from benchmarks.harness.common import dev_main, embedder
from benchmarks.harness.follow_ups import probes
from meve import MemoryConfig, get_token_counter
from meve.memory import decide, select

SETTINGS = ("shipped", "capped", "compete", "cut half")
#: The settings that keep a reply that fits whole for a long follow-up (the condition of the module
#: docstring): ``capped`` cuts it to half of ``l_max``, ``compete`` lets it lose to older turns.
KEEP_FOLLOW_UPS = ("shipped", "cut half")
_cap, _leans, _recent = decide.decide_recent_cap, decide.leans_on_latest, select._recent


def _nothing_near(query: str, leans: bool, about: bool) -> bool:
    return leans and not about and not decide.short_query(query)[0]


def capped_cap(share: float, l_max: int, query: str, leans: bool, about: bool = False) -> tuple[int | None, str]:
    """``capped``: a long query with nothing near keeps half of ``l_max`` per latest turn."""
    return _cap(share, l_max, query, leans, about or _nothing_near(query, leans, about))


def compete_leans(query: str, nearby: decide.Nearby, threshold: float | None) -> tuple[bool, str]:
    """``compete``: only a short query leans on the latest exchange."""
    if decide.short_query(query)[0]:
        return _leans(query, nearby, threshold)
    return False, f"the query has {decide.short_query(query)[1]} words and carries its own subject"


def half_recent(fill: Any, recent: Sequence[int], cap: int | None) -> None:
    """``cut half``: with no cap (a query that leans on the latest exchange, nothing earlier about
    it), a latest turn that does not fit whole is cut to half of ``l_max`` rather than all the room;
    a short query's ("Continue") keeps all the room, as shipped."""
    if cap is not None or decide.short_query(fill.query)[0]:
        return _recent(fill, recent, cap)
    half = int(decide.TURN_SHARE * fill.cfg.l_max)
    for i in reversed(recent):
        whole = fill.ledger.cost(fill.line(i)) <= fill.ledger.left
        _recent(fill, [i], None if whole else half)


@contextmanager
def variant(name: str) -> Iterator[None]:
    """The code of setting ``name`` in force (the shipped functions patched for the benchmark only)."""
    targets: dict[str, tuple[Any, str, Any]] = {
        "capped": (decide, "decide_recent_cap", capped_cap),
        "compete": (decide, "leans_on_latest", compete_leans),
        "cut half": (select, "_recent", half_recent),
    }
    patches = [mock.patch.object(*targets[name])] if name in targets else []
    for p in patches:
        p.start()
    try:
        yield
    finally:
        for p in patches:
            p.stop()


#: A setting's code in force: ``within(name)`` is a context manager (:func:`variant`).
Within = Callable[[str], AbstractContextManager[None]]
#: Settings' ``MemoryConfig`` fields by name (None: every setting ``MemoryConfig()``'s).
Fields = Mapping[str, Mapping[str, Any]] | None


def run_of(name: str, l_max: int, within: Within = variant, fields: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """A run for :func:`benchmarks.memory_lodo.score`: ``MemoryConfig(**fields)`` at ``l_max`` under setting ``name``."""
    shipped = ml.setting(dict(fields or {}), l_max)

    def run(rp: Any, query: str, qvec: Any) -> Any:
        with within(name):
            return shipped(rp, query, qvec)

    return run


def probe_coverage(
    rps: Sequence[Any], qvecs: Sequence[Any], l_max: int, settings: Sequence[str] = SETTINGS, within: Within = variant, fields: Fields = None
) -> dict[str, dict[str, float]]:
    """Each setting's mean share of the probed reply's tokens kept, and the share kept whole
    (:func:`benchmarks.memory_anchor.coverage`), over follow-up probes (``fields``: a setting's
    ``MemoryConfig`` fields, if any)."""
    counter, out = get_token_counter(), {}
    for name in settings:
        with within(name):
            cfg = MemoryConfig(l_max=l_max, **(fields or {}).get(name, {}))
            cov = [anchor.coverage(rp.memory(rp.conv.questions[0].text, qv[0], cfg)[0], rp, counter) for rp, qv in zip(rps, qvecs, strict=True)]
        out[name] = {"coverage": round(float(np.mean(cov)), 4), "whole": round(float(np.mean([c == 1.0 for c in cov])), 4)}
    return out


def measure(data: Path, settings: Sequence[str], within: Within, name: str, fields: Fields = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each setting's dev rows per set and budget (:func:`benchmarks.memory_ranker.rows_at`) and its
    follow-up probe coverage, ``within`` putting each setting's code in force and ``fields`` giving
    a setting's ``MemoryConfig`` fields, if any."""
    t0 = time.perf_counter()
    sets = {n: s for n, s in ml.conversations(data).items() if n in ml.LODO_SETS}
    dev: dict[str, dict[str, Any]] = {}
    follow: dict[str, dict[str, Any]] = {}
    for n, s in sets.items():
        reps, qvecs, stem = ml.dev_replays(s["dev"])
        prep = mr.Prepared(reps, qvecs, stem)
        dev[n] = {str(b): mr.rows_at(prep, {k: run_of(k, b, within, (fields or {}).get(k)) for k in settings}, b) for b in ml.BUDGETS}
        prb = ml.replays_of(probes(s["dev"], "dev"))
        follow[n] = {str(b): probe_coverage(*prb, b, settings, within, fields) for b in ml.BUDGETS} | {"probes": len(prb[0])}
        print(f"{name}: {n} done at {time.perf_counter() - t0:.0f}s", flush=True)
    embedder().save()
    return dev, follow


def run(data: Path) -> dict[str, Any]:
    """Every setting's dev rows, and the rule's choice."""
    t0 = time.perf_counter()
    dev, follow = measure(data, SETTINGS, variant, "memory_lean")
    out: dict[str, Any] = {"protocol": __doc__, "settings": list(SETTINGS), "dev": dev, "follow_ups": follow, "rule": mr.choose(dev, SETTINGS)}
    out["chosen"] = mr.choose(dev, KEEP_FOLLOW_UPS)["chosen"]  # the rule among the settings the condition allows
    out["shipped"] = "shipped"  # the follow-up probes' coverage overturned the choice (module docstring)
    return {**out, "elapsed_s": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    """Dev rows, written to benchmarks/results/memory_lean.json."""
    dev_main("memory_lean", run, __doc__, argv)


if __name__ == "__main__":
    main()
