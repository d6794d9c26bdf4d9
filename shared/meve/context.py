"""Phases 2-5 (verify → fallback → prioritise → budget) over any candidate list, with the trace.

``MeVe.run`` feeds it dense kNN candidates and a corpus-wide BM25 fallback; the
LangChain compressor and the LlamaIndex postprocessor feed it another retriever's
results and a BM25 over those results. One implementation, one trace format.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from meve.budget import shrink_to_fit
from meve.chunking import sentence_spans
from meve.config import MeVeConfig
from meve.errors import ConfigError
from meve.lexical import IncrementalBM25, stemmed_tokenize, terms_held, top_k
from meve.models import Embedder, RelevanceScorer, Verifier, split_sizes
from meve.phases import PhaseOutput, cover_query, drop_redundant, fallback, novelty_select, pack_budget, prune_sentences, verify
from meve.records import ContextResult, Dropped, Passage, PhaseRecord
from meve.tokens import TokenCounter, count_many

__all__ = [
    "LexicalSearch",
    "PhaseCallback",
    "cosine_to",
    "embed_passages",
    "local_lexical",
    "pack_context",
    "relevance_scores",
    "select_context",
    "verify_query",
]

PhaseCallback = Callable[[PhaseRecord], None]
LexicalSearch = Callable[[str, int], list[Passage]]


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0


class _Trace:
    """Token counts (each passage counted once) and phase records for one query."""

    def __init__(self, counter: TokenCounter, on_phase: PhaseCallback | None) -> None:
        self.counter = counter
        self.on_phase = on_phase
        self.counts: dict[str, int] = {}
        self.records: list[PhaseRecord] = []

    def tokens(self, passages: Sequence[Passage]) -> int:
        missing = [p for p in passages if _key(p) not in self.counts]
        if missing:
            self.counts.update(zip((_key(p) for p in missing), count_many(self.counter, [p.text for p in missing]), strict=True))
        return sum(self.counts[_key(p)] for p in passages)

    def count(self, passage: Passage) -> int:
        self.tokens([passage])
        return self.counts[_key(passage)]

    def record(self, name: str, before: Sequence[Passage], out: PhaseOutput, ms: float, scores: Mapping[str, float] | None = None, **info: Any) -> None:
        rec = PhaseRecord(
            phase=name,
            kept=tuple(p.id for p in out.kept),
            dropped=out.dropped,
            scores=dict(scores or {}),
            tokens_in=self.tokens(before),
            tokens_out=self.tokens(out.kept),
            ms=ms,
            info={**out.info, **info},
        )
        self.records.append(rec)
        if self.on_phase is not None:
            self.on_phase(rec)


def _key(p: Passage) -> str:
    # A pruned passage keeps its id but not its text.
    return p.id if p.spans is None else f"{p.id}@{p.spans}"


def cosine_to(p: Passage, query_vec: np.ndarray) -> Passage:
    """``p`` with ``dense_score`` set to the cosine of its embedding and the query's."""
    if p.embedding is None:
        raise ValueError(f"passage {p.id!r} has no embedding, so it has no cosine to the query")
    vec = np.asarray(p.embedding, dtype=np.float64)
    q = np.asarray(query_vec, dtype=np.float64)
    return p.with_(dense_score=float(vec @ q / ((np.linalg.norm(vec) * np.linalg.norm(q)) or 1.0)))


def pack_context(
    passages: Sequence[Passage], counts: Sequence[int], counter: TokenCounter, t_max: int, separator: str, max_passages: int | None = None
) -> tuple[PhaseOutput, str, int]:
    """The one budget packer for passage contexts: greedy packing (:func:`meve.phases.pack_budget`),
    then the joined text is counted, because a join can tokenise longer than its parts, and trailing
    passages are dropped until the rendered context fits. Returns (what was kept, context, its tokens)."""
    out = pack_budget(passages, counts, t_max, counter.count(separator), max_passages)
    kept, over, context, total = shrink_to_fit(list(out.kept), lambda ps: separator.join(p.text for p in ps), counter, t_max)
    dropped = list(out.dropped) + [Dropped(p.id, f"joined context was {n} tokens > t_max {t_max}", float(p.tokens or 0)) for p, n in over]
    return PhaseOutput(tuple(kept), tuple(dropped), out.info), context, total


def relevance_scores(
    scorer: RelevanceScorer, query: str, query_vec: np.ndarray | None, passages: Sequence[Passage], cache: dict[str, float]
) -> tuple[list[float], int]:
    """Verifier scores, each (query, passage) pair scored at most once (``cache``); returns (scores, pairs scored now)."""
    todo = [p for p in passages if p.id not in cache]
    if todo:
        scores = scorer.score(query, [p.text for p in todo], query_vec)
        for p, s in zip(todo, scores, strict=True):
            cache[p.id] = float(s)
    return [cache[p.id] for p in passages], len(todo)


def _cosine_sentence_scores(
    embedder: Embedder | None, query_vec: np.ndarray | None, query: str, passages: Sequence[Passage], spans: list[list[tuple[int, int]]]
) -> list[np.ndarray]:
    if embedder is None:
        raise ConfigError("prune", "embedder", "'verifier' or 'none' here: no embedder was given to score sentences with")
    flat = [p.text[a:b] for p, sp in zip(passages, spans, strict=True) for a, b in sp]
    qv = query_vec if query_vec is not None else embedder.encode([query])[0]
    sents = np.asarray(embedder.encode(flat), dtype=np.float64)
    return split_sizes(sents @ np.asarray(qv, dtype=np.float64), [len(sp) for sp in spans])


def embed_passages(
    query: str, texts: Sequence[str], embedder: Embedder, dense_scores: Sequence[float | None] | None = None
) -> tuple[np.ndarray, tuple[Passage, ...]]:
    """Embed the query and another retriever's texts in one call; passages get ids "0", "1", …,
    their embedding, and the retriever's score (or the cosine to the query when it has none)."""
    vecs = embedder.encode([query, *texts])
    given = list(dense_scores) if dense_scores is not None else [None] * len(texts)
    return vecs[0], tuple(
        Passage(id=str(i), text=t, embedding=vecs[i + 1], dense_score=s if s is not None else float(vecs[i + 1] @ vecs[0]))
        for i, (t, s) in enumerate(zip(texts, given, strict=True))
    )


def local_lexical(passages: Sequence[Passage]) -> LexicalSearch:
    """Fallback source over a given candidate list: BM25 hits first, then the rest in input order (top-N)."""
    bm25 = IncrementalBM25([p.text for p in passages])

    def search(query: str, k: int) -> list[Passage]:
        scores = bm25.get_scores(query)
        order = [i for i, _ in top_k(scores, len(passages))]
        order += [i for i in range(len(passages)) if i not in set(order)]
        return [passages[i].with_(bm25_score=float(scores[i])) for i in order[:k]]

    return search


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
    """Phase 2 in full: :func:`~meve.phases.verify` (tau and the adaptive cut), then, with
    ``coverage`` > 0, :func:`~meve.phases.cover_query` over the query's stemmed terms, never
    keeping a passage scored below ``coverage_floor``."""
    out = verify(candidates, scores, tau, cut=cut, cut_ratio=cut_ratio)
    if coverage <= 0.0:
        return out
    terms = stemmed_tokenize(query)
    return cover_query(out, candidates, scores, terms, terms_held(terms, [p.text for p in candidates]), coverage, floor=coverage_floor)


def select_context(
    query: str,
    candidates: Sequence[Passage],
    cfg: MeVeConfig,
    *,
    verifier: Callable[[], Verifier],
    embedder: Embedder | None,
    token_counter: TokenCounter,
    query_vec: np.ndarray | None = None,
    lexical: LexicalSearch | None = None,
    on_phase: PhaseCallback | None = None,
    first: tuple[str, float, Mapping[str, float], Mapping[str, Any]] | None = None,
) -> ContextResult:
    """Run phases 2-5 on ``candidates`` (already in rank order).

    ``verifier`` is a thunk so a model loads only when verification runs. ``first``
    optionally records the phase that produced the candidates: (name, ms, scores, info).
    """
    trace = _Trace(token_counter, on_phase)
    candidates = tuple(candidates)
    if first is not None:
        name, ms, scores, first_info = first
        trace.record(name, (), PhaseOutput(candidates), ms, scores, **first_info)

    # Phase 2: verification.
    t0 = time.perf_counter()
    cache: dict[str, float] = {}
    if cfg.verify and candidates:
        sc = verifier().scorer
        rel, scored = relevance_scores(sc, query, query_vec, candidates, cache)
        out = verify_query(query, candidates, rel, cfg.tau, cut=cfg.cut, cut_ratio=cfg.cut_ratio, coverage=cfg.coverage, coverage_floor=cfg.coverage_floor)
        trace.record(
            "verify",
            candidates,
            out,
            _ms(t0),
            {p.id: s for p, s in zip(candidates, rel, strict=True)},
            verifier=sc.name,
            tau=cfg.tau,
            cut=cfg.cut,
            coverage=cfg.coverage,
            coverage_floor=cfg.coverage_floor,
            pairs_scored=scored,
        )
    else:
        out = PhaseOutput(tuple(p.with_(source="unverified") for p in candidates), info={"skipped": "verify=False" if not cfg.verify else "no candidates"})
        trace.record("verify", candidates, out, _ms(t0))
    verified = out.kept

    # Phase 3: fallback, only for passages with lexical evidence that the verifier does not reject.
    t0 = time.perf_counter()
    if cfg.fallback and lexical is not None and len(verified) < cfg.n_min and cfg.fallback_k > 0:
        # A "rejected" passage scored below fallback_tau; between fallback_tau and tau it may pad the context.
        # Candidates the adaptive cut left outside the head were judged too: the fallback is for
        # what retrieval missed, so it does not bring them back.
        outside = {pid: cache[pid] for pid in out.info.get("cut", ())}
        rejected = {pid: s for pid, s in cache.items() if s < cfg.fallback_tau}
        found = lexical(query, cfg.fallback_k + len(candidates))
        out = fallback(verified, found, cfg.n_min, cfg.fallback_k, min_bm25=cfg.fallback_min_bm25, rejected=rejected, outside=outside)
        added = [p for p in out.kept if p.source == "fallback"]
        scored = 0
        if added and cfg.verify:
            rel, scored = relevance_scores(verifier().scorer, query, query_vec, added, cache)
            low = {p.id: r for p, r in zip(added, rel, strict=True) if r < cfg.fallback_tau}
            rescored = {p.id: p.with_(relevance=r) for p, r in zip(added, rel, strict=True)}
            kept_now = tuple(rescored.get(p.id, p) for p in out.kept if p.id not in low)
            drops = out.dropped + tuple(
                Dropped(pid, f"rejected by the verifier (relevance {r:.3f} < fallback_tau {cfg.fallback_tau})", r) for pid, r in low.items()
            )
            info = {**out.info, "added": [p.id for p in kept_now if p.source == "fallback"]}
            out = PhaseOutput(kept_now, drops, info)
        elif added and query_vec is not None:
            # Unverified, every passage is ranked by its cosine to the query: a BM25 score beside
            # cosines would mix scales inside prioritisation.
            out = PhaseOutput(tuple(cosine_to(p, query_vec) if p.source == "fallback" else p for p in out.kept), out.dropped, out.info)
        bm25 = {p.id: p.bm25_score or 0.0 for p in found}
        trace.record("fallback", verified, out, _ms(t0), bm25, pairs_scored=scored, reason=f"{len(verified)} verified < n_min {cfg.n_min}")
    else:
        if not cfg.fallback or lexical is None:
            why = "fallback=False" if not cfg.fallback else "no fallback source"
        else:
            why = f"{len(verified)} verified >= n_min {cfg.n_min}" if len(verified) >= cfg.n_min else "fallback_k=0"
        out = PhaseOutput(verified, info={"triggered": False, "reason": why})
        trace.record("fallback", verified, out, _ms(t0))
    merged = out.kept

    # Phase 4: prioritisation.
    t0 = time.perf_counter()
    if cfg.prioritisation == "redundancy":
        out = drop_redundant(merged, cfg.theta_redundancy)
    elif cfg.prioritisation == "novelty":
        out = novelty_select(merged, cfg.novelty_lambda, cfg.theta_redundancy)
    else:
        out = PhaseOutput(merged, info={"skipped": "prioritisation='none'"})
    trace.record("prioritise", merged, out, _ms(t0), mode=cfg.prioritisation, theta=cfg.theta_redundancy)
    prioritised = out.kept

    # Sentence pruning inside the kept passages.
    t0 = time.perf_counter()
    if cfg.prune != "none" and prioritised:
        spans = [sentence_spans(p.text) for p in prioritised]
        if cfg.prune == "verifier":
            sentence_scores = verifier().spans(query, [p.text for p in prioritised], spans)
        else:
            sentence_scores = _cosine_sentence_scores(embedder, query_vec, query, prioritised, spans)
        out = prune_sentences(prioritised, spans, sentence_scores, cfg.prune_ratio, cfg.prune_gate)
        trace.record("prune", prioritised, out, _ms(t0), mode=cfg.prune, prune_ratio=cfg.prune_ratio)
    else:
        out = PhaseOutput(prioritised, info={"skipped": "prune='none'" if cfg.prune == "none" else "no passages"})
        trace.record("prune", prioritised, out, _ms(t0))
    pruned = out.kept

    # Phase 5: token budget.
    t0 = time.perf_counter()
    out, context, total = pack_context(pruned, [trace.count(p) for p in pruned], token_counter, cfg.t_max, cfg.separator, cfg.max_passages)
    kept = list(out.kept)
    budget_info: dict[str, Any] = {"t_max": cfg.t_max, "token_counter": token_counter.name, "context_tokens": total}
    if not kept:
        if pruned:
            budget_info["empty"] = f"every remaining passage alone exceeds t_max {cfg.t_max}"
        elif candidates:
            budget_info["empty"] = "nothing relevant: no candidate passed the verifier and the fallback found no passage with lexical evidence it accepts"
        else:
            budget_info["empty"] = "no candidates"
    trace.record("budget", pruned, out, _ms(t0), **budget_info)
    return ContextResult(query=query, documents=tuple(kept), context=context, token_count=total, trace=tuple(trace.records), config=cfg.to_dict())
