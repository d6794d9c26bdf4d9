"""The two signals a rebuild fuses, read for the candidate pool: BM25 over the turn log, and each
embedder's vector score from its Chroma collection (for a long query, the pool of the whole query
and of each of its sentences, scored by :func:`meve.memory.select.sentence_scores`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from meve.core.config import MemoryConfig
from meve.core.logs import log
from meve.memory.records import Turn
from meve.memory.select import sentence_scores

__all__ = ["STATED_NEAREST", "bm25_pool", "nearest", "said_before", "stated", "vector_hits", "vector_pool", "warn_if_unfitted"]


def bm25_pool(scores: np.ndarray, exclude: set[int], pool: int) -> dict[int, float]:
    """Position -> BM25 score of the ``pool`` best turns outside ``exclude`` that match at all
    (``scores`` is changed in place: the excluded turns score 0)."""
    if not scores.size:
        return {}
    scores[list(exclude)] = 0.0
    k = min(pool, scores.size)
    top = np.argpartition(-scores, k - 1)[:k]
    return {int(i): float(scores[i]) for i in top if scores[i] > 0}


def said_before(scores: np.ndarray, turns: Sequence[Turn], skip: Collection[int], skip_roles: Collection[str]) -> bool:
    """Whether a turn before the latest exchange holds a word of the query: ``scores`` is BM25 over
    every turn (above 0 exactly where a turn holds one of the query's terms), ``turns`` the turns
    it scored; those in ``skip`` (the latest exchange, and the one an adapter sends verbatim, the
    query itself among them) or of a role in ``skip_roles`` (never chosen) do not count."""
    return any(i not in skip and turns[i].role not in skip_roles for i in np.flatnonzero(scores > 0).tolist())


def vector_hits(
    search: Callable[..., Mapping[str, Any]], queries: np.ndarray, index: Mapping[str, int], n: int, exclude: set[int], n_results: int
) -> list[list[tuple[int, float]]]:
    """What ``search`` (a Chroma collection's ``query``) finds for ``queries`` (row 0 the whole
    query, then a long query's sentences) among the first ``n`` turns and outside ``exclude``: per
    query, (position, cosine) best first."""
    res = search(query_embeddings=list(queries), n_results=n_results, include=["distances"])
    out = []
    for ids, dists in zip(res["ids"], res["distances"], strict=True):
        found = ((_position(index, pid, n, exclude), 1.0 - float(d)) for pid, d in zip(ids, dists, strict=True))
        out.append([(i, c) for i, c in found if i is not None])
    return out


def vector_pool(hits: list[list[tuple[int, float]]], drop: Collection[int], pool: int) -> dict[int, float]:
    """Position -> vector score of the turns :func:`vector_hits` found, each query's ``pool`` best
    outside ``drop``: 1 - the cosine distance for one query; for several, scored by
    :func:`sentence_scores`. Each pool is the ``pool`` best outside what the rebuild excludes, as
    the replay's, so its lowest cosine and its min-max range agree."""
    return sentence_scores([dict(itertools.islice(((i, c) for i, c in h if i not in drop), pool)) for h in hits])


def nearest(hits: list[list[tuple[int, float]]], skip: Collection[int], turns: Sequence[Turn] = (), skip_roles: Collection[str] = ()) -> float | None:
    """The whole query's best cosine with a turn outside ``skip`` (the latest exchange) and not of
    a role in ``skip_roles`` (never chosen: a stored system prompt says nothing of what the query is
    about), as :func:`said_before` reads them; None when the search found no such turn."""
    return next((c for _, c in _outside(hits, skip, turns, skip_roles)), None)


#: How many of the turns nearest the query :func:`stated` looks among: the user's statement and
#: one that may revise it ("I'm vegetarian" ... "I eat fish now"). Chosen among the settings of
#: benchmarks/memory_statements.py on the dev splits (BENCHMARKS.md, "What the user told it").
STATED_NEAREST = 2


def stated(
    hits: list[list[tuple[int, float]]], drop: Collection[int], turns: Sequence[Turn], skip_roles: Collection[str], bar: float | None
) -> list[tuple[int, float]]:
    """What the user told the memory that bears on the query: of the :data:`STATED_NEAREST` turns
    the whole query's vector finds nearest outside ``drop`` (what goes in first, and what the call
    skips) and not of a role in ``skip_roles``, the user's whose cosine reaches ``bar`` (the
    memory's "about the query" cosine, ``follow_up_cosine``); (position, cosine), nearest first.
    None for ``bar`` or no search: nothing."""
    if bar is None:
        return []
    near = itertools.islice(_outside(hits, drop, turns, skip_roles), STATED_NEAREST)
    return [(i, c) for i, c in near if turns[i].role == "user" and c >= bar]


def _outside(hits: list[list[tuple[int, float]]], skip: Collection[int], turns: Sequence[Turn], skip_roles: Collection[str]) -> Iterator[tuple[int, float]]:
    """The whole query's hits (best first) outside ``skip`` and not of a role in ``skip_roles``."""
    return ((i, c) for i, c in (hits[0] if hits else ()) if i not in skip and not (skip_roles and turns[i].role in skip_roles))


#: The embedder whose cosines ``MemoryConfig.follow_up_cosine``'s default was chosen on.
FOLLOW_UP_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_COSINE = next(f.default for f in fields(MemoryConfig) if f.name == "follow_up_cosine")
_warned: set[str] = set()


def warn_if_unfitted(cfg: MemoryConfig, embedder: str) -> bool:
    """Log a warning (once per embedder name in a process) when ``cfg`` uses the default
    ``follow_up_cosine`` (``keep_recent`` "short" or True, or ``user_statements``) with an embedder it was not chosen for:
    another model's cosines sit elsewhere (some never fall under 0.3, so the rule would never
    fire), and a silent threshold would decide on a scale it does not know. Whether it warned."""
    cosine = cfg.follow_up_cosine
    used = cfg.keep_recent == "short" or cfg.keep_recent is True or cfg.user_statements
    if not used or cosine is None or cosine != _DEFAULT_COSINE or FOLLOW_UP_MODEL in embedder or embedder in _warned:
        return False
    _warned.add(embedder)
    log.warning(
        "meve: follow_up_cosine %g is a cosine of %s, the default embedder; the memory's first embedder is %r, whose cosines "
        "may sit elsewhere. Set MemoryConfig(follow_up_cosine=...) for its scale, or None to decide follow-ups by their words "
        "alone and recall no user statement first (docs/concepts/memory.md, 'The latest exchange')",
        cosine,
        FOLLOW_UP_MODEL,
        embedder,
    )
    return True


def _position(index: Mapping[str, int], pid: str, n: int, exclude: set[int]) -> int | None:
    i = index.get(pid)
    return i if i is not None and i < n and i not in exclude else None
