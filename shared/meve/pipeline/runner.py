"""The one runner: phases 2-5 (verify → fallback → prioritise → prune → budget) over any
candidate list, top to bottom, each phase called once and recorded in the trace by the runner.

``MeVe.run`` feeds it dense (or hybrid, or hierarchical) candidates and a corpus-wide BM25
fallback; the adapters feed it another retriever's results and a BM25 over those results
(:mod:`meve.integration`). Model calls live here, in the steps; the phases they call are pure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from meve.core.config import MeVeConfig
from meve.core.errors import ConfigError
from meve.core.logs import log, query_label, warn_once
from meve.core.records import ContextResult, Dropped, Passage, PhaseRecord
from meve.core.text import sentence_spans
from meve.core.tokens import TokenCounter, count_many, read_stamp, stamp_key
from meve.pipeline.neighbours import Neighbours, Place, facing, join_neighbours, link
from meve.pipeline.phases import PhaseOutput, drop_redundant, fallback, novelty_select, pack_context, pad, verify_query
from meve.pipeline.prune import cut_to_fit, prune_sentences, word_windows
from meve.retrieval.lexical import LexicalSearch
from meve.scoring.protocols import Embedder, Scorer, Scoring, split_sizes

__all__ = ["PHASES", "Neighbours", "PhaseCallback", "cosine_to", "run_phases"]

PhaseCallback = Callable[[PhaseRecord], None]
PHASES: tuple[str, ...] = ("verify", "fallback", "prioritise", "prune", "budget")


@dataclass
class Query:
    """What every step of one run reads: the query with its config and models, and the scorer's
    scores so far (each (query, passage) pair is scored at most once per run)."""

    text: str
    cfg: MeVeConfig
    scoring: Callable[[], Scoring]
    embedder: Embedder | None
    counter: TokenCounter
    vec: np.ndarray | None
    lexical: LexicalSearch | None
    candidates: tuple[Passage, ...]
    scores: dict[str, float] = field(default_factory=dict)
    cut: tuple[str, ...] = ()  # passed tau, left outside the head by the adaptive cut
    neighbours: Neighbours | None = None  # where passages sit in their sources (MeVeConfig.neighbours)


@dataclass(frozen=True)
class Step:
    """One phase's output with the scores and facts the trace records beside it."""

    out: PhaseOutput
    scores: Mapping[str, float] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)


def _key(p: Passage) -> str:
    # A pruned passage keeps its id but not its text; a joined one keeps it with more text.
    key = p.id if p.spans is None else f"{p.id}@{p.spans}"
    return key if p.joined is None else f"{key}+{'+'.join(p.joined)}"


class Trace:
    """Phase records for one query, with token counts (each passage text counted once)."""

    def __init__(self, counter: TokenCounter, on_phase: PhaseCallback | None) -> None:
        self.counter = counter
        self.stamp = stamp_key(counter)
        self.on_phase = on_phase
        self.counts: dict[str, int] = {}
        self.records: list[PhaseRecord] = []

    def tokens(self, passages: Sequence[Passage]) -> int:
        """Tokens of the passages' texts, summed (each distinct text counted once per run; a whole
        text stamped at ingestion with its count under this counter is not counted again)."""
        missing = [p for p in passages if _key(p) not in self.counts]
        if missing and self.stamp is not None:
            for p in missing:
                kept = read_stamp(p.metadata.get(self.stamp), p.text) if p.spans is None and p.joined is None else None
                if kept is not None:
                    self.counts[_key(p)] = kept
            missing = [p for p in missing if _key(p) not in self.counts]
        if missing:
            self.counts.update(zip((_key(p) for p in missing), count_many(self.counter, [p.text for p in missing]), strict=True))
        return sum(self.counts[_key(p)] for p in passages)

    def record(self, name: str, before: Sequence[Passage], step: Step, ms: float) -> None:
        """Append the phase's record and tell the listener."""
        out = step.out
        info = {**out.info, **step.info}
        rec = PhaseRecord(name, tuple(p.id for p in out.kept), out.dropped, dict(step.scores), self.tokens(before), self.tokens(out.kept), ms, info)
        self.records.append(rec)
        if self.on_phase is not None:
            self.on_phase(rec)


def cosine_to(p: Passage, query_vec: np.ndarray) -> Passage:
    """``p`` with ``dense_score`` set to the cosine of its embedding and the query's."""
    if p.embedding is None:
        raise ValueError(f"passage {p.id!r} has no embedding, so it has no cosine to the query")
    vec = np.asarray(p.embedding, dtype=np.float64)
    q = np.asarray(query_vec, dtype=np.float64)
    return p.with_(dense_score=float(vec @ q / ((np.linalg.norm(vec) * np.linalg.norm(q)) or 1.0)))


def _score(q: Query, scorer: Scorer, passages: Sequence[Passage]) -> tuple[list[float], int]:
    """The scorer's scores of ``passages`` (cached in ``q.scores``) and how many pairs it scored now."""
    todo = [p for p in passages if p.id not in q.scores]
    if todo:
        q.scores.update(zip((p.id for p in todo), map(float, scorer.score(q.text, [p.text for p in todo], q.vec)), strict=True))
    return [q.scores[p.id] for p in passages], len(todo)


def verify_step(q: Query, passages: tuple[Passage, ...]) -> Step:
    """Phase 2: the scorer's score against tau, the adaptive cut and query coverage."""
    cfg = q.cfg
    if not cfg.verify or not passages:
        skipped = "verify=False" if not cfg.verify else "no candidates"
        return Step(PhaseOutput(tuple(p.with_(source="unverified") for p in passages), info={"skipped": skipped}))
    scorer = q.scoring().scorer
    rel, scored = _score(q, scorer, passages)
    out = verify_query(q.text, passages, rel, cfg.tau, cut=cfg.cut, cut_ratio=cfg.cut_ratio, coverage=cfg.coverage, coverage_floor=cfg.coverage_floor)
    q.cut = tuple(out.info.get("cut", ()))
    info = {"scorer": scorer.name, "tau": cfg.tau, "cut": cfg.cut, "coverage": cfg.coverage, "coverage_floor": cfg.coverage_floor, "pairs_scored": scored}
    cache_info = getattr(scorer, "cache_info", None)
    if callable(cache_info):  # a scorer that caches what it read (late interaction): how big, how it served
        info["cache"] = cache_info()
    _note_query_cut(q.text, scorer, info)
    return Step(out, {p.id: s for p, s in zip(passages, rel, strict=True)}, info)


def _note_query_cut(query: str, scorer: Scorer, info: dict[str, Any]) -> None:
    """A query longer than the scorer reads (its ``query_cut``: late interaction reads one window
    of its model) is noted in the trace, and a WARNING says so once per scorer, naming the query
    by its digest (:func:`~meve.core.logs.query_label`), never by its words."""
    cut_of = getattr(scorer, "query_cut", None)
    cut = cut_of(query) if callable(cut_of) else None
    if cut is None:
        return
    info["query_cut"] = cut
    warn_once(
        f"query-cut:{scorer.name}",
        f"meve: the {query_label(query)} is longer than {scorer.name} reads: it is scored on its first {cut['read']} of "
        f"{cut['pieces']} word pieces (the rest is not read; each such query's trace says so under verify's query_cut)",
    )


def _fallback_reason(q: Query, verified: int) -> str | None:
    """Why the fallback does not run, or None when it does."""
    cfg = q.cfg
    if not cfg.fallback or q.lexical is None:
        return "fallback=False" if not cfg.fallback else "no fallback source"
    if verified >= cfg.n_min:
        return f"{verified} verified >= n_min {cfg.n_min}"
    return "fallback_k=0" if cfg.fallback_k <= 0 else None


def fallback_step(q: Query, verified: tuple[Passage, ...]) -> Step:
    """Phase 3: BM25 hits with lexical evidence that the scorer does not reject, when fewer than
    n_min passed; then padding to min_keep (:func:`~meve.pipeline.phases.pad`)."""
    cfg = q.cfg
    why = _fallback_reason(q, len(verified))
    if why is not None or q.lexical is None:
        out = PhaseOutput(verified, info={"triggered": False, "reason": why})
        return Step(pad(out, q.candidates, q.scores, cfg.min_keep))
    # A "rejected" passage scored below fallback_tau; between fallback_tau and tau it may pad the
    # context. Candidates the adaptive cut left outside the head were judged too: the fallback is
    # for what retrieval missed, so it does not bring them back.
    outside = {pid: q.scores[pid] for pid in q.cut}
    rejected = {pid: s for pid, s in q.scores.items() if not s >= cfg.fallback_tau}  # a NaN score too: it ranks lowest
    found = q.lexical(q.text, cfg.fallback_k + len(q.candidates))
    out = fallback(verified, found, cfg.n_min, cfg.fallback_k, min_bm25=cfg.fallback_min_bm25, rejected=rejected, outside=outside)
    out, scored = _judge_fallback(q, out)
    reason = f"{len(verified)} verified < n_min {cfg.n_min}"
    return Step(pad(out, q.candidates, q.scores, cfg.min_keep), {p.id: p.bm25_score or 0.0 for p in found}, {"pairs_scored": scored, "reason": reason})


def _judge_fallback(q: Query, out: PhaseOutput) -> tuple[PhaseOutput, int]:
    """Score what the fallback added (so ``.score`` stays on one scale) and reject what scores
    below fallback_tau; unverified, rank it by cosine instead (a BM25 score would mix scales)."""
    cfg = q.cfg
    added = [p for p in out.kept if p.source == "fallback"]
    if not added:
        return out, 0
    if not cfg.verify:
        if q.vec is None:
            return out, 0
        return PhaseOutput(tuple(cosine_to(p, q.vec) if p.source == "fallback" else p for p in out.kept), out.dropped, out.info), 0
    rel, scored = _score(q, q.scoring().scorer, added)
    low = {p.id: r for p, r in zip(added, rel, strict=True) if not r >= cfg.fallback_tau}  # NaN included
    rescored = {p.id: p.with_(relevance=r) for p, r in zip(added, rel, strict=True)}
    kept = tuple(rescored.get(p.id, p) for p in out.kept if p.id not in low)
    drops = out.dropped + tuple(Dropped(pid, f"rejected by the verifier (relevance {r:.3f} < fallback_tau {cfg.fallback_tau})", r) for pid, r in low.items())
    return PhaseOutput(kept, drops, {**out.info, "added": [p.id for p in kept if p.source == "fallback"]}), scored


def prioritise_step(q: Query, merged: tuple[Passage, ...]) -> Step:
    """Phase 4: near-duplicates dropped, or SARA-style novelty selection."""
    cfg = q.cfg
    if cfg.prioritisation == "redundancy":
        out = drop_redundant(merged, cfg.theta_redundancy)
    elif cfg.prioritisation == "novelty":
        out = novelty_select(merged, cfg.novelty_lambda, cfg.theta_redundancy)
    else:
        out = PhaseOutput(merged, info={"skipped": "prioritisation='none'"})
    return Step(out, info={"mode": cfg.prioritisation, "theta": cfg.theta_redundancy})


def _cosine_sentences(q: Query, passages: Sequence[Passage], spans: list[list[tuple[int, int]]]) -> list[np.ndarray]:
    if q.embedder is None:
        raise ConfigError("prune", "embedder", "'scorer' or 'none' here: no embedder was given to score sentences with")
    flat = [p.text[a:b] for p, sp in zip(passages, spans, strict=True) for a, b in sp]
    qv = q.vec if q.vec is not None else q.embedder.encode([q.text])[0]
    sents = np.asarray(q.embedder.encode(flat), dtype=np.float64)
    return split_sizes(sents @ np.asarray(qv, dtype=np.float64), [len(sp) for sp in spans])


def prune_step(q: Query, passages: tuple[Passage, ...]) -> Step:
    """Sentence pruning inside the kept passages, scored by the scorer or by cosine."""
    cfg = q.cfg
    if cfg.prune == "none" or not passages:
        return Step(PhaseOutput(passages, info={"skipped": "prune='none'" if cfg.prune == "none" else "no passages"}))
    spans = [sentence_spans(p.text) for p in passages]
    by_scorer = cfg.prune == "scorer"
    scores = q.scoring().spans(q.text, [p.text for p in passages], spans) if by_scorer else _cosine_sentences(q, passages, spans)
    return Step(prune_sentences(passages, spans, scores, cfg.prune_ratio, cfg.prune_gate), info={"mode": cfg.prune, "prune_ratio": cfg.prune_ratio})


def budget_step(q: Query, passages: tuple[Passage, ...], trace: Trace, *, read_order: bool = False) -> Step:
    """Phase 5: packing into t_max tokens of the joined context, in priority order
    (:func:`~meve.pipeline.phases.pack_context`). The first passage that does not fit whole, the
    most relevant one left (a LlamaIndex default node is 1,024 tokens, t_max 512), is cut to its
    best excerpt within the room left (:func:`cut_one`) rather than passed over for a lower-ranked
    one that fits; with ``read_order`` (the budget run alone, as LlamaIndex's ``TokenBudget``:
    nothing verified, no model to load) to its opening sentences instead."""
    cfg = q.cfg

    def cut(passage: Passage, _tokens: int, room: int, alone: bool) -> Passage | None:
        return cut_one(q, passage, limit=room, read_order=read_order, split_words=alone)

    counts = [trace.tokens([p]) for p in passages]
    out, _, total = pack_context(passages, counts, q.counter, cfg.t_max, cfg.separator, cfg.max_passages, cut)
    joins = join_step(q, out, total, read_order) if cfg.neighbours else None
    if joins is not None:
        out, total = joins.out, joins.info["context_tokens"]
    info: dict[str, Any] = {"t_max": cfg.t_max, "token_counter": q.counter.name, "context_tokens": total}
    if joins is not None:
        info["neighbours"] = {k: v for k, v in joins.info.items() if k != "context_tokens"}
    cuts = {p.id: {**out.info["cut"][p.id], "spans": [list(s) for s in p.spans or ()]} for p in out.kept if p.id in out.info["cut"]}
    if cuts:
        info["cut"] = cuts
    if not out.kept:
        info["empty"] = _empty_reason(q, passages, counts)
        log.warning("meve: empty context for %s: %s", query_label(q.text), info["empty"])
    return Step(out, info=info)


def join_step(q: Query, out: PhaseOutput, total: int, read_order: bool) -> Step:
    """``MeVeConfig.neighbours``, after packing (:func:`~meve.pipeline.neighbours.join_neighbours`):
    where the kept passages and the candidates sit (the adapter's
    :class:`~meve.pipeline.neighbours.Neighbours`), which boundary each whole kept passage's best
    sentence touches (the scorer's sentence scores, as pruning reads them), and the neighbours so
    faced that are not candidates, fetched where the adapter can. ``info["skipped"]`` says why no
    neighbour was looked for."""
    if q.neighbours is None or read_order or not q.cfg.verify:
        why = "no verifier read the passages" if read_order or not q.cfg.verify else "no place in a source is known for these passages"
        return Step(out, info={"skipped": why, "context_tokens": total})
    pool = {p.id: p for p in (*out.kept, *q.candidates)}  # a candidate's text is whole; a kept one may be cut
    places = link({pid: at for pid, p in pool.items() if (at := q.neighbours.place(p)) is not None}, {pid: p.text for pid, p in pool.items()})
    sides = _sides(q, [p for p in out.kept if p.spans is None and p.id in places], places)
    wanted = [nid for pid, faced in sides.items() for side in faced if (nid := getattr(places[pid], side)) is not None and nid not in pool]
    for p in q.neighbours.fetch(wanted) if wanted and q.neighbours.fetch is not None else ():
        pool[p.id] = p
        if p.id not in places and (at := q.neighbours.place(p)) is not None:
            places[p.id] = at
    sep = q.cfg.separator
    joined = join_neighbours(out.kept, places, pool, sides, lambda ps: q.counter.count(sep.join(p.text for p in ps)), q.cfg.t_max)
    return Step(PhaseOutput(joined.kept, out.dropped, out.info), info=joined.info)


def _sides(q: Query, passages: Sequence[Passage], places: Mapping[str, Place]) -> dict[str, frozenset[str]]:
    """The boundaries each passage's best sentence touches (:func:`~meve.pipeline.neighbours.facing`),
    for those with a neighbour; sentences of its source text only (after its head)."""
    todo = [(p, places[p.id].head) for p in passages if places[p.id].head < len(p.text) and (places[p.id].prev or places[p.id].next) is not None]
    if not todo:
        return {}
    spans = [[(head + a, head + b) for a, b in sentence_spans(p.text[head:])] or [(head, len(p.text))] for p, head in todo]
    scores = q.scoring().spans(q.text, [p.text for p, _ in todo], spans)
    return {p.id: facing(s) for (p, _), s in zip(todo, scores, strict=True)}


def cut_one(q: Query, passage: Passage, *, limit: int | None = None, read_order: bool = False, split_words: bool = True) -> Passage | None:
    """``passage`` (over ``limit`` tokens, t_max by default) cut to the run of sentences
    around the one the scorer rates highest that fits ``limit`` (:func:`~meve.pipeline.prune.cut_to_fit`),
    or, with ``read_order``, around its first (no model reads the query). With ``split_words``
    (the context is otherwise empty) a sentence longer than the limit is split at whitespace first,
    or into pieces of characters where it has none (Chinese, base64); beside other passages only
    whole sentences are kept, since a piece of one ("the pedals") tells the model nothing."""
    limit = q.cfg.t_max if limit is None else limit
    spans = sentence_spans(passage.text) or [(0, len(passage.text))]
    if split_words:
        spans = word_windows(passage.text, spans, count_many(q.counter, [passage.text[a:b] for a, b in spans]), limit)
    if read_order:
        scores = np.linspace(1.0, 0.0, num=len(spans))
    else:
        (scores,) = q.scoring().spans(q.text, [passage.text], [spans])
    return cut_to_fit(passage, spans, scores, limit, q.counter.count)


def _empty_reason(q: Query, passages: tuple[Passage, ...], counts: list[int]) -> str:
    """Why the context is empty, with remedies that are not already set."""
    if passages:
        return (
            f"no part of the most relevant passage fits t_max {q.cfg.t_max} (its smallest sentence needs more; the passage has {counts[0]} tokens): raise t_max"
        )
    if q.candidates:
        return "nothing relevant: no candidate passed the verifier and the fallback found no passage with lexical evidence it accepts"
    return "no candidates: the collection is empty or the retriever returned nothing"


_STEPS: dict[str, Callable[[Query, tuple[Passage, ...]], Step]] = {
    "verify": verify_step,
    "fallback": fallback_step,
    "prioritise": prioritise_step,
    "prune": prune_step,
}


def run_phases(
    query: str,
    candidates: Sequence[Passage],
    cfg: MeVeConfig,
    *,
    scoring: Callable[[], Scoring],
    embedder: Embedder | None,
    token_counter: TokenCounter,
    query_vec: np.ndarray | None = None,
    lexical: LexicalSearch | None = None,
    on_phase: PhaseCallback | None = None,
    first: tuple[str, float, Mapping[str, float], Mapping[str, Any]] | None = None,
    phases: Collection[str] = PHASES,
    neighbours: Neighbours | None = None,
) -> ContextResult:
    """Run phases 2-5 on ``candidates`` (already in rank order) and return the context with its trace.

    ``scoring`` is a thunk so a model loads only when a phase needs it. ``first`` records the phase
    that produced the candidates: (name, ms, scores, info). A phase not in ``phases`` passes its input
    on unchanged and is recorded as skipped (the single-phase adapters run one phase alone).
    ``neighbours``: where passages sit in their sources, for ``MeVeConfig.neighbours`` (:func:`join_step`).
    """
    q = Query(query, cfg, scoring, embedder, token_counter, query_vec, lexical, tuple(candidates), neighbours=neighbours)
    trace = Trace(token_counter, on_phase)
    if first is not None:
        name, ms, scores, info = first
        trace.record(name, (), Step(PhaseOutput(q.candidates), scores, info), ms)
    passages = q.candidates
    for name in PHASES:
        t0 = time.perf_counter()
        if name not in phases:
            step = Step(PhaseOutput(passages, info={"skipped": "not run by this component"}))
        elif name == "budget":
            step = budget_step(q, passages, trace, read_order="verify" not in phases)
        else:
            step = _STEPS[name](q, passages)
        trace.record(name, passages, step, (time.perf_counter() - t0) * 1000.0)
        passages = step.out.kept
    context = cfg.separator.join(p.text for p in passages)
    total = trace.records[-1].info.get("context_tokens")
    count = total if isinstance(total, int) else token_counter.count(context)
    return ContextResult(query=query, documents=passages, context=context, token_count=count, trace=tuple(trace.records), config=cfg.to_dict())
