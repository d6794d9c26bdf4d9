"""A replay of :class:`meve.MomentaryMemory`'s selection over one conversation on precomputed
signals, and the plain fills it is compared with: a grid of settings costs no Chroma and no model
run per question. The logic is the benchmarks' (``benchmarks/harness/conversations.py``'s
``Replay``), moved here so ``evaluate_memory`` and the memory benchmark read the same code."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from meve.core.config import MemoryConfig
from meve.core.tokens import TokenCounter, count_many
from meve.memory.decide import Decisions, Nearby, decide
from meve.memory.log import Snapshot
from meve.memory.records import Turn
from meve.memory.render import render, render_turn
from meve.memory.select import Selection, fuse, latest_turns, rank, select_turns, sentence_scores, signal_weights, weigh_roles
from meve.memory.signals import bm25_pool, said_before
from meve.retrieval.bm25 import IncrementalBM25
from meve.retrieval.terms import bm25_tokenize, stemmed_tokenize

__all__ = ["FILLS", "Replay"]

FILLS = ("dense", "bm25", "hybrid")


class Replay:
    """One conversation (turns in time order) ready for :func:`select_turns`: the turns as a
    Snapshot, every turn's vector, and BM25 over the turns (stemmed and plain)."""

    def __init__(self, turns: Sequence[Turn], counter: TokenCounter, encode: Callable[[Sequence[str]], np.ndarray], embedder_name: str) -> None:
        """Embed every turn once (``encode``) and index it for BM25."""
        self.turns, self.counter, self.embedder, self.encode = list(turns), counter, embedder_name, encode
        tokens = count_many(counter, [render_turn(t) for t in self.turns])
        keys = [(t.timestamp.timestamp(), f"{i:012d}") for i, t in enumerate(self.turns)]
        self.snap = Snapshot(self.turns, tokens, keys, list(range(len(self.turns))), len(self.turns), min(tokens))
        self.vecs = np.asarray(encode([t.text for t in self.turns]), dtype=np.float32)
        texts = [t.text for t in self.turns]
        self.bm25 = {True: IncrementalBM25(texts, tokenize=stemmed_tokenize), False: IncrementalBM25(texts, tokenize=bm25_tokenize)}
        self._signals: dict[tuple[str, bool, int, tuple[int, ...], tuple[str, ...]], tuple[dict[int, float], dict[int, float]]] = {}
        self._rankings: dict[tuple[str, str, bool], list[int]] = {}
        self._parts: dict[tuple[str, ...], np.ndarray] = {}  # a long query's sentence vectors
        self._nearby: dict[tuple[str, bool, tuple[int, ...]], Nearby] = {}  # what the query finds before the latest exchange

    def signals(
        self, query: str, qvec: np.ndarray, *, stem: bool, pool: int, exclude: set[int], parts: tuple[str, ...] = ()
    ) -> tuple[dict[int, float], dict[int, float]]:
        """BM25 and cosine of the ``pool`` best past turns each, as MomentaryMemory reads them (kept
        per question). With ``parts`` (a long query's sentences), the vector candidates are the
        ``pool`` best by the whole query and by each sentence, scored by :func:`sentence_scores`."""
        key = (query, stem, pool, tuple(sorted(exclude)), parts)
        if key not in self._signals:
            if parts and parts not in self._parts:
                self._parts[parts] = np.asarray(self.encode(list(parts)), dtype=np.float32)
            queries = np.vstack([qvec[None, :], self._parts[parts]]) if parts else qvec[None, :]
            cos = self.vecs @ queries.T
            cos[list(exclude)] = -np.inf
            k = min(pool, len(cos))
            hits = [{int(i): float(col[i]) for i in np.argpartition(-col, k - 1)[:k] if np.isfinite(col[i])} for col in cos.T]
            self._signals[key] = (bm25_pool(self.bm25[stem].get_scores(query), exclude, pool), sentence_scores(hits))
        return self._signals[key]

    def partner(self, i: int) -> int | None:
        """The adjacent turn by the other role (the reply after, else the turn it answered)."""
        for k in (i + 1, i - 1):
            if 0 <= k < len(self.turns) and self.turns[k].role != self.turns[i].role:
                return k
        return None

    def memory(self, query: str, qvec: np.ndarray, cfg: MemoryConfig, pool: int = 256) -> tuple[Selection, str]:
        """What ``MomentaryMemory.reconstruct(query)`` with ``cfg`` selects (one embedder), and the
        context rendered as the memory renders it."""
        return self.select(query, *self.fused(query, qvec, cfg, pool))

    def fused(self, query: str, qvec: np.ndarray, cfg: MemoryConfig, pool: int = 256) -> tuple[MemoryConfig, Decisions, list[int], dict[int, float]]:
        """The first half of :meth:`memory`: the query's decisions, the anchored turns, and every
        candidate's fused score (a benchmark may rescore them before :meth:`select`)."""
        latest = latest_turns(self.snap, cfg.recent_turns, (), ())
        key_near = (query, cfg.stemming, tuple(latest))
        if key_near not in self._nearby:
            said = said_before(self.bm25[cfg.stemming].get_scores(query), self.turns, set(latest), ())
            cos = np.delete(self.vecs @ qvec, latest)
            self._nearby[key_near] = Nearby(said, float(cos.max()) if cos.size else None)
        decided = decide(cfg, query, self._nearby[key_near])
        cfg = cfg.replace(dates=decided.dates)
        recent = latest if decided.keep_recent else []
        bm25, dense = self.fused_signals(query, qvec, cfg, decided, recent, pool)
        weights = signal_weights(cfg.weights, (self.embedder,))
        fused = weigh_roles(fuse({"bm25": bm25, f"dense:{self.embedder}": dense}, weights, cfg.fusion, cfg.rrf_k), self.turns, decided.role)
        return cfg, decided, recent, dict(fused)

    def fused_signals(
        self, query: str, qvec: np.ndarray, cfg: MemoryConfig, decided: Decisions, recent: list[int], pool: int = 256
    ) -> tuple[dict[int, float], dict[int, float]]:
        """The BM25 and vector signals :meth:`fused` fuses, for its ``cfg``, decisions and anchored
        turns (cached: a benchmark that rescores the fused scores reads the same ones)."""
        return self.signals(query, qvec, stem=cfg.stemming, pool=max(pool, cfg.l_max // 8), exclude=set(recent), parts=decided.parts)

    def select(self, query: str, cfg: MemoryConfig, decided: Decisions, recent: list[int], fused: dict[int, float]) -> tuple[Selection, str]:
        """The second half of :meth:`memory`: the fill over ``fused``, rendered."""
        sel = select_turns(
            self.snap,
            cfg,
            self.counter,
            recent=recent,
            pinned=[],
            ranked=rank(fused, self.snap.keys),
            partner=self.partner,
            scores=fused,
            query=query,
            recent_cap=decided.recent_cap,
        )
        return sel, render(sel.turns, dates=bool(cfg.dates))

    def fill(self, ranked: Sequence[int], l_max: int, dates: bool = False) -> tuple[Selection, str]:
        """A plain fill baseline: turns in ``ranked`` order while they fit, rendered like the memory's
        ``role: text`` lines in time order (no recent turn, no partner turns; dated when ``dates``)."""
        cfg = MemoryConfig(l_max=l_max, partner_turns=False, dates=dates, recent_turns=0)
        sel = select_turns(self.snap, cfg, self.counter, recent=[], pinned=[], ranked=ranked, partner=self.partner)
        return sel, render(sel.turns, dates=dates)

    def ranking(self, query: str, qvec: np.ndarray, how: str, *, stem: bool = True) -> list[int]:
        """Every turn by one signal: "dense", "bm25", or "hybrid" (both fused by reciprocal rank); kept per question."""
        key = (query, how, stem)
        if key not in self._rankings:
            self._rankings[key] = self._ranking(query, qvec, how, stem=stem)
        return self._rankings[key]

    def _ranking(self, query: str, qvec: np.ndarray, how: str, *, stem: bool) -> list[int]:
        cos = self.vecs @ qvec
        dense = sorted(range(len(cos)), key=lambda i: (-cos[i], i))
        if how == "dense":
            return dense
        scores = self.bm25[stem].get_scores(query)
        lexical = sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-scores[i], i))
        if how == "bm25":
            return lexical
        fused = fuse(
            {"dense": {i: float(cos[i]) for i in dense[:256]}, "bm25": {i: float(scores[i]) for i in lexical[:256]}}, {"dense": 1.0, "bm25": 1.0}, "rrf", 60
        )
        return rank(fused, self.snap.keys)
