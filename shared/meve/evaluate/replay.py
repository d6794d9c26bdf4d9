"""A replay of :class:`meve.MomentaryMemory`'s selection over one conversation on precomputed
signals, and the plain fills it is compared with: a grid of settings costs no Chroma and no model
run per question. The selection is the memory's own rebuild (:mod:`meve.memory.rebuild`) over a
search of the turns' vectors kept here; ``evaluate_memory``, ``tune_memory`` and the memory
benchmarks (``benchmarks/harness/conversations.py``) read this class."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from meve.core.config import MemoryConfig
from meve.core.tokens import TokenCounter, count_many
from meve.memory.decide import decide_parts
from meve.memory.log import Snapshot
from meve.memory.rebuild import Candidates, Search, candidates, choose
from meve.memory.records import Turn
from meve.memory.render import render, render_turn
from meve.memory.select import Selection, fuse, latest_turns, rank, select_turns, signal_weights
from meve.retrieval.bm25 import IncrementalBM25
from meve.retrieval.terms import bm25_tokenize, stemmed_tokenize

__all__ = ["FILLS", "Replay"]

FILLS = ("dense", "bm25", "hybrid")


class Replay:
    """One conversation (turns in time order) ready for the memory's rebuild
    (:mod:`meve.memory.rebuild`): the turns as a Snapshot, every turn's vector, and BM25 over the
    turns (stemmed and plain). The vector search and the BM25 scores are read from these instead of
    Chroma; everything from there on is the code :meth:`meve.MomentaryMemory.reconstruct` runs."""

    def __init__(self, turns: Sequence[Turn], counter: TokenCounter, encode: Callable[[Sequence[str]], np.ndarray], embedder_name: str) -> None:
        """Embed every turn once (``encode``) and index it for BM25."""
        self.turns, self.counter, self.embedder, self.encode = list(turns), counter, embedder_name, encode
        tokens = count_many(counter, [render_turn(t) for t in self.turns])
        keys = [(t.timestamp.timestamp(), f"{i:012d}") for i, t in enumerate(self.turns)]
        self.snap = Snapshot(self.turns, tokens, keys, list(range(len(self.turns))), len(self.turns), min(tokens))
        self.vecs = np.asarray(encode([t.text for t in self.turns]), dtype=np.float32)
        texts = [t.text for t in self.turns]
        self.bm25 = {True: IncrementalBM25(texts, tokenize=stemmed_tokenize), False: IncrementalBM25(texts, tokenize=bm25_tokenize)}
        # Kept per question, as a grid of settings reads the same ones again.
        self._scores: dict[tuple[str, bool], np.ndarray] = {}
        # Keyed by the query's vector too: the same text may come with another vector (another embedder, an adapter).
        self._rankings: dict[tuple[str, bytes, str, bool], list[int]] = {}
        self._parts: dict[tuple[str, ...], np.ndarray] = {}  # a long query's sentence vectors
        self._orders: dict[tuple[str, bytes, tuple[str, ...]], list[list[tuple[int, float]]]] = {}  # each query row's turns, nearest first

    def scores(self, query: str, stem: bool) -> np.ndarray:
        """Every turn's BM25 score for ``query`` (a copy: a rebuild zeroes the turns it excludes)."""
        key = (query, stem)
        if key not in self._scores:
            self._scores[key] = self.bm25[stem].get_scores(query)
        return self._scores[key].copy()

    def search(self, query: str, qvec: np.ndarray, cfg: MemoryConfig) -> Search:
        """The vector search :func:`meve.memory.rebuild.candidates` reads, over the turns' vectors
        as the memory's Chroma search returns them: the ``n`` + excluded nearest turns of the whole
        query and of each of a long query's sentences (:func:`meve.memory.decide.decide_parts`),
        the excluded ones then dropped."""
        parts = decide_parts(cfg.query_sentences, query)[0]
        key = (query, np.asarray(qvec, dtype=np.float32).tobytes(), parts)
        if key not in self._orders:
            if parts and parts not in self._parts:
                self._parts[parts] = np.asarray(self.encode(list(parts)), dtype=np.float32)
            queries = np.vstack([qvec[None, :], self._parts[parts]]) if parts else qvec[None, :]
            cos = self.vecs @ queries.T
            self._orders[key] = [[(int(i), float(col[i])) for i in np.argsort(-col, kind="stable")] for col in cos.T]
        orders = self._orders[key]

        def search(exclude: set[int], n: int) -> dict[str, list[list[tuple[int, float]]]]:
            top = min(n + len(exclude), len(self.turns))  # as the memory asks Chroma for room to drop the excluded
            return {self.embedder: [[(i, c) for i, c in order[:top] if i not in exclude] for order in orders]}

        return search

    def partner(self, i: int, skip_roles: Sequence[str] = ()) -> int | None:
        """The adjacent turn by the other role, not of ``skip_roles`` (the reply after, else the turn it answered)."""
        return self.snap.partner(i, skip_roles)

    def memory(
        self, query: str, qvec: np.ndarray, cfg: MemoryConfig, pool: int = 256, *, keep_roles: Sequence[str] = (), skip_roles: Sequence[str] = ()
    ) -> tuple[Selection, str]:
        """What ``MomentaryMemory.reconstruct(query, keep_roles=..., skip_roles=...)`` with ``cfg`` and
        ``candidate_pool=pool`` selects (one embedder), and the context rendered as the memory renders it."""
        return self.choose(query, self.candidates(query, qvec, cfg, pool, keep_roles=keep_roles, skip_roles=skip_roles))

    def candidates(
        self, query: str, qvec: np.ndarray, cfg: MemoryConfig, pool: int = 256, *, keep_roles: Sequence[str] = (), skip_roles: Sequence[str] = ()
    ) -> Candidates:
        """The first half of :meth:`memory`: the query's decisions, the turns that go in first, each
        signal's pool and every candidate's fused score (a benchmark may rescore ``fused`` with
        :func:`dataclasses.replace` before :meth:`choose`)."""
        return candidates(
            query,
            cfg,
            self.snap,
            scores=self.scores(query, cfg.stemming),
            search=self.search(query, qvec, cfg),
            weights=signal_weights(cfg.weights, (self.embedder,)),
            candidate_pool=pool,
            latest=latest_turns(self.snap, cfg.recent_turns, skip_roles, ()),
            kept_roles=[i for i, t in enumerate(self.turns) if t.role in keep_roles],
            skip_roles=skip_roles,
        )

    def choose(self, query: str, found: Candidates) -> tuple[Selection, str]:
        """The second half of :meth:`memory`: the fill over ``found``, rendered."""
        sel = choose(query, self.snap, self.counter, found, lambda i: self.partner(i, found.skip_roles))
        return sel, render(sel.turns, dates=bool(found.cfg.dates))

    def fill(self, ranked: Sequence[int], l_max: int, dates: bool = False) -> tuple[Selection, str]:
        """A plain fill baseline: turns in ``ranked`` order while they fit, rendered like the memory's
        ``role: text`` lines in time order (no recent turn, no partner turns, every turn whole or not
        at all; dated when ``dates``)."""
        cfg = MemoryConfig(l_max=l_max, partner_turns=False, dates=dates, recent_turns=0, cap_turns=False)
        sel = select_turns(self.snap, cfg, self.counter, recent=[], pinned=[], ranked=ranked, partner=self.partner)
        return sel, render(sel.turns, dates=dates)

    def ranking(self, query: str, qvec: np.ndarray, how: str, *, stem: bool = True) -> list[int]:
        """Every turn by one signal: "dense", "bm25", or "hybrid" (both fused by reciprocal rank); kept per question."""
        key = (query, np.asarray(qvec, dtype=np.float32).tobytes(), how, stem)
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
