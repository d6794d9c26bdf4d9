"""MeVe: the five phases wired together, each recorded in the trace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from meve.config import MeVeConfig
from meve.errors import InputError
from meve.lexical import BM25Backend, make_bm25, top_k
from meve.models import Embedder, EmbeddingScorer, RelevanceScorer, default_embedder, default_scorer, embedder_dimension
from meve.phases import PhaseOutput, drop_redundant, fallback, novelty_select, pack_budget, verify
from meve.records import ContextResult, Dropped, Passage, PhaseRecord
from meve.store import ChromaStore, PassageStore, check_metadata, chroma_client, unique_collection_name
from meve.tokens import TokenCounter, count_many, get_token_counter

PhaseCallback = Callable[[PhaseRecord], None]


def check_query(query: Any) -> str:
    if not isinstance(query, str):
        raise InputError(f"query must be a str, got {type(query).__name__}: {query!r}")
    if not query.strip():
        raise InputError(f"query {query!r} is empty or whitespace; give the question to retrieve context for")
    return query


def check_texts(texts: Any, ids: Any, metadatas: Any, start: int = 0) -> tuple[list[str], list[str], list[dict[str, Any] | None]]:
    """Validate a batch of corpus texts with optional ids and metadatas; returns normalised lists."""
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise InputError(f"texts must be a list of str, got {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InputError(f"texts[{i}] is {type(t).__name__} ({t!r}); every text must be a str")
        if not t.strip():
            raise InputError(f"texts[{i}] is empty or whitespace; remove it before indexing")
    if ids is None:
        ids = [f"doc-{start + i}" for i in range(len(texts))]
    else:
        ids = list(ids)
        if len(ids) != len(texts):
            raise InputError(f"ids has {len(ids)} entries but texts has {len(texts)}; give one id per text")
        for i, pid in enumerate(ids):
            if not isinstance(pid, str) or not pid:
                raise InputError(f"ids[{i}]={pid!r}: every id must be a non-empty str")
    seen: set[str] = set()
    for pid in ids:
        if pid in seen:
            raise InputError(f"duplicate id {pid!r}: ids must be unique")
        seen.add(pid)
    if metadatas is None:
        metas: list[dict[str, Any] | None] = [None] * len(texts)
    else:
        metadatas = list(metadatas)
        if len(metadatas) != len(texts):
            raise InputError(f"metadatas has {len(metadatas)} entries but texts has {len(texts)}; give one per text (or None)")
        metas = [check_metadata(m, f"metadatas[{i}]") for i, m in enumerate(metadatas)]
    return texts, ids, metas


class LexicalIndex:
    """BM25 over the store's passages, addressed by passage id."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], backend: str = "bm25s") -> None:
        self.backend_name = backend
        self.ids: list[str] = list(ids)
        self.backend: BM25Backend = make_bm25(backend, texts)

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        self.ids.extend(ids)
        self.backend.add(texts)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        if not self.ids or k <= 0:
            return []
        return [(self.ids[i], s) for i, s in top_k(self.backend.get_scores(query), k)]


class MeVe:
    """Retrieve → verify → fallback → prioritise → budget, with a trace per query.

    Build with :meth:`from_texts` or :meth:`from_chroma`; call :meth:`run` (or
    ``await`` :meth:`arun`) per query. Per-call overrides of any
    :class:`MeVeConfig` field are passed as keyword arguments.
    """

    def __init__(
        self,
        store: PassageStore,
        lexical: LexicalIndex,
        *,
        config: MeVeConfig | None = None,
        embedder: Embedder | None = None,
        scorer: RelevanceScorer | None = None,
        token_counter: Any = None,
    ) -> None:
        self.store = store
        self.lexical = lexical
        self.config = config if config is not None else MeVeConfig()
        if not isinstance(self.config, MeVeConfig):
            raise InputError(f"config must be a MeVeConfig, got {type(self.config).__name__}")
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self._scorer = scorer
        self.token_counter: TokenCounter = get_token_counter(token_counter)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        config: MeVeConfig | None = None,
        embedder: Embedder | None = None,
        scorer: RelevanceScorer | None = None,
        token_counter: Any = None,
        client: Any = None,
        collection_name: str | None = None,
        bm25_backend: str = "bm25s",
        show_progress: bool = False,
        batch_size: int = 256,
    ) -> MeVe:
        """Embed ``texts`` into a Chroma collection (in memory unless ``client`` is given) and build BM25."""
        texts, ids_, metas = check_texts(texts, ids, metadatas)
        if not texts:
            raise InputError("texts is empty: give at least one passage to index (or use MeVe.from_chroma on an existing collection)")
        embedder = embedder if embedder is not None else default_embedder()
        dim = embedder_dimension(embedder)
        client = client if client is not None else chroma_client()
        collection = client.get_or_create_collection(
            collection_name or unique_collection_name(),
            metadata={"hnsw:space": "cosine", "meve:embedder": embedder.name},
            embedding_function=None,
        )
        store = ChromaStore(collection, dimension=dim)
        existing_ids, existing_texts = store.documents() if store.count() else ([], [])
        clash = set(existing_ids).intersection(ids_)
        if clash:
            raise InputError(f"ids already in collection {collection.name!r}: {sorted(clash)[:5]}; use new ids")
        lexical = LexicalIndex(existing_ids, existing_texts, bm25_backend)
        meve = cls(store, lexical, config=config, embedder=embedder, scorer=scorer, token_counter=token_counter)
        meve._ingest(texts, ids_, metas, show_progress=show_progress, batch_size=batch_size)
        return meve

    @classmethod
    def from_chroma(
        cls,
        collection: Any,
        *,
        config: MeVeConfig | None = None,
        embedder: Embedder | None = None,
        scorer: RelevanceScorer | None = None,
        token_counter: Any = None,
        bm25_backend: str = "bm25s",
    ) -> MeVe:
        """Attach to an existing Chroma collection; BM25 is built from its documents."""
        embedder = embedder if embedder is not None else default_embedder()
        store = ChromaStore(collection, dimension=embedder_dimension(embedder))
        ids, texts = store.documents()
        return cls(store, LexicalIndex(ids, texts, bm25_backend), config=config, embedder=embedder, scorer=scorer, token_counter=token_counter)

    def add_texts(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        show_progress: bool = False,
        batch_size: int = 256,
    ) -> list[str]:
        texts, ids_, metas = check_texts(texts, ids, metadatas, start=self.store.count())
        clash = set(self.lexical.ids).intersection(ids_)
        if clash:
            raise InputError(f"ids already indexed: {sorted(clash)[:5]}; use new ids")
        self._ingest(texts, ids_, metas, show_progress=show_progress, batch_size=batch_size)
        return ids_

    def _ingest(self, texts: list[str], ids: list[str], metas: list[dict[str, Any] | None], *, show_progress: bool, batch_size: int) -> None:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(texts), desc="meve: embedding", unit="passage", disable=not show_progress)
        try:
            for start in range(0, len(texts), batch_size):
                sl = slice(start, start + batch_size)
                vecs = self.embedder.encode(texts[sl])
                self.store.add(ids[sl], texts[sl], metas[sl], vecs)
                self.lexical.add(ids[sl], texts[sl])
                bar.update(len(texts[sl]))
        finally:
            bar.close()

    # -- models ------------------------------------------------------------------------
    @property
    def scorer(self) -> RelevanceScorer:
        if self._scorer is None:
            self._scorer = default_scorer(self.embedder)
        return self._scorer

    def _relevance(self, query: str, query_vec: np.ndarray, passages: Sequence[Passage], cache: dict[str, float], cfg: MeVeConfig) -> tuple[list[float], int]:
        """Verifier scores, each (query, passage) pair scored at most once per run."""
        todo = [p for p in passages if p.id not in cache]
        if todo:
            scorer = self.scorer
            reuse = (
                isinstance(scorer, EmbeddingScorer)
                and getattr(scorer, "embedder", None) in (self.embedder, getattr(self.embedder, "inner", None))
                and all(p.embedding is not None for p in todo)
            )
            if reuse:
                assert isinstance(scorer, EmbeddingScorer)
                scores = scorer.score_embeddings(query_vec, np.stack([np.asarray(p.embedding) for p in todo]))
            else:
                kwargs: dict[str, Any] = {}
                if hasattr(scorer, "max_length"):
                    kwargs = {"max_length": cfg.verifier_max_length, "batch_size": cfg.verifier_batch_size}
                scores = scorer.score(query, [p.text for p in todo], **kwargs)
            for p, s in zip(todo, scores, strict=True):
                cache[p.id] = float(s)
        return [cache[p.id] for p in passages], len(todo)

    def _embed_query(self, query: str) -> np.ndarray:
        return np.asarray(self.embedder.encode([query])[0], dtype=np.float32)

    # -- running -----------------------------------------------------------------------
    def run(self, query: str, *, on_phase: PhaseCallback | None = None, **overrides: Any) -> ContextResult:
        """Build the budgeted, verified context for ``query``.

        ``overrides`` are MeVeConfig fields for this call only (e.g. ``t_max=256``);
        ``on_phase`` is called with each PhaseRecord as soon as the phase ends.
        """
        query = check_query(query)
        cfg = self.config.replace(**overrides)
        records: list[PhaseRecord] = []
        counts: dict[str, int] = {}

        def tokens(passages: Sequence[Passage]) -> int:
            missing = [p for p in passages if p.id not in counts]
            if missing:
                counts.update(zip((p.id for p in missing), count_many(self.token_counter, [p.text for p in missing]), strict=True))
            return sum(counts[p.id] for p in passages)

        def record(name: str, before: Sequence[Passage], out: PhaseOutput, ms: float, scores: Mapping[str, float] | None = None, **info: Any) -> None:
            rec = PhaseRecord(
                phase=name,
                kept=tuple(p.id for p in out.kept),
                dropped=out.dropped,
                scores=dict(scores or {}),
                tokens_in=tokens(before),
                tokens_out=tokens(out.kept),
                ms=ms,
                info={**out.info, **info},
            )
            records.append(rec)
            if on_phase is not None:
                on_phase(rec)

        # Phase 1: dense kNN.
        t0 = time.perf_counter()
        qvec = self._embed_query(query)
        candidates = tuple(self.store.query(qvec, cfg.k_init))
        record(
            "retrieve",
            (),
            PhaseOutput(candidates),
            _ms(t0),
            {p.id: p.dense_score or 0.0 for p in candidates},
            k_init=cfg.k_init,
            store_size=self.store.count(),
            embedder=self.embedder.name,
        )

        # Phase 2: verification.
        t0 = time.perf_counter()
        cache: dict[str, float] = {}
        if cfg.verify and candidates:
            rel, scored = self._relevance(query, qvec, candidates, cache, cfg)
            out = verify(candidates, rel, cfg.tau)
            record(
                "verify",
                candidates,
                out,
                _ms(t0),
                {p.id: s for p, s in zip(candidates, rel, strict=True)},
                verifier=self.scorer.name,
                tau=cfg.tau,
                pairs_scored=scored,
            )
        else:
            out = PhaseOutput(candidates, info={"skipped": "verify=False" if not cfg.verify else "no candidates"})
            record("verify", candidates, out, _ms(t0))
        verified = out.kept

        # Phase 3: BM25 fallback.
        t0 = time.perf_counter()
        if cfg.fallback and len(verified) < cfg.n_min and cfg.fallback_k > 0:
            hits = self.lexical.search(query, cfg.fallback_k + len(verified))
            bm25 = dict(hits)
            fetched = {p.id: p for p in self.store.get([pid for pid, _ in hits])}
            lexical = [fetched[pid].with_(bm25_score=s) for pid, s in hits if pid in fetched]
            out = fallback(verified, lexical, cfg.n_min, cfg.fallback_k)
            added = [p for p in out.kept if p.source == "fallback"]
            scored = 0
            if added and cfg.verify:
                # Score the additions too, so every passage's .score is on the verifier's scale.
                rel, scored = self._relevance(query, qvec, added, cache, cfg)
                rescored = {p.id: p.with_(relevance=r) for p, r in zip(added, rel, strict=True)}
                out = PhaseOutput(tuple(rescored.get(p.id, p) for p in out.kept), out.dropped, out.info)
            record(
                "fallback",
                verified,
                out,
                _ms(t0),
                bm25,
                backend=self.lexical.backend_name,
                pairs_scored=scored,
                reason=f"{len(verified)} verified < n_min {cfg.n_min}",
            )
        else:
            why = "fallback=False" if not cfg.fallback else (f"{len(verified)} verified >= n_min {cfg.n_min}" if len(verified) >= cfg.n_min else "fallback_k=0")
            out = PhaseOutput(verified, info={"triggered": False, "reason": why})
            record("fallback", verified, out, _ms(t0))
        merged = out.kept

        # Phase 4: prioritisation.
        t0 = time.perf_counter()
        if cfg.prioritisation == "redundancy":
            out = drop_redundant(merged, cfg.theta_redundancy)
        elif cfg.prioritisation == "novelty":
            out = novelty_select(merged, cfg.novelty_lambda, cfg.theta_redundancy)
        else:
            out = PhaseOutput(merged, info={"skipped": "prioritisation='none'"})
        record("prioritise", merged, out, _ms(t0), mode=cfg.prioritisation, theta=cfg.theta_redundancy)
        prioritised = out.kept

        # Phase 5: token budget.
        t0 = time.perf_counter()
        tokens(prioritised)
        sep_tokens = self.token_counter.count(cfg.separator)
        out = pack_budget(prioritised, [counts[p.id] for p in prioritised], cfg.t_max, sep_tokens, cfg.max_passages)
        kept = list(out.kept)
        dropped = list(out.dropped)
        context = cfg.separator.join(p.text for p in kept)
        total = self.token_counter.count(context)
        # Token counts of joined text can differ from the sum of parts; the budget is on the joined text.
        while total > cfg.t_max and kept:
            last = kept.pop()
            dropped.append(Dropped(last.id, f"joined context was {total} tokens > t_max {cfg.t_max}", float(counts[last.id])))
            context = cfg.separator.join(p.text for p in kept)
            total = self.token_counter.count(context)
        info: dict[str, Any] = {"t_max": cfg.t_max, "token_counter": self.token_counter.name, "context_tokens": total}
        if not kept:
            info["empty"] = "no candidates" if not prioritised else f"every remaining passage alone exceeds t_max {cfg.t_max}"
        record("budget", prioritised, PhaseOutput(tuple(kept), tuple(dropped), out.info), _ms(t0), **info)

        return ContextResult(query=query, documents=tuple(kept), context=context, token_count=total, trace=tuple(records), config=cfg.to_dict())

    async def arun(self, query: str, *, on_phase: PhaseCallback | None = None, **overrides: Any) -> ContextResult:
        """:meth:`run` in a worker thread, so the event loop is not blocked by model inference."""
        return await asyncio.to_thread(self.run, query, on_phase=on_phase, **overrides)

    def baseline(self, query: str, k: int = 5) -> ContextResult:
        """Standard RAG for comparison: dense top-k, no verification and no budget."""
        query = check_query(query)
        t0 = time.perf_counter()
        docs = tuple(self.store.query(self._embed_query(query), k))
        context = "\n\n".join(p.text for p in docs)
        total = self.token_counter.count(context)
        rec = PhaseRecord(
            "retrieve",
            tuple(p.id for p in docs),
            scores={p.id: p.dense_score or 0.0 for p in docs},
            tokens_in=None,
            tokens_out=total,
            ms=_ms(t0),
            info={"k": k},
        )
        return ContextResult(query=query, documents=docs, context=context, token_count=total, trace=(rec,), config={"k": k})


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
