"""MeVe: a corpus, its models and the five phases; :meth:`MeVe.run` is one query top to bottom."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from meve.core.errors import InputError, StoreError
from meve.core.languages import warn_if_unreadable
from meve.core.logs import query_label
from meve.core.records import ContextResult, PhaseRecord, check_query, check_texts, check_vector
from meve.core.tokens import TokenCounter, get_token_counter
from meve.mindref.documents import documents_from
from meve.mindref.hierarchy import Hierarchy
from meve.pipeline.calibrate import CorpusCalibration, calibrate
from meve.pipeline.config_file import ConfigLike, as_config
from meve.pipeline.ingest import add_windows, ingest, open_windows
from meve.pipeline.persist import Snapshots, check_index_dir, index_dir_for, open_lexical
from meve.pipeline.retrieve import Retriever
from meve.pipeline.runner import Neighbours, PhaseCallback, run_phases
from meve.retrieval.bm25 import DEFAULT_BM25
from meve.retrieval.chroma import check_collection_name, check_embedder, chroma_call, chroma_client, unique_collection_name
from meve.retrieval.lexical import Lexical, LexicalIndex
from meve.retrieval.store import ChromaStore, PassageStore, log_unfinished, plain_query
from meve.scoring.embedders import default_embedder, embedder_dimension, encode_windows
from meve.scoring.protocols import Embedder, Scorer, Scoring, SharedPass
from meve.scoring.resolve import Models, ScorerSpec, warm_up_scorer

__all__ = ["MeVe"]


class MeVe(Retriever):
    """Retrieve → verify → fallback → prioritise → prune → budget, with a trace per query: the
    corpus and phase 1 (:class:`~meve.pipeline.retrieve.Retriever`), the models, and the runner.

    Build with :meth:`from_texts` or :meth:`from_chroma` (``config``: a MeVeConfig, a dict of its
    fields or a JSON file of them, e.g. ``meve tune``'s); call :meth:`run` (or ``await``
    :meth:`arun`) per query, with per-call overrides of any MeVeConfig field as keyword arguments.
    """

    def __init__(
        self,
        *,
        store: PassageStore | None,
        lexical: Lexical,
        config: ConfigLike | None = None,
        embedder: Embedder | None = None,
        scorer: ScorerSpec = None,
        token_counter: Any = None,
        hierarchy: Hierarchy | None = None,
        query_encoder: Callable[[str], np.ndarray] | None = None,
        follow_replicas: bool = True,
    ) -> None:
        """``query_encoder``: how a query is embedded when it differs from ``embedder.encode`` (an
        asymmetric model's query side, e.g. LangChain's ``embed_query``). ``follow_replicas``:
        before a BM25 lookup, catch up on rows other handles or processes added to the collection
        (one ``count()``, about 4 ms at 100k rows embedded); ``False`` only where nothing else can
        write to it (``from_texts``/``from_documents`` set it for the in-memory collection they make)."""
        if store is not None and not isinstance(store, PassageStore):
            raise InputError(f"store must be a meve PassageStore (add/query/get/documents/count) or None, got {type(store).__name__}")
        if not isinstance(lexical, Lexical):
            raise InputError(f"lexical must implement meve.retrieval.lexical.Lexical (e.g. a LexicalIndex), got {type(lexical).__name__}")
        if query_encoder is not None and not callable(query_encoder):
            raise InputError(f"query_encoder must be a callable str -> vector or None, got {type(query_encoder).__name__}")
        if not isinstance(follow_replicas, bool):
            raise InputError(f"follow_replicas must be True or False, got {follow_replicas!r}")
        super().__init__(store, lexical, hierarchy, follow_replicas)
        self._query_encoder = query_encoder
        self.config = as_config(config)
        self.embedder: Embedder = embedder if embedder is not None else default_embedder()
        self._models = Models(self.embedder, scorer)
        self.token_counter: TokenCounter = get_token_counter(token_counter)
        self._owned_collections: list[tuple[Any, str]] = []
        self._closed = False
        self._snapshots = Snapshots(None)
        #: Where passages sit in their sources (``MeVeConfig.neighbours``); the adapters set it from their framework's links.
        self.neighbours: Neighbours | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def warm_up(self, texts: Sequence[str] | None = None, *, show_progress: bool = True) -> MeVe:
        """Load the embedder's and the verifier's models now, so the first query pays no load
        time (otherwise they load on first use; each loads once per process, see
        :data:`meve.models.registry`). With ``texts`` (passages of a store meve did not index),
        the verifier reads them now, with a progress bar, and keeps what it read on disk
        (:meth:`meve.scoring.resolve.Models.read_ahead`)."""
        if texts is None:
            self.embedder.encode(["warm up"])
            warm_up_scorer(self.scorer)
        else:
            self._models.read_ahead(texts, show_progress=show_progress)
        return self

    def close(self) -> None:
        """Release what this MeVe created: the in-memory collection ``from_texts`` made when given
        no client and no collection name (nothing else can reach it). A collection in your client
        is left as it is. Idempotent; a later ``run`` raises StoreError."""
        if self._closed:
            return
        self._closed = True
        for client, name in self._owned_collections:
            chroma_call(f"drop collection {name!r}", client.delete_collection, name)
        self._owned_collections = []

    def __enter__(self) -> MeVe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        config: ConfigLike | None = None,
        embedder: Embedder | None = None,
        scorer: ScorerSpec = None,
        token_counter: Any = None,
        client: Any = None,
        collection_name: str | None = None,
        bm25_backend: str = DEFAULT_BM25,
        show_progress: bool = False,
        batch_size: int = 256,
        index_dir: str | os.PathLike[str] | None = None,
    ) -> MeVe:
        """Embed ``texts`` into a Chroma collection (in memory unless ``client`` is given) and build BM25.

        ``index_dir``: where the BM25 snapshot and the verifier's compressed token vectors are kept
        (:mod:`meve.pipeline.persist`); by default beside a persistent collection, else nowhere."""
        texts, ids_, metas = check_texts(texts, ids, metadatas)
        asked_dir = check_index_dir(index_dir)
        if collection_name is not None:
            check_collection_name(collection_name)  # before any model loads or anything is written
        if not texts:
            raise InputError("texts is empty: give at least one passage to index (or use MeVe.from_chroma on an existing collection)")
        embedder = embedder if embedder is not None else default_embedder()
        dim = embedder_dimension(embedder)
        owned = client is None and collection_name is None  # nobody else can name it: close() drops it
        client = client if client is not None else chroma_client()
        name = collection_name or unique_collection_name()
        metadata = {"hnsw:space": "cosine", "meve:embedder": embedder.name}
        collection = chroma_call(f"open collection {name!r}", client.get_or_create_collection, name, metadata=metadata, embedding_function=None)
        check_embedder(collection, embedder)
        store = ChromaStore(collection, dimension=dim)
        open_windows(store, create=True)
        where = index_dir_for(collection, asked_dir)
        lexical, snapshots = open_lexical(store, where, bm25_backend)
        # A collection made in its own in-memory client under a name nobody was told: nothing else writes to it.
        meve = cls(store=store, lexical=lexical, config=config, embedder=embedder, scorer=scorer, token_counter=token_counter, follow_replicas=not owned)
        meve._persist(where, snapshots)
        if owned:
            meve._owned_collections = [(client, collection.name), *([(client, store.windows.name)] if store.windows is not None else [])]
        meve._ingest(texts, ids_, metas, show_progress=show_progress, batch_size=batch_size)
        return meve

    @classmethod
    def from_chroma(
        cls,
        collection: Any,
        *,
        config: ConfigLike | None = None,
        embedder: Embedder | None = None,
        scorer: ScorerSpec = None,
        token_counter: Any = None,
        bm25_backend: str = DEFAULT_BM25,
        index_dir: str | os.PathLike[str] | None = None,
    ) -> MeVe:
        """Attach to an existing Chroma collection; BM25 is built from its documents, or read from
        the snapshot beside it and caught up (``index_dir`` as in :meth:`from_texts`).

        The collection's recorded embedder must be this one (vectors of another model are not
        comparable even at the same dimension). A corpus with an ingestion that has not finished (a
        crash inside ``from_texts``/``add_texts``, or another process still adding) opens with a
        logged warning per ingestion saying so."""
        asked_dir = check_index_dir(index_dir)
        embedder = embedder if embedder is not None else default_embedder()
        check_embedder(collection, embedder)
        store = ChromaStore(collection, dimension=embedder_dimension(embedder))
        log_unfinished(collection.name, store.metadata())
        open_windows(store, create=False)
        where = index_dir_for(collection, asked_dir)
        lexical, snapshots = open_lexical(store, where, bm25_backend)
        meve = cls(store=store, lexical=lexical, config=config, embedder=embedder, scorer=scorer, token_counter=token_counter)
        meve._persist(where, snapshots)
        return meve

    def _persist(self, where: Path | None, snapshots: Snapshots) -> None:
        self._snapshots = snapshots
        self._models.keep_tokens_in(where / "tokens" if where is not None else None)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Any],
        *,
        config: ConfigLike | None = None,
        embedder: Embedder | None = None,
        scorer: ScorerSpec = None,
        token_counter: Any = None,
        summary_tokens: int = 64,
        doc_weights: Mapping[str, float] | None = None,
        doc_pool: int = 30,
        client: Any = None,
        collection_name: str | None = None,
        show_progress: bool = False,
    ) -> MeVe:
        """Whole documents, no pre-chunking: ``(doc_id, title, text)`` tuples, dicts with those keys,
        or :class:`meve.mindref.documents.Document`. Phase 1 is MindRef-style: documents first (title
        mention, BM25, summary and best-window cosine, the verifier on title + lead, fused with
        ``doc_weights``), then the sentence windows inside them; the fallback is BM25 over the
        windows of every document.

        Every sentence window and every document summary is embedded here, once, and stored in
        two Chroma collections (``<collection_name>-documents`` / ``-windows``; in memory unless
        ``client`` is given). Documents already in those collections are loaded, so a persistent
        corpus reopens with ``documents=[]``. A query embeds once and only looks things up."""
        cfg = as_config(config).replace(retrieval="hierarchical")
        if collection_name is not None:
            check_collection_name(collection_name)  # before any model loads or anything is written
        docs = documents_from(documents)
        if not docs and collection_name is None:
            raise InputError("documents is empty: give at least one (doc_id, title, text) document (or a collection_name that holds some)")
        embedder = embedder if embedder is not None else default_embedder()
        owned = client is None and collection_name is None  # nobody else can name them: close() drops them
        client = client if client is not None else chroma_client()
        meve = cls(
            store=None, lexical=LexicalIndex([], []), config=cfg, embedder=embedder, scorer=scorer, token_counter=token_counter, follow_replicas=not owned
        )
        hierarchy = Hierarchy(
            client,
            collection_name or unique_collection_name(),
            embedder,
            meve.token_counter,
            passage_tokens=cfg.passage_tokens,
            summary_tokens=summary_tokens,
            weights=doc_weights,
            pool=doc_pool,
        )
        if owned:
            meve._owned_collections = [(client, name) for name in hierarchy.collection_names()]
        if not docs and not len(hierarchy):
            raise InputError("documents is empty and the collections hold none: give at least one (doc_id, title, text) document")
        meve.hierarchy = hierarchy
        if docs:
            hierarchy.add(docs, lambda texts: meve.passage_vectors(texts)[0], show_progress=show_progress)
        return meve

    def add_texts(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[str] | None = None,
        metadatas: Sequence[Mapping[str, Any] | None] | None = None,
        show_progress: bool = False,
        batch_size: int = 256,
    ) -> list[str]:
        """Embed and store more passages (ids as :meth:`from_texts`); returns their ids.

        An id the collection already holds with the same text is skipped, so the same call can be
        run again after a crash; one it holds with another text is refused, naming it."""
        if self.store is None:
            raise InputError("this MeVe was built with from_documents; it has no passage store to add texts to")
        texts, ids_, metas = check_texts(texts, ids, metadatas, start=self.store.count())
        if texts:  # none: nothing to add, as LangChain's add_texts([]), and no ingestion recorded
            self._ingest(texts, ids_, metas, show_progress=show_progress, batch_size=batch_size)
        return ids_

    def add_windows(self, *, show_progress: bool = False, batch_size: int = 256) -> int:
        """Make the window vectors of every stored passage that has none, so a passage longer than
        the embedder's window is found by all its text (:mod:`meve.retrieval.passage_windows`): for
        a collection built by a meve before 0.4.0, which opens with a warning saying so. Returns how
        many windows were written; a passage that fits one window has none."""
        return add_windows(self, show_progress=show_progress, batch_size=batch_size)

    def _ingest(self, texts: list[str], ids: list[str], metas: list[dict[str, Any] | None], *, show_progress: bool, batch_size: int) -> None:
        ingest(self, texts, ids, metas, show_progress=show_progress, batch_size=batch_size)

    # -- models ------------------------------------------------------------------------
    @property
    def scorer(self) -> Scorer:
        """The scorer: the one given (or named), else meve's default (:func:`meve.scoring.resolve.make_scoring`)."""
        return self._models.scorer

    @property
    def scoring(self) -> Scoring:
        """The scorer as this MeVe runs it (passage scores, sentence scores, shared pass); pass it
        as ``scorer=`` to another MeVe over the same embedder to run the same."""
        return self._models.scoring

    def _shared_pass(self, verify: bool) -> SharedPass | None:
        # A shared pass (late interaction's token vectors) comes from the forward pass that makes the dense embedding: one model run per batch or query.
        return self._models.scoring.shared if verify else None

    def passage_vectors(self, texts: Sequence[str], *, windows: bool = False) -> tuple[np.ndarray, list[np.ndarray] | None]:
        """``texts``' dense vectors as this MeVe stores passages, and with ``windows`` each one's later
        windows' vectors (:meth:`window_vectors`; None where the models cannot make them): the
        verifier's shared pass makes both in one model run, keeping its token vectors; else the embedder."""
        shared, texts = self._shared_pass(self.config.verify), list(texts)
        if windows and shared is not None and shared.windowed is not None:
            return shared.windowed(texts)
        vecs = shared.passages(texts) if shared is not None else self.embedder.encode(texts)
        return vecs, (encode_windows(self.embedder, texts) if windows else None)

    def window_vectors(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        """Each text's later windows' vectors only (none for a text that fits one window, which is
        tokenized and not run through the model); None where the models cannot make them."""
        made = encode_windows(self.embedder, texts)
        shared = self._shared_pass(self.config.verify) if made is None else None
        return shared.windowed(list(texts))[1] if shared is not None and shared.windowed is not None else made

    def save_lexical(self) -> bool:
        """Write the BM25 snapshot beside the collection when it is due (the index grew by 5% since
        the last: :class:`~meve.pipeline.persist.Snapshots`); returns whether it wrote one."""
        return self._snapshots.save_if_due(self.lexical)

    def _embed_query(self, query: str, verify: bool = False) -> np.ndarray:
        if self._query_encoder is not None:
            return np.asarray(self._query_encoder(query), dtype=np.float32)
        shared = self._shared_pass(verify)
        vec = shared.query(query) if shared is not None else self.embedder.encode([query])[0]
        return np.asarray(vec, dtype=np.float32)

    # -- running -----------------------------------------------------------------------
    def query_vector(self, query: str) -> np.ndarray:
        """``query``'s vector as :meth:`run` makes it: ``run(query, query_vector=...)`` runs settings on one query with one model pass."""
        return self._embed_query(check_query(query), self.config.verify)

    def run(self, query: str, *, on_phase: PhaseCallback | None = None, query_vector: Any = None, **overrides: Any) -> ContextResult:
        """Build the budgeted, verified context for ``query``.

        ``overrides`` are MeVeConfig fields for this call only (e.g. ``t_max=256``);
        ``on_phase`` is called with each PhaseRecord as soon as the phase ends; ``query_vector``
        (from :meth:`query_vector`) skips embedding the query.
        """
        if self._closed:
            raise StoreError("this MeVe was closed; build a new one (MeVe.from_chroma reopens a collection you keep)")
        query = check_query(query)
        cfg = self.config.replace(**overrides)
        warn_if_unreadable(f"the {query_label(query)}", [query], self.embedder.name)
        t0 = time.perf_counter()
        qvec = self._embed_query(query, cfg.verify) if query_vector is None else check_vector(query_vector, "query_vector")
        candidates, lexical, info = self.retrieve(query, qvec, cfg, lambda: self.scorer)
        info["embedder"] = self.embedder.name
        first = ("retrieve", _ms(t0), {p.id: p.dense_score or 0.0 for p in candidates}, info)
        return run_phases(
            query,
            candidates,
            cfg,
            scoring=lambda: self._models.scoring,
            embedder=self.embedder,
            token_counter=self.token_counter,
            query_vec=qvec,
            lexical=lexical,
            on_phase=on_phase,
            first=first,
            neighbours=self.neighbours,
        )

    async def arun(self, query: str, *, on_phase: PhaseCallback | None = None, **overrides: Any) -> ContextResult:
        """:meth:`run` in a worker thread, so the event loop is not blocked by model inference."""
        return await asyncio.to_thread(self.run, query, on_phase=on_phase, **overrides)

    def calibrate(self, *, target: float = 0.9, queries: int = 200, seed: int = 0, show_progress: bool = False) -> CorpusCalibration:
        """Choose tau and the cut for this corpus and scorer with no labels (pseudo-questions taken
        from the passages; :mod:`meve.pipeline.calibrate`). Apply it with
        ``meve.config = meve.config.replace(**c.config)``; save it with ``c.save(path)``."""
        return calibrate(self, target=target, queries=queries, seed=seed, show_progress=show_progress)

    def baseline(self, query: str, k: int = 5) -> ContextResult:
        """Standard RAG for comparison: dense top-k as a plain vector store ranks it (each passage by
        its own vector, without meve's window vectors), no verification and no budget."""
        query = check_query(query)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InputError(f"k={k!r} is not allowed: expected an int >= 1 (the number of passages to return)")
        if self.store is None:
            raise InputError("baseline needs a flat passage store; this MeVe was built with from_documents")
        t0 = time.perf_counter()
        docs = tuple(plain_query(self.store, self._embed_query(query), k))
        context = "\n\n".join(p.text for p in docs)
        total = self.token_counter.count(context)
        scores = {p.id: p.dense_score or 0.0 for p in docs}
        rec = PhaseRecord("retrieve", tuple(p.id for p in docs), scores=scores, tokens_in=None, tokens_out=total, ms=_ms(t0), info={"k": k})
        return ContextResult(query=query, documents=docs, context=context, token_count=total, trace=(rec,), config={"k": k})


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000.0
