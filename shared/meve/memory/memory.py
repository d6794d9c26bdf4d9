"""Momentary Contexts (Jeong, 2024): verbatim chat memory in Chroma, rebuilt per query.

Every turn is stored verbatim in Chroma (:mod:`meve.memory.session`: one collection per session and
embedder, so isolation holds by construction). Per query the context is rebuilt
(:mod:`meve.memory.decide` for the per-query decisions, :mod:`meve.memory.select` for the fill): past
turns by hybrid BM25 + vector score, the most recent first when the query follows up on them, cut to
``l_max`` tokens, sorted by time. Chroma is the single source of truth: BM25 statistics and the turn
list (:mod:`meve.memory.log`) are rebuilt from it on open and updated per turn. Several processes may
write one session (turns ordered by timestamp and a key unique across processes; each read first
learns what other writers added from a per-session "heads" collection). Threads are safe; no lock is
held across a model call.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from meve.core.config import MemoryConfig, validate_weights
from meve.core.errors import InputError, StoreError
from meve.core.languages import warn_if_unreadable
from meve.core.logs import log, query_label
from meve.core.records import check_query
from meve.core.tokens import TokenCounter, get_token_counter
from meve.memory.decide import decide_parts
from meve.memory.log import Snapshot, TurnLog
from meve.memory.rebuild import candidates, choose
from meve.memory.records import MemoryContext, Turn, check_roles, check_turn_ids
from meve.memory.select import latest_turns, signal_weights, turn_traces
from meve.memory.session import EPOCH, SessionStore, check_place, legacy_key, new_order_key, time_order, validate_session_id
from meve.memory.signals import vector_hits, warn_if_unfitted
from meve.memory.turns import TurnRules, resolve_items
from meve.retrieval.chroma import acquire_client, chroma_client, made_by_open, release_client, undo_open, warn_if_untimed
from meve.scoring.embedders import default_embedder, embedder_dimension, encode_checked
from meve.scoring.protocols import Embedder

__all__ = ["MomentaryMemory"]


class MomentaryMemory:
    """Chat memory that stores every turn verbatim and rebuilds a minimal context per query.

    Complexity (N turns in the session, E embedders, P candidate pool): ``add`` is
    O(E · embed(turn) + E · Chroma insert + tokens(turn)): the BM25 statistics are updated in
    place, never rebuilt. ``reconstruct`` is O(E · ANN search + postings of the query terms +
    P log P); nothing scans all N turns' text.
    """

    def __init__(
        self,
        session_id: str,
        *,
        path: str | None = None,
        client: Any = None,
        config: MemoryConfig | None = None,
        embedders: Sequence[Embedder] | None = None,
        token_counter: Any = None,
        clock: Callable[[], datetime] | None = None,
        collection_prefix: str = "meve-mem",
        candidate_pool: int = 256,
        create: bool = True,
    ) -> None:
        """``create=False`` opens an existing session only: an unknown one raises StoreError naming those that exist."""
        self.session_id = validate_session_id(session_id)
        if path is not None and client is not None:
            raise InputError("give either path= or client=, not both")
        check_place(path, collection_prefix, create=create)  # before any model loads or any file is written
        self.config = config if config is not None else MemoryConfig()
        if not isinstance(self.config, MemoryConfig):
            raise InputError(f"config must be a MemoryConfig, got {type(self.config).__name__}")
        self.embedders: tuple[Embedder, ...] = tuple(embedders) if embedders else (default_embedder(),)
        names = [e.name for e in self.embedders]
        if len(set(names)) != len(names):
            raise InputError(f"embedders must have distinct names, got {names}")
        validate_weights(self.config.weights, tuple(names))
        warn_if_unfitted(self.config, names[0])
        # A path is meve's to open and to release on close(); a client given is the caller's.
        self._owned_path, self._closed = path, False
        made = made_by_open(path) if create else None  # what opening ``path`` creates, removed again if the open fails
        self.client = client if client is not None else (acquire_client(path, create=create) if path is not None else chroma_client())
        warn_if_untimed(self.client)
        self.token_counter: TokenCounter = get_token_counter(token_counter)
        self.clock = clock if clock is not None else lambda: datetime.now(timezone.utc)
        self.candidate_pool = candidate_pool
        self._lock = threading.RLock()  # in-memory state only: never held across model or network calls
        self._write_lock = threading.Lock()  # one batch at a time from this handle
        try:
            self._store = SessionStore(self.client, self.session_id, self.embedders, prefix=collection_prefix, create=create, path=path)
        except BaseException:
            self.close()  # a refused open releases the client it acquired, and removes a directory it made
            undo_open(path, made)
            raise
        self._writer = f"w-{uuid.uuid4().hex}"  # this handle's heads row
        self._written = 0  # turns this handle has written: its heads row's value, strictly increasing
        self._dims: list[int] | None = None  # measured at the first write, so reading a memory loads no model
        self._log = TurnLog(self.token_counter, stemming=self.config.stemming)
        self._seen: dict[str, Any] | None = None  # the heads rows as of the last reconciliation with storage
        self._load()

    # -- state ------------------------------------------------------------------------
    def _load(self) -> None:
        """Rebuild turns and BM25 from Chroma; repair secondary collections after a crash."""
        head = self._store.head()  # read before the turns: whatever lands after it is learned at the next read
        loaded = sorted(self._store.turns(), key=time_order)
        log = TurnLog(self.token_counter, stemming=self.config.stemming)
        log.append(loaded)
        with self._lock:
            self._log, self._seen = log, head
        self._store.repair(loaded, [e.encode for e in self.embedders[1:]])

    def _order_key(self, turn: Turn) -> str:
        with self._lock:
            return self._log.order_key(turn.id) or legacy_key(turn)

    def _catch_up(self) -> int:
        """Learn the turns other processes wrote to this session since this handle last looked.

        When the heads rows equal those last reconciled, nothing is new (one small read). Otherwise
        one ``count()``; then the turns from the last known timestamp (less the accepted clock skew)
        onwards, and a full id scan only when that window cannot account for the difference. A
        changed epoch (another handle deleted turns) reloads. Returns how many turns were learned.
        """
        self._check_open()
        head = self._store.head()
        with self._lock:
            seen = self._seen
        if head is not None and head == seen:
            return 0
        if head is not None and seen is not None and head.get(EPOCH) != seen.get(EPOCH):
            self._load()
            return 0
        stored = self._store.count()
        with self._lock:
            known, latest = len(self._log), self._log.latest
        if stored < known:  # another process deleted turns: rebuild from storage
            self._load()
            return 0
        with self._lock:
            index = self._log.index
        new = self._store.unknown(stored, index, latest, self.config.max_clock_skew_s) if stored > known else []
        with self._lock:
            fresh = [tk for tk in sorted(new, key=time_order) if tk[0].id not in self._log.index]
            self._log.append(fresh)
            if head is not None:
                self._seen = head
        return len(fresh)

    # -- lifecycle ----------------------------------------------------------------------
    def warm_up(self) -> MomentaryMemory:
        """Load the embedders' models now, so the first turn or query pays no load time."""
        for emb in self.embedders:
            emb.encode(["warm up"])
        return self

    def close(self) -> None:
        """Release what this handle opened: the embedded Chroma instance of ``path=`` (its files, caches and threads)
        once no other meve handle in the process uses that directory. Stored turns stay on disk. Idempotent; any later call raises StoreError."""
        with self._write_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned_path is not None:
                release_client(self._owned_path)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> MomentaryMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"session {self.session_id!r} on {self._store.where}: this MomentaryMemory was closed; open a new one")

    # -- writing ------------------------------------------------------------------------
    def add(
        self,
        text: str,
        role: str = "user",
        *,
        turn_id: str | None = None,
        timestamp: Any = None,
        metadata: Mapping[str, Any] | None = None,
        supersede: bool = False,
    ) -> Turn:
        """Store one turn verbatim. Re-adding the same ``turn_id`` with the same role and text returns
        the stored turn (idempotent); ``supersede`` as in :meth:`add_many`."""
        item = {"text": text, "role": role, "turn_id": turn_id, "timestamp": timestamp, "metadata": metadata}
        return self.add_many([item], supersede=supersede)[0]

    def add_many(self, items: Iterable[str | Mapping[str, Any]], *, supersede: bool = False) -> list[Turn]:
        """Store several turns in one batch (one embedding pass per embedder), all or nothing.

        Each item is a text (role "user") or a dict with ``text`` and optional ``role``,
        ``turn_id``, ``timestamp``, ``metadata``. A ``turn_id`` stored with another role or text is
        an InputError, or, with ``supersede=True``, an edit (a message edited or regenerated in
        place): the stored turn's text, role and vectors are replaced in every collection and in
        BM25, its time and place kept, ``Turn.edited`` set. If Chroma rejects any part of the
        batch, what was already written is undone and a StoreError is raised, so storage and this
        handle stay equal. No lock is held that ``reconstruct`` waits on while the batch is
        embedded or written.
        """
        items = list(items)
        with self._write_lock:
            self._catch_up()
            with self._lock:
                last, seq = self._log.latest, len(self._log)
            res = resolve_items(items, self._stored, self._rules(), last, seq, supersede=supersede)
            edits = [new for _, new in res.edits]
            if not edits and not res.fresh:
                return res.turns
            vecs = self._vectors([t.text for t in (*edits, *res.fresh)])
            saved = self._store.overwrite(edits, [self._order_key(t) for t in edits], [v[: len(edits)] for v in vecs]) if edits else []
            try:
                if res.fresh:
                    self._store_batch(res.fresh, [v[len(edits) :] for v in vecs])
            except StoreError:
                self._store.restore(saved)
                raise
            if edits:  # no count changed: other handles learn the edit from a new epoch; this one reloads (BM25 removes no document)
                self._store.bump(EPOCH, uuid.uuid4().hex)
                self._load()
                log.info("meve: session %r: turn(s) %s superseded by an edit; the earlier text is no longer stored", self.session_id, [t.id for t in edits])
            return res.turns

    def _vectors(self, texts: list[str]) -> list[np.ndarray]:
        if self._dims is None:
            self._dims = [embedder_dimension(e) for e in self.embedders]
        return encode_checked(self.embedders, texts, self._dims)

    def _store_batch(self, fresh: list[Turn], vecs: list[np.ndarray]) -> None:
        okeys = [new_order_key(t.timestamp) for t in fresh]
        # Primary first: a crash between collections is repaired on open (secondaries follow the primary).
        written: list[Any] = []
        # Advanced before the attempt: a heads value is never reused, even when a bump fails after
        # the server applied it, so a reader can never mistake a later batch for one it has seen.
        self._written += len(fresh)
        try:
            for col, v in zip(self._store.collections, vecs, strict=True):
                written.append(col)
                self._store.write(col, fresh, okeys, v)
            self._store.bump(self._writer, self._written)  # the batch is acknowledged to other readers from here
        except StoreError as exc:
            self._store.roll_back(written, [t.id for t in fresh])
            raise StoreError(f"{exc}; none of the {len(fresh)} turn(s) of this batch is stored (the part already written was deleted)") from exc
        with self._lock:
            # A read on another thread may have learned these turns from storage already.
            self._log.append([(t, k) for t, k in zip(fresh, okeys, strict=True) if t.id not in self._log.index])
            if self._seen is not None:
                self._seen = {**self._seen, self._writer: self._written}

    def _rules(self) -> TurnRules:
        return TurnRules(self.session_id, self.config.max_turn_chars, self.config.max_clock_skew_s, self.clock)

    def _stored(self, turn_id: str) -> Turn | None:
        with self._lock:
            return self._log.get(turn_id)

    def delete(self, turn_id: str) -> Turn:
        """Delete one stored turn from every collection; returns it. An unknown id raises InputError."""
        with self._write_lock:
            self._catch_up()
            turn = self._stored(turn_id)
            if turn is None:
                raise InputError(f"turn_id={turn_id!r} is not stored in session {self.session_id!r}")
            for col in self._store.collections:
                self._store.call("delete a turn", col.delete, ids=[turn_id])
            self._store.bump(EPOCH, uuid.uuid4().hex)
            self._load()  # BM25 statistics and positions are rebuilt; deletions are rare
            return turn

    def clear(self, turn_ids: Iterable[str] | None = None) -> None:
        """Delete every turn of this session (other sessions are untouched), or those ``turn_ids`` names (ids not stored are skipped), with one reload."""
        self._check_open()
        with self._write_lock:
            named = None if turn_ids is None else check_turn_ids(turn_ids)
            for col in self._store.collections:
                self._store.delete(col, self._store.rows(col)["ids"] if named is None else named)
            self._store.bump(EPOCH, uuid.uuid4().hex)
            self._load()

    async def aadd(self, text: str, role: str = "user", **kwargs: Any) -> Turn:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, text, role, **kwargs)

    async def aadd_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Turn]:
        """:meth:`add_many` in a worker thread."""
        return await asyncio.to_thread(self.add_many, list(items))

    # -- reading ------------------------------------------------------------------------
    def turns(self) -> list[Turn]:
        """Every stored turn (this process's and other writers'), oldest first."""
        self._catch_up()
        with self._lock:
            return self._log.in_time_order()

    def __len__(self) -> int:
        self._catch_up()
        return len(self._log)

    def reconstruct(
        self,
        query: str,
        *,
        l_max: int | None = None,
        top_k: int | None = None,
        fusion: str | None = None,
        weights: Mapping[str, float] | None = None,
        recent_turns: int | None = None,
        keep_roles: Sequence[str] = (),
        skip_roles: Sequence[str] = (),
        skip_ids: Collection[str] = (),
        dates: bool | str | None = None,
        keep_recent: bool | str | None = None,
    ) -> MemoryContext:
        """Rebuild the minimal context for ``query`` (per-call overrides of MemoryConfig).

        ``l_max`` bounds the tokens of ``context.text`` (its rendered lines and separators). Turns
        whose role is in ``keep_roles`` (e.g. ``("system",)``) are kept after the most recent turns,
        oldest first, within ``l_max``; ``skip_roles`` are never chosen (the chat policy passes
        system turns through outside ``l_max``), nor the turns ``skip_ids`` names (the current
        exchange an adapter sends verbatim: the most recent turns kept are those before it)."""
        check_roles(keep_roles=keep_roles, skip_roles=skip_roles)
        t0, query = time.perf_counter(), check_query(query)
        warn_if_unreadable(f"the {query_label(query)} to session {self.session_id!r}", [query], self.embedders[0].name)
        cfg = self.config.replace(l_max=l_max, top_k=top_k, fusion=fusion, recent_turns=recent_turns, dates=dates, keep_recent=keep_recent)
        per_weights = signal_weights(weights if weights is not None else self.config.weights, tuple(e.name for e in self.embedders))
        self._catch_up()
        with self._lock:
            snap, bm25_all = self._log.snapshot(), self._log.bm25
            skipped = {p for t in skip_ids if (p := self._log.index.get(t)) is not None and p < snap.n}
            latest, scores = latest_turns(snap, cfg.recent_turns, skip_roles, skipped), bm25_all.get_scores(query)[: snap.n]
            kept_roles = [i for i in snap.chrono if i < snap.n and i not in skipped and snap.turns[i].role in keep_roles] if keep_roles else []
        found = candidates(
            query,
            cfg,
            snap,
            scores=scores,
            search=functools.partial(self._hits, query, cfg, snap),
            weights=per_weights,
            candidate_pool=self.candidate_pool,
            latest=latest,
            kept_roles=kept_roles,
            skipped=skipped,
            skip_roles=skip_roles,
        )
        sel = choose(query, snap, self.token_counter, found, self._partner(snap, skip_roles, skipped))
        return MemoryContext(
            query=query,
            turns=sel.turns,
            token_count=sel.tokens,
            l_max=found.cfg.l_max,
            fusion=found.cfg.fusion,
            dates=found.cfg.dates is True,
            **found.decided.reasons(),
            ms=(time.perf_counter() - t0) * 1000.0,
            build_trace=lambda: turn_traces(snap, sel, found.first, found.fused, found.bm25, found.dense),
        )

    def _hits(self, query: str, cfg: MemoryConfig, snap: Snapshot, exclude: set[int], pool: int) -> dict[str, list[list[tuple[int, float]]]]:
        """Each embedder's search of the turns outside ``exclude`` for the query and, with ``cfg``, a long query's sentences, before
        the anchor is decided: how near the query comes to a turn before it is one of its reasons (the first embedder's cosine)."""
        parts, _ = decide_parts(cfg.query_sentences, query)
        warn_if_unfitted(cfg, self.embedders[0].name)  # this call's keep_recent may apply the rule where the memory's config did not
        with self._lock:
            index = self._log.index
        out = {}
        for emb, col in zip(self.embedders, self._store.collections, strict=True):
            queries = np.asarray(emb.encode([query, *parts]), dtype=np.float32)
            search = functools.partial(self._store.call, "search turns", col.query)
            out[emb.name] = vector_hits(search, queries, index, snap.n, exclude, min(pool + len(exclude), snap.n))
        return out

    def _partner(self, snap: Snapshot, skip: Sequence[str], skipped: Collection[int]) -> Callable[[int], int | None]:
        """:meth:`Snapshot.partner` under the lock (other writers' turns land anywhere in time); None if ``skipped``."""

        def partner(i: int) -> int | None:
            with self._lock:
                j = snap.partner(i, skip)
            return None if j in skipped else j

        return partner

    async def areconstruct(self, query: str, **kwargs: Any) -> MemoryContext:
        """:meth:`reconstruct` in a worker thread."""
        return await asyncio.to_thread(self.reconstruct, query, **kwargs)
