"""The MeVe phases as small pure functions over tuples of frozen :class:`Passage` records.

Model calls (embedding, scoring, store lookups) happen in the runner
(:mod:`meve.pipeline.runner`); each phase gets the numbers it needs and returns what it kept and
what it dropped, with the reason. Inputs are never mutated, and no phase touches the trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from meve.core.budget import Ledger, shrink_to_fit
from meve.core.records import Dropped, Passage
from meve.core.tokens import TokenCounter
from meve.retrieval.terms import stemmed_tokenize, terms_held

__all__ = [
    "PhaseOutput",
    "cover_query",
    "drop_redundant",
    "fallback",
    "head_threshold",
    "novelty_select",
    "pack_budget",
    "pack_context",
    "pad",
    "rankable",
    "unit_rows",
    "verify",
    "verify_query",
]


@dataclass(frozen=True)
class PhaseOutput:
    """What a phase kept (in priority order), what it dropped and why, and facts for the trace."""

    kept: tuple[Passage, ...]
    dropped: tuple[Dropped, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)


def rankable(values: Any) -> np.ndarray:
    """``values`` as float64 with NaN as -inf: a score that is not a number ranks lowest
    (``np.argmax`` and ``max`` would pick or keep a NaN, and every comparison with it is False)."""
    arr = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(arr), -np.inf, arr)


def head_threshold(scores: Sequence[float], cut: str, ratio: float) -> tuple[float, str] | None:
    """The lowest score still in the head of one query's score distribution, and the rule's words.

    ``"gap"``: everything above the largest drop between consecutive sorted scores (Adaptive-k,
    Taguchi et al. 2025). ``"ratio"``: every score >= ``ratio`` x the best. ``"none"``: no head cut.
    A NaN score is no evidence of anything: the head is drawn over the others.
    """
    ordered = sorted((float(s) for s in scores if not np.isnan(s)), reverse=True)
    if cut == "none" or len(ordered) < 2:
        return None
    if cut == "ratio":
        return ordered[0] * ratio, f"< {ratio} x best {ordered[0]:.3f}"
    if cut == "gap":
        gaps = [ordered[i] - ordered[i + 1] for i in range(len(ordered) - 1)]
        i = int(np.argmax(rankable(gaps)))
        return ordered[i], f"below the largest score gap ({ordered[i]:.3f} -> {ordered[i + 1]:.3f})"
    raise ValueError(f"cut={cut!r}: expected 'none', 'gap' or 'ratio'")


def verify(candidates: Sequence[Passage], scores: Sequence[float], tau: float, *, cut: str = "none", cut_ratio: float = 0.5) -> PhaseOutput:
    """Phase 2: keep candidates whose verifier score is >= tau and, with an adaptive ``cut``, in the
    head of this query's scores (:func:`head_threshold`); best first (stable on ties).
    ``info["cut"]`` lists the ids that passed tau but fell outside the head. A NaN score ranks
    lowest: that candidate is dropped, saying so, and the head is drawn over the others."""
    if len(scores) != len(candidates):
        raise ValueError(f"verify got {len(scores)} scores for {len(candidates)} candidates")
    scored = [c.with_(relevance=float(s)) for c, s in zip(candidates, scores, strict=True)]
    head = head_threshold(scores, cut, cut_ratio)
    floor, why = head if head is not None else (-np.inf, "")
    kept = sorted((c.with_(source="verified") for c in scored if c.score >= tau and c.score >= floor), key=lambda c: -c.score)
    dropped = [Dropped(c.id, "relevance is NaN: the scorer gave no number, so it ranks lowest", c.score) for c in scored if np.isnan(c.score)]
    dropped += [Dropped(c.id, f"relevance {c.score:.3f} < tau {tau}", c.score) for c in scored if c.score < tau]
    outside = [c for c in scored if tau <= c.score < floor]
    dropped += [Dropped(c.id, f"relevance {c.score:.3f} outside the head: {why}", c.score) for c in outside]
    info: dict[str, Any] = {"cut": [c.id for c in outside]}
    if head is not None:
        info["head_threshold"] = round(floor, 4)
    return PhaseOutput(tuple(kept), tuple(dropped), info)


def cover_query(
    out: PhaseOutput,
    candidates: Sequence[Passage],
    scores: Sequence[float],
    query_terms: Sequence[str],
    terms: Sequence[frozenset[str]],
    coverage: float,
    *,
    floor: float = 0.0,
) -> PhaseOutput:
    """Phase 2, after tau and the cut: complete the verified passages' coverage of the query.

    A verifier scores each passage against the whole query, so for a question about two things
    ("Are X and Y both ...?") the passage about the second scores low and is cut. Walking the
    candidates the verifier left out, best first, one is kept when it holds query terms the
    kept passages lack, worth >= ``coverage`` of the query's weight. ``terms``: the query terms
    each candidate holds, in order; ``scores``: the verifier's, as :func:`verify` got them. A
    term's weight is its idf within the candidates, so a term every candidate shares adds next to
    nothing; query terms no candidate holds carry no weight. A candidate the verifier scores below
    ``floor`` is never kept: sharing a word with the query is not evidence when the passage is
    about something else ("bicycle" in a passage on the draisine).
    Nothing is added when nothing was verified: coverage completes evidence, it does not stand
    in for it (that is the fallback's job). Covered passages keep their relevance, with source
    "covered"; ``info["covered"]`` maps each to the terms it added and their share.
    """
    if not len(terms) == len(scores) == len(candidates):
        raise ValueError(f"cover_query got {len(terms)} term sets and {len(scores)} scores for {len(candidates)} candidates")
    if coverage <= 0.0 or not out.kept:
        return out
    n = len(candidates)
    df = {t: sum(t in ts for ts in terms) for t in dict.fromkeys(query_terms)}
    weight = {t: float(np.log1p((n - d + 0.5) / (d + 0.5))) for t, d in df.items() if d > 0}
    total = sum(weight.values())
    if total <= 0.0:
        return out
    kept_ids = {p.id for p in out.kept}
    covered = {t for p, ts in zip(candidates, terms, strict=True) if p.id in kept_ids for t in ts if t in weight}
    rest = sorted((i for i, p in enumerate(candidates) if p.id not in kept_ids and scores[i] >= floor), key=lambda i: -float(scores[i]))
    added: dict[str, Passage] = {}
    info: dict[str, dict[str, Any]] = {}
    for i in rest:
        new = [t for t in weight if t in terms[i] and t not in covered]
        share = sum(weight[t] for t in new) / total
        if new and share >= coverage:
            added[candidates[i].id] = candidates[i].with_(relevance=float(scores[i]), source="covered")
            info[candidates[i].id] = {"terms": new, "share": round(share, 4)}
            covered.update(new)
    if not added:
        return PhaseOutput(out.kept, out.dropped, {**out.info, "covered": {}})
    kept = sorted((*out.kept, *added.values()), key=lambda c: -c.score)
    dropped = tuple(d for d in out.dropped if d.id not in added)
    cut = [pid for pid in out.info.get("cut", ()) if pid not in added]
    return PhaseOutput(tuple(kept), dropped, {**out.info, "cut": cut, "covered": info})


def fallback(
    verified: Sequence[Passage],
    lexical: Sequence[Passage],
    n_min: int,
    fallback_k: int,
    *,
    min_bm25: float = 0.0,
    rejected: Mapping[str, float] | None = None,
    outside: Mapping[str, float] | None = None,
) -> PhaseOutput:
    """Phase 3: when fewer than n_min passed, append up to fallback_k BM25 results not already present.

    Only passages with lexical evidence qualify: a BM25 score above ``min_bm25``. A passage the
    verifier already rejected (``rejected``: id -> its score) or the adaptive cut left outside the
    head (``outside``) is not re-added; each skip is recorded with its reason.
    """
    if len(verified) >= n_min:
        return PhaseOutput(tuple(verified), info={"triggered": False})
    present = {c.id for c in verified}
    rejected = rejected or {}
    outside = outside or {}
    added: list[Passage] = []
    skipped: list[Dropped] = []
    already: list[str] = []
    for cand in lexical:
        if cand.id in present:
            already.append(cand.id)
            continue
        if len(added) >= fallback_k:
            break
        bm25 = cand.bm25_score if cand.bm25_score is not None else 0.0
        if bm25 <= min_bm25:
            skipped.append(Dropped(cand.id, f"no lexical evidence: BM25 {bm25:.2f} <= fallback_min_bm25 {min_bm25}", bm25))
        elif cand.id in rejected:
            skipped.append(Dropped(cand.id, f"rejected by the verifier (relevance {rejected[cand.id]:.3f})", rejected[cand.id]))
        elif cand.id in outside:
            skipped.append(Dropped(cand.id, f"left outside the head by the adaptive cut (relevance {outside[cand.id]:.3f})", outside[cand.id]))
        else:
            present.add(cand.id)
            added.append(cand.with_(source="fallback"))
    return PhaseOutput(tuple(verified) + tuple(added), tuple(skipped), {"triggered": True, "added": [c.id for c in added], "already_verified": already})


def verify_query(
    query: str,
    candidates: Sequence[Passage],
    scores: Sequence[float],
    tau: float,
    *,
    cut: str = "none",
    cut_ratio: float = 0.5,
    coverage: float = 0.0,
    coverage_floor: float = 0.0,
) -> PhaseOutput:
    """Phase 2 in full: :func:`verify` (tau and the adaptive cut), then, with ``coverage`` > 0,
    :func:`cover_query` over the query's stemmed terms, never keeping a passage scored below
    ``coverage_floor``."""
    out = verify(candidates, scores, tau, cut=cut, cut_ratio=cut_ratio)
    if coverage <= 0.0:
        return out
    terms = stemmed_tokenize(query)
    return cover_query(out, candidates, scores, terms, terms_held(terms, [p.text for p in candidates]), coverage, floor=coverage_floor)


def pad(out: PhaseOutput, candidates: Sequence[Passage], scores: Mapping[str, float], min_keep: int) -> PhaseOutput:
    """After the fallback: when fewer than ``min_keep`` passages are kept, the candidates the scorer
    scored best among those left out join them, source "padded", so the caller always gets
    ``min_keep`` passages when there are that many (``MeVeConfig.min_keep``). ``info["padded"]``
    names them; they keep their scores, so nobody mistakes them for verified evidence."""
    missing = min_keep - len(out.kept)
    if missing <= 0:
        return out
    present = {p.id for p in out.kept}
    rest = sorted((c for c in candidates if c.id not in present and c.id in scores), key=lambda c: -float(rankable(scores[c.id])))[:missing]
    added = tuple(c.with_(relevance=scores[c.id], source="padded") for c in rest)
    dropped = tuple(d for d in out.dropped if d.id not in {c.id for c in added})
    return PhaseOutput(out.kept + added, dropped, {**out.info, "padded": [c.id for c in added]})


def unit_rows(rows: Any, dtype: type[np.floating[Any]] = np.float64) -> np.ndarray:
    """``rows`` (a 2-d array or a list of vectors) scaled to unit length; a zero row stays zero."""
    vecs = np.asarray(rows, dtype=dtype).reshape(len(rows), -1)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.asarray(vecs / np.where(norms == 0, 1.0, norms), dtype=dtype)


def drop_redundant(candidates: Sequence[Passage], theta: float) -> PhaseOutput:
    """Phase 4 (redundancy): walk in priority order; drop a candidate whose cosine with an
    already-kept one exceeds theta. The higher-ranked of a pair always survives."""
    if not candidates:
        return PhaseOutput(())
    vecs = unit_rows(np.stack([_embedding(c) for c in candidates]))
    kept_idx: list[int] = []
    dropped: list[Dropped] = []
    for i, cand in enumerate(candidates):
        if kept_idx:
            sims = vecs[kept_idx] @ vecs[i]
            j = int(np.argmax(sims))
            if sims[j] > theta:
                dropped.append(Dropped(cand.id, f"near-duplicate of {candidates[kept_idx[j]].id} (cos {sims[j]:.3f} > {theta})", float(sims[j])))
                continue
        kept_idx.append(i)
    return PhaseOutput(tuple(candidates[i] for i in kept_idx), tuple(dropped))


def novelty_select(candidates: Sequence[Passage], lam: float, theta: float) -> PhaseOutput:
    """Phase 4 (novelty, SARA-style): greedily pick the candidate with the best
    ``lam * relevance - (1 - lam) * max cos(selected)``; a candidate whose best
    similarity to the selection exceeds theta adds nothing new and is dropped.
    The result is ordered by selection, so the budget packs the most informative first."""
    if not candidates:
        return PhaseOutput(())
    vecs = unit_rows(np.stack([_embedding(c) for c in candidates]))
    rel = rankable([c.score for c in candidates])
    remaining = list(range(len(candidates)))
    chosen: list[int] = []
    dropped: list[Dropped] = []
    max_sim = np.zeros(len(candidates), dtype=np.float64)
    while remaining:
        with np.errstate(invalid="ignore"):  # lam=0 makes 0 x -inf (a NaN relevance) a NaN gain: rankable puts it last
            gains = lam * rel[remaining] - (1.0 - lam) * max_sim[remaining]
        pick = remaining.pop(int(np.argmax(rankable(gains))))
        if chosen and max_sim[pick] > theta:
            dropped.append(Dropped(candidates[pick].id, f"adds no novelty (cos {max_sim[pick]:.3f} > {theta} to the selection)", float(max_sim[pick])))
            continue
        chosen.append(pick)
        max_sim = np.maximum(max_sim, vecs @ vecs[pick])
    return PhaseOutput(tuple(candidates[i] for i in chosen), tuple(dropped), {"order": [candidates[i].id for i in chosen]})


def _embedding(c: Passage) -> np.ndarray:
    # Prioritisation compares passages by their embeddings: a candidate without one is a caller's bug.
    if c.embedding is None:
        raise ValueError(f"passage {c.id!r} has no embedding; prioritisation needs one per candidate")
    return np.asarray(c.embedding, dtype=np.float64)


def pack_budget(
    candidates: Sequence[Passage],
    token_counts: Sequence[int],
    t_max: int,
    separator_tokens: int,
    max_passages: int | None = None,
    cut: Callable[[Passage, int, int, bool], Passage | None] | None = None,
) -> PhaseOutput:
    """Phase 5: packing in priority order, never over t_max (nor ``max_passages`` passages).

    A passage that fits is taken whole. The first that does not is offered to ``cut`` (passage,
    its tokens, the room left, whether nothing is taken yet -> the passage cut to its best part
    within the room, or None), so a
    passage is never passed over for a lower-ranked one that fits whole while its best part would
    have fitted (issue 77: a 0.99 node of 1,000 tokens lost to a 0.87 node of 400 at t_max 512).
    One cut at most: after it the room left is less than the cut passage's next sentence. A
    passage neither taken nor cut is skipped (recorded), smaller later ones may still fit, and the
    next that does not fit is offered to ``cut`` in turn.
    ``info["cut"]`` maps the cut passage to its tokens whole and kept."""
    ledger = Ledger(t_max, separator_tokens)
    kept: list[Passage] = []
    dropped: list[Dropped] = []
    cuts: dict[str, dict[str, int]] = {}
    for cand, tokens in zip(candidates, token_counts, strict=True):
        if max_passages is not None and len(kept) >= max_passages:
            dropped.append(Dropped(cand.id, f"max_passages {max_passages} reached", float(tokens)))
            continue
        if ledger.take(tokens) is not None:
            kept.append(cand.with_(tokens=tokens))
            continue
        part = cut(cand, tokens, ledger.room, not kept) if cut is not None and not cuts and ledger.room > 0 else None
        if part is not None and part.tokens is not None and ledger.take(part.tokens) is not None:
            kept.append(part)
            cuts[cand.id] = {"tokens_whole": tokens, "tokens_kept": part.tokens}
            continue
        dropped.append(Dropped(cand.id, f"over budget: needs {ledger.cost(tokens)} tokens, {ledger.left} left", float(tokens)))
    return PhaseOutput(tuple(kept), tuple(dropped), {"packed_tokens": ledger.used, "cut": cuts})


def pack_context(
    passages: Sequence[Passage],
    counts: Sequence[int],
    counter: TokenCounter,
    t_max: int,
    separator: str,
    max_passages: int | None = None,
    cut: Callable[[Passage, int, int, bool], Passage | None] | None = None,
) -> tuple[PhaseOutput, str, int]:
    """The one budget packer for passage contexts: packing (:func:`pack_budget`, with its one
    ``cut``), then the joined text is counted, because a join can tokenise longer than its parts,
    and trailing passages are dropped until the rendered context fits. Returns (what was kept,
    context, its tokens)."""
    out = pack_budget(passages, counts, t_max, counter.count(separator), max_passages, cut)
    kept, over, context, total = shrink_to_fit(list(out.kept), lambda ps: separator.join(p.text for p in ps), counter, t_max)
    dropped = list(out.dropped) + [Dropped(p.id, f"joined context was {n} tokens > t_max {t_max}", float(p.tokens or 0)) for p, n in over]
    return PhaseOutput(tuple(kept), tuple(dropped), out.info), context, total
