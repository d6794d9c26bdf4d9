"""The MeVe phases as small pure functions over tuples of frozen :class:`Passage` records.

Model calls (embedding, cross-encoder scoring, store lookups) happen in the
pipeline; each phase gets the numbers it needs and returns what it kept and what
it dropped, with the reason. Inputs are never mutated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from meve.budget import Ledger
from meve.records import Dropped, Passage

__all__ = [
    "ANAPHOR",
    "GAP_MARK",
    "PhaseOutput",
    "cover_query",
    "drop_redundant",
    "fallback",
    "head_threshold",
    "novelty_select",
    "pack_budget",
    "prune_sentences",
    "unit_rows",
    "verify",
]


@dataclass(frozen=True)
class PhaseOutput:
    kept: tuple[Passage, ...]
    dropped: tuple[Dropped, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)


def head_threshold(scores: Sequence[float], cut: str, ratio: float) -> tuple[float, str] | None:
    """The lowest score still in the head of one query's score distribution, and the rule's words.

    ``"gap"``: everything above the largest drop between consecutive sorted scores (Adaptive-k,
    Taguchi et al. 2025). ``"ratio"``: every score >= ``ratio`` x the best. ``"none"``: no head cut.
    """
    ordered = sorted((float(s) for s in scores), reverse=True)
    if cut == "none" or len(ordered) < 2:
        return None
    if cut == "ratio":
        return ordered[0] * ratio, f"< {ratio} x best {ordered[0]:.3f}"
    if cut == "gap":
        gaps = [ordered[i] - ordered[i + 1] for i in range(len(ordered) - 1)]
        i = int(np.argmax(gaps))
        return ordered[i], f"below the largest score gap ({ordered[i]:.3f} -> {ordered[i + 1]:.3f})"
    raise ValueError(f"cut={cut!r}: expected 'none', 'gap' or 'ratio'")


def verify(candidates: Sequence[Passage], scores: Sequence[float], tau: float, *, cut: str = "none", cut_ratio: float = 0.5) -> PhaseOutput:
    """Phase 2: keep candidates whose verifier score is >= tau and, with an adaptive ``cut``, in the
    head of this query's scores (:func:`head_threshold`); best first (stable on ties).
    ``info["cut"]`` lists the ids that passed tau but fell outside the head."""
    if len(scores) != len(candidates):
        raise ValueError(f"verify got {len(scores)} scores for {len(candidates)} candidates")
    scored = [c.with_(relevance=float(s)) for c, s in zip(candidates, scores, strict=True)]
    head = head_threshold(scores, cut, cut_ratio)
    floor, why = head if head is not None else (-np.inf, "")
    kept = sorted((c.with_(source="verified") for c in scored if c.score >= tau and c.score >= floor), key=lambda c: -c.score)
    dropped = [Dropped(c.id, f"relevance {c.score:.3f} < tau {tau}", c.score) for c in scored if c.score < tau]
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
    rel = np.array([c.score for c in candidates], dtype=np.float64)
    remaining = list(range(len(candidates)))
    chosen: list[int] = []
    dropped: list[Dropped] = []
    max_sim = np.zeros(len(candidates), dtype=np.float64)
    while remaining:
        gains = lam * rel[remaining] - (1.0 - lam) * max_sim[remaining]
        pick = remaining.pop(int(np.argmax(gains)))
        if chosen and max_sim[pick] > theta:
            dropped.append(Dropped(candidates[pick].id, f"adds no novelty (cos {max_sim[pick]:.3f} > {theta} to the selection)", float(max_sim[pick])))
            continue
        chosen.append(pick)
        max_sim = np.maximum(max_sim, vecs @ vecs[pick])
    return PhaseOutput(tuple(candidates[i] for i in chosen), tuple(dropped), {"order": [candidates[i].id for i in chosen]})


def _embedding(c: Passage) -> np.ndarray:
    if c.embedding is None:
        raise ValueError(f"passage {c.id!r} has no embedding; prioritisation needs one per candidate")
    return np.asarray(c.embedding, dtype=np.float64)


def pack_budget(candidates: Sequence[Passage], token_counts: Sequence[int], t_max: int, separator_tokens: int, max_passages: int | None = None) -> PhaseOutput:
    """Phase 5: greedy packing in priority order; a passage that does not fit is skipped
    (and recorded) while smaller later ones may still fit. Never exceeds t_max, nor
    ``max_passages`` passages when given."""
    ledger = Ledger(t_max, separator_tokens)
    kept: list[Passage] = []
    dropped: list[Dropped] = []
    for cand, tokens in zip(candidates, token_counts, strict=True):
        if max_passages is not None and len(kept) >= max_passages:
            dropped.append(Dropped(cand.id, f"max_passages {max_passages} reached", float(tokens)))
            continue
        if ledger.take(tokens) is not None:
            kept.append(cand.with_(tokens=tokens))
        else:
            dropped.append(Dropped(cand.id, f"over budget: needs {ledger.cost(tokens)} tokens, {ledger.left} left", float(tokens)))
    return PhaseOutput(tuple(kept), tuple(dropped), {"packed_tokens": ledger.used})


# A sentence holding a third-person pronoun, or opening with a demonstrative, leans on the one
# before it for its subject.
ANAPHOR = re.compile(r"\b(he|she|it|they|him|her|his|hers|its|their|theirs|them)\b|^\W*(this|these|those|that|such|the latter|the former)\b", re.IGNORECASE)
GAP_MARK = " … "


def prune_sentences(
    candidates: Sequence[Passage],
    spans: Sequence[Sequence[tuple[int, int]]],
    scores: Sequence[Sequence[float] | np.ndarray],
    ratio: float,
    gate: float = 0.0,
) -> PhaseOutput:
    """Sentence-level evidence pruning inside each kept passage.

    Only a passage whose best sentence scores >= ``gate`` is pruned: below it the scorer has
    located no evidence in the passage (one kept for query coverage, say), and a ratio to so low
    a best would choose among noise, so the passage stays whole and is listed in
    ``info["whole_below_gate"]``. A pruned passage keeps its best sentence and every sentence
    scoring >= ``ratio`` x that best, plus, for a kept sentence that holds a third-person pronoun
    or opens with a demonstrative (:data:`ANAPHOR`), the sentences before it back to one that does
    not, so its subject stays in view. Sentences are never split; kept runs keep their order and
    original text, and non-adjacent runs are joined by :data:`GAP_MARK`. Each removed sentence is
    recorded as ``"<id>@<start>-<end>"`` with its score.
    """
    kept: list[Passage] = []
    dropped: list[Dropped] = []
    below_gate: list[str] = []
    n_in = n_kept = n_context = 0
    for cand, sp, sc in zip(candidates, spans, scores, strict=True):
        if len(sp) != len(sc):
            raise ValueError(f"passage {cand.id!r}: {len(sc)} scores for {len(sp)} sentences")
        n_in += len(sp)
        best = max(sc, default=0.0)
        if len(sp) > 1 and best < gate:
            below_gate.append(cand.id)
        if len(sp) <= 1 or best < gate:
            kept.append(cand)
            n_kept += len(sp)
            continue
        keep = {i for i, s in enumerate(sc) if s >= ratio * best} | {int(np.argmax(sc))}
        for i in sorted(keep):
            j = i
            while j > 0 and ANAPHOR.search(cand.text[sp[j][0] : sp[j][1]]):
                j -= 1
                if j not in keep:
                    keep.add(j)
                    n_context += 1
        runs: list[tuple[int, int]] = []
        for i in sorted(keep):
            if runs and i - 1 in keep:
                runs[-1] = (runs[-1][0], sp[i][1])
            else:
                runs.append(sp[i])
        for i, (a, b) in enumerate(sp):
            if i not in keep:
                snippet = cand.text[a:b][:60]
                dropped.append(Dropped(f"{cand.id}@{a}-{b}", f"sentence relevance {sc[i]:.3f} < {ratio} x passage best {best:.3f}: {snippet!r}", float(sc[i])))
        n_kept += len(keep)
        if len(keep) == len(sp):
            kept.append(cand)
        else:
            kept.append(cand.with_(text=GAP_MARK.join(cand.text[a:b] for a, b in runs), spans=tuple(runs), tokens=None))
    info = {"sentences_in": n_in, "sentences_kept": n_kept, "kept_for_context": n_context, "gate": gate, "whole_below_gate": below_gate}
    return PhaseOutput(tuple(kept), tuple(dropped), info)
