"""One query's rebuild between reading a session and rendering its context, as pure functions:
the anchor and the other decisions (:mod:`meve.memory.decide`), the signals pooled, fused and
weighed by role, then the fill (:mod:`meve.memory.select`). What the rebuild reads is handed in
(every turn's BM25 score for the query, a vector search), so :meth:`meve.MomentaryMemory.reconstruct`
runs it on its session's live signals and :class:`meve.evaluate.replay.Replay` on precomputed
ones: what ``evaluate_memory``, ``tune_memory`` and the benchmarks measure is one implementation
with what ships, roles skipped and kept included."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from meve.core.config import MemoryConfig
from meve.core.tokens import TokenCounter
from meve.memory.decide import Decisions, Nearby, decide
from meve.memory.log import Snapshot
from meve.memory.select import Selection, fuse, rank, select_turns, weigh_roles
from meve.memory.signals import bm25_pool, nearest, said_before, stated, vector_pool

__all__ = ["Candidates", "Search", "candidates", "choose"]

#: A vector search of the turns outside a set of positions, for ``n`` results: each embedder's name
#: -> per query (row 0 the whole query, then a long query's sentences) (position, cosine), best first.
Search = Callable[[set[int], int], Mapping[str, list[list[tuple[int, float]]]]]


@dataclass(frozen=True)
class Candidates:
    """What a rebuild decided for one query and how it scored the turns it may choose: ``cfg``
    with the decisions applied (dates decided; ``recent_turns`` 0 when the latest exchange is not
    kept first), the ``recent`` and ``pinned`` (kept-role) positions that go in first, each signal's
    pool (``dense`` by embedder name), the fused scores weighed by role, the roles never chosen, and
    what the user said that bears on the query (``stated``: (position, cosine), nearest first,
    :func:`meve.memory.signals.stated`)."""

    cfg: MemoryConfig
    decided: Decisions
    recent: list[int]
    pinned: list[int]
    bm25: dict[int, float]
    dense: dict[str, dict[int, float]]
    fused: Mapping[int, float]
    skip_roles: tuple[str, ...] = ()
    stated: tuple[tuple[int, float], ...] = ()

    @property
    def first(self) -> set[int]:
        """The positions that go in before any turn chosen by relevance."""
        return set(self.recent) | set(self.pinned)


def candidates(
    query: str,
    cfg: MemoryConfig,
    snap: Snapshot,
    *,
    scores: np.ndarray,
    search: Search,
    weights: Mapping[str, float],
    candidate_pool: int,
    latest: Sequence[int],
    kept_roles: Sequence[int] = (),
    skipped: Collection[int] = (),
    skip_roles: Sequence[str] = (),
) -> Candidates:
    """Decide and score one query's candidates. ``scores``: every turn's BM25 score for the query
    (changed in place); ``search``: the vector search (:data:`Search`, the first embedder's cosines
    decide the anchor); ``weights``: per signal (:func:`meve.memory.select.signal_weights`, its
    order names the embedders); ``latest``: the most recent positions that may be kept first
    (:func:`meve.memory.select.latest_turns`); ``kept_roles``: positions of a role kept first;
    ``skipped``: positions never chosen (the exchange an adapter sends verbatim), as are turns of
    ``skip_roles``. Each signal's pool is the best ``candidate_pool`` (more for a large budget or
    ``top_k``) outside what goes in first."""
    names = [k.removeprefix("dense:") for k in weights if k.startswith("dense:")]
    cap = cfg.top_k if cfg.top_k is not None else snap.n
    pool, hidden = max(candidate_pool, 4 * cap if cfg.top_k is not None else cfg.l_max // 8), set(skipped) | set(kept_roles)
    # Searched before the anchor is decided: how near the query comes to a turn before it is one of its reasons.
    hits = search(hidden, pool + len(latest)) if snap.n > len(hidden) and cap > 0 else {}
    near = nearest(hits[names[0]], set(latest), snap.turns, skip_roles) if hits else None
    decided = decide(cfg, query, Nearby(said_before(scores, snap.turns, set(skipped) | set(latest), skip_roles), near))
    cfg = cfg.replace(dates=decided.dates, recent_turns=cfg.recent_turns if decided.keep_recent else 0)
    recent = list(latest) if decided.keep_recent else []
    pinned = [i for i in kept_roles if i not in recent]
    first = set(recent) | set(pinned)
    searched = snap.n > len(first) + len(skipped) and cap > 0
    bm25 = bm25_pool(scores, first | set(skipped), pool) if searched else {}
    dense = {n: vector_pool(hits[n], first, pool) if searched and hits else {} for n in names}
    told = stated(hits[names[0]], first | set(skipped), snap.turns, skip_roles, cfg.follow_up_cosine) if searched and hits and cfg.user_statements else []
    fused = weigh_roles(fuse({"bm25": bm25, **{f"dense:{n}": v for n, v in dense.items()}}, weights, cfg.fusion, cfg.rrf_k), snap.turns, decided.role)
    return Candidates(cfg, decided, recent, pinned, bm25, dense, fused, tuple(skip_roles), tuple(told))


def choose(query: str, snap: Snapshot, counter: TokenCounter, found: Candidates, partner: Callable[[int], int | None]) -> Selection:
    """The fill over ``found`` (:func:`meve.memory.select.select_turns`): ranked by fused score, no
    turn of a skipped role; ``partner`` gives a turn's partner turn (none of a skipped role)."""
    ranked = rank(found.fused, snap.keys)
    if found.skip_roles:
        ranked = [i for i in ranked if snap.turns[i].role not in found.skip_roles]
    return select_turns(
        snap,
        found.cfg,
        counter,
        recent=found.recent,
        pinned=found.pinned,
        ranked=ranked,
        partner=partner,
        scores=found.fused,
        query=query,
        recent_cap=found.decided.recent_cap,
        stated=found.stated,
    )
