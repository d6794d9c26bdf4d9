"""Per-candidate features for a learned ranking of a chat memory's turns (issue 76), as pure
functions: what a rebuild already reads for one query (each turn's vector and BM25 scores, where it
stands in the conversation, its role, whether it is part of the latest exchange, its partner turn's
scores, the query's wording) as a small matrix that a model of a few weights scores
(:mod:`meve.memory.ranker`).

Every feature is relative to the query's own candidates: ranks, scores against the query's best,
shares of the query's terms. Raw scores sit on each conversation's own scale (BM25 grows with a
query's length and its words' rarity; cosines differ by embedder, language and topic), so one set of
weights can serve every conversation only if it never reads their level. Scaling a query's raw
scores by any positive factor leaves its matrix unchanged (tested).

Not wired into :class:`meve.MomentaryMemory`: ``benchmarks/memory_ranker.py`` trains and measures
it first (docs/design/memory-ranker.md)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Collection, Mapping, Sequence, Sized
from dataclasses import dataclass

import numpy as np

from meve.core.config import asks_about_time
from meve.memory.decide import decide_role, follow_up_words
from meve.memory.log import Snapshot

__all__ = ["FEATURES", "NAMES", "QuerySignals", "gather", "idf", "matrix", "term_coverage"]

#: Each feature, and why it is there (the rule of decide.py or select.py it stands in for, if any).
FEATURES: dict[str, str] = {
    "dense_rel": "the vector score min-max scaled over the query's candidates (1: the nearest): how near the turn is, on the query's own scale",
    "dense_rr": "1 / (1 + the turn's rank by vector score): the rank alone, as reciprocal rank fusion reads it, robust to one outlying score",
    "bm25_rel": "the BM25 score over the query's best (1: the best): how much of the query's wording the turn holds, on the query's own scale",
    "bm25_rr": "1 / (1 + the turn's rank by BM25 score), 0 for a turn that holds no query term",
    "coverage": "the share of the query's term weight (idf) the turn holds: a turn that holds the rare name asked about beats one that "
    "repeats a common opening word ('remind', 'should'), which BM25's sum can rank alike",
    "recency": "1 - log(1 + turns after it) / log(the conversation's turns): a mild prior for newer turns (an update beats the fact it replaces)",
    "latest": "part of the latest exchange: a candidate like any other, with its own weight",
    "latest_brevity": "latest x 1 / sqrt(the query's words): a short query leans on what was just said ('Continue'); stands in for "
    "short_query / leans_on_latest's six-word rule",
    "latest_unsaid": "latest x no other candidate holds a query term: a query about what was just said; stands in for said_before",
    "latest_follow_up": "latest x the query opens as a follow-up or refers back ('and ...', 'it', 'that'): follow_up_words, as a weight",
    "role_match": "+1 when the turn's role is the one the query asks about (first person alone: the user's; second person alone: the "
    "assistant's), -1 when it is the other, 0 when the query names neither or both; stands in for weigh_roles' fixed discount",
    "user": "the turn is the user's: what the user said about themselves is asked about more often than what was said to them",
    "partner_dense": "the partner turn's dense_rel (0: none): a reply whose question matches; stands in for partner_weight's fixed worth",
    "partner_bm25": "the partner turn's bm25_rel (0: none)",
    "time_recency": "recency x the query asks about time ('yesterday', 'last week'): such a query weighs when a turn was said",
    "length": "log(the turn's tokens / the candidates' median), clipped to [-4, 4]: a long turn holds more, and costs more of the budget",
    "bm25_long_query": "bm25_rel x min(1, log(1 + query words) / log(65)): a long query shares common words with many turns, so BM25 "
    "says less for it; stands in for nothing (query_sentences handles the vectors' side)",
}
NAMES: tuple[str, ...] = tuple(FEATURES)
_LENGTH_CLIP = 4.0
_LONG_QUERY_WORDS = 64


@dataclass(frozen=True)
class QuerySignals:
    """One query's candidate turns as a rebuild reads them, one entry per candidate.

    ``positions``: the turns' positions in the snapshot; ``dense``: the vector score (NaN where the
    search did not return the turn); ``bm25``: the BM25 score (0 where the turn holds no query term);
    ``coverage``: the share of the query's term weight the turn holds (:func:`term_coverage`);
    ``age``: how many turns come after it (0: the newest); ``tokens``: its rendered line's tokens;
    ``roles``; ``latest``: part of the latest exchange; ``partner``: the index, in these arrays, of
    its partner turn (-1: none among the candidates); ``n_turns``: the conversation's turns."""

    query: str
    positions: np.ndarray
    dense: np.ndarray
    bm25: np.ndarray
    coverage: np.ndarray
    age: np.ndarray
    tokens: np.ndarray
    roles: tuple[str, ...]
    latest: np.ndarray
    partner: np.ndarray
    n_turns: int

    def __post_init__(self) -> None:
        n = len(self.positions)
        arrays: dict[str, Sized] = {"dense": self.dense, "bm25": self.bm25, "coverage": self.coverage, "age": self.age, "tokens": self.tokens}
        arrays |= {"roles": self.roles, "latest": self.latest, "partner": self.partner}
        sizes = {k: len(v) for k, v in arrays.items() if len(v) != n}
        if sizes:
            raise ValueError(f"QuerySignals: every field holds one entry per candidate ({n} positions); got {sizes}")
        if n and (self.partner.min() < -1 or self.partner.max() >= n):
            raise ValueError(f"QuerySignals: partner holds indices into the candidates (0..{n - 1}) or -1 for none")

    def __len__(self) -> int:
        return len(self.positions)


def idf(terms: Sequence[str], df: Mapping[str, int], n: int) -> dict[str, float]:
    """Each query term's BM25 idf over ``n`` turns, ``df`` the turns that hold it (the formula of
    :class:`meve.retrieval.bm25.IncrementalBM25`)."""
    return {t: math.log(1.0 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in terms}


def term_coverage(weights: Mapping[str, float], held: Sequence[Collection[str]]) -> np.ndarray:
    """Per turn, the share of the query's term weight (``weights``: term -> idf) among the terms it
    holds (``held``, e.g. :func:`meve.retrieval.terms.terms_held`); 0 for a query with no terms."""
    total = sum(weights.values())
    if not total > 0:
        return np.zeros(len(held))
    return np.asarray([sum(weights.get(t, 0.0) for t in set(h)) / total for h in held], dtype=np.float64)


def gather(
    query: str,
    snap: Snapshot,
    *,
    dense: Mapping[int, float],
    bm25: Mapping[int, float],
    latest: Sequence[int],
    partner: Callable[[int], int | None],
    coverage: Callable[[Sequence[int]], np.ndarray],
    skip: Collection[int] = (),
    skip_roles: Collection[str] = (),
) -> QuerySignals:
    """One query's candidates: the latest exchange (``latest``), every turn of the vector pool
    (``dense``: position -> score) and of the BM25 pool (``bm25``), and each one's partner turn
    (``partner``), none of ``skip`` or of ``skip_roles``. A turn outside the vector pool has no
    vector score (NaN: the memory's search returns only its pool); outside the BM25 pool, 0 (the
    pool holds every turn that matches, up to its size). ``coverage`` gives the candidates'
    :func:`term_coverage`. O(candidates x log turns): nothing reads every turn."""

    def allowed(i: int) -> bool:
        return i < snap.n and i not in skip and snap.turns[i].role not in skip_roles

    pooled = [i for i in dict.fromkeys([*latest, *dense, *bm25]) if allowed(i)]
    pairs: dict[int, int] = {}
    for i in pooled:
        j = partner(i)
        if j is not None and allowed(j):
            pairs[i] = j
    positions = list(dict.fromkeys([*pooled, *pairs.values()]))
    at, recent = {p: k for k, p in enumerate(positions)}, set(latest)
    newest = len(snap.chrono) - 1
    age = [newest - bisect.bisect_left(snap.chrono, snap.keys[i], key=snap.keys.__getitem__) for i in positions]
    return QuerySignals(
        query=query,
        positions=np.asarray(positions, dtype=np.int64),
        dense=np.asarray([dense.get(i, math.nan) for i in positions], dtype=np.float64),
        bm25=np.asarray([bm25.get(i, 0.0) for i in positions], dtype=np.float64),
        coverage=np.asarray(coverage(positions), dtype=np.float64) if positions else np.zeros(0),
        age=np.asarray(age, dtype=np.int64),
        tokens=np.asarray([snap.tokens[i] for i in positions], dtype=np.int64),
        roles=tuple(snap.turns[i].role for i in positions),
        latest=np.asarray([i in recent for i in positions], dtype=bool),
        partner=np.asarray([at[pairs[i]] if i in pairs else -1 for i in positions], dtype=np.int64),
        n_turns=snap.n,
    )


def matrix(sig: QuerySignals, names: Sequence[str] = NAMES) -> np.ndarray:
    """The candidates' features (one row per candidate, one column per name of ``names``, each a
    key of :data:`FEATURES`), float64."""
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise ValueError(f"features {unknown} are not known: allowed {', '.join(NAMES)}")
    if not len(sig):
        return np.zeros((0, len(names)))
    cols = _columns(sig)
    return np.column_stack([cols[n] for n in names]).astype(np.float64)


def _columns(sig: QuerySignals) -> dict[str, np.ndarray]:
    dense_rel = _minmax(sig.dense)
    bm = np.where(np.isfinite(sig.bm25) & (sig.bm25 > 0), sig.bm25, 0.0)
    bm25_rel = bm / bm.max() if bm.max() > 0 else np.zeros(len(bm))
    recency = 1.0 - np.log1p(sig.age) / math.log1p(max(sig.n_turns - 1, 1))
    latest = sig.latest.astype(np.float64)
    words = max(1, len(sig.query.split()))
    role, _ = decide_role(True, sig.query)
    roles = np.asarray(sig.roles, dtype=object)
    paired = sig.partner >= 0
    tokens = np.maximum(sig.tokens, 1).astype(np.float64)
    return {
        "dense_rel": dense_rel,
        "dense_rr": _reciprocal_rank(sig.dense, sig.age),
        "bm25_rel": bm25_rel,
        "bm25_rr": _reciprocal_rank(np.where(bm > 0, bm, math.nan), sig.age),
        "coverage": np.clip(sig.coverage, 0.0, 1.0),
        "recency": np.clip(recency, 0.0, 1.0),
        "latest": latest,
        "latest_brevity": latest / math.sqrt(words),
        "latest_unsaid": latest * float(not np.any(bm[~sig.latest] > 0)),
        "latest_follow_up": latest * float(follow_up_words(sig.query) is not None),
        "role_match": np.zeros(len(sig)) if role is None else np.where(roles == role, 1.0, -1.0),
        "user": (roles == "user").astype(np.float64),
        "partner_dense": np.where(paired, dense_rel[np.maximum(sig.partner, 0)], 0.0),
        "partner_bm25": np.where(paired, bm25_rel[np.maximum(sig.partner, 0)], 0.0),
        "time_recency": recency * float(asks_about_time(sig.query)),
        "length": np.clip(np.log(tokens / np.median(tokens)), -_LENGTH_CLIP, _LENGTH_CLIP),
        "bm25_long_query": bm25_rel * min(1.0, math.log1p(words) / math.log1p(_LONG_QUERY_WORDS)),
    }


def _minmax(x: np.ndarray) -> np.ndarray:
    """Known scores min-max scaled to [0, 1] (all 1 when they are equal); an unknown one (NaN) is 0,
    at or below the lowest known, since a search returns its best first."""
    known = np.isfinite(x)
    out = np.zeros(len(x))
    if not known.any():
        return out
    lo, hi = x[known].min(), x[known].max()
    out[known] = (x[known] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def _reciprocal_rank(x: np.ndarray, age: np.ndarray) -> np.ndarray:
    """1 / (1 + rank) by ``x``, best first, ties to the newer turn; 0 where ``x`` is unknown (NaN)."""
    known = np.isfinite(x)
    key = np.where(known, x, -np.inf)
    order = np.lexsort((age, -key))
    out = np.zeros(len(x))
    out[order] = 1.0 / (1.0 + np.arange(len(x)))
    return np.where(known, out, 0.0)
