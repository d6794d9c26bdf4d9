"""Momentary Contexts (Jeong, 2024): verbatim chat memory in Chroma, rebuilt per query.

Every turn is stored verbatim in Chroma. For each new query the context is
rebuilt: the most recent turn(s) always, plus the top-K past turns by hybrid
BM25 + vector score (min-max weighted sum or weighted RRF), cut to ``l_max``
tokens by priority (recent first, then relevance), then sorted chronologically.

Layout: one Chroma collection per (session, embedder). A ``where`` filter on a
shared collection costs ~38 ms for a 1% session of 100k turns (and ~200 ms for
a 50% one) against ~2 ms unfiltered, so sessions get their own collections;
isolation then holds by construction, and each collection also records its
``session_id`` so a mismatched collection is refused on open.

Chroma is the single source of truth. BM25 statistics and the turn list are
rebuilt from it when a memory is opened, then kept in memory and updated per
turn. One writer process per session is assumed; threads are safe.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from meve.config import MemoryConfig, validate_weights
from meve.errors import ConfigError, InputError, StoreError
from meve.fusion import rrf, weighted_sum
from meve.lexical import IncrementalBM25
from meve.models import Embedder, default_embedder, embedder_dimension
from meve.records import check_query
from meve.store import check_metadata, chroma_client
from meve.tokens import TokenCounter, count_many, get_token_counter

ROLES = ("user", "assistant", "system", "tool")
_RESERVED = ("session_id", "role", "seq", "timestamp", "ts", "turn_id")
TRUNCATION_MARKER = " […truncated by meve: {kept} of {total} tokens kept]"


@dataclass(frozen=True)
class Turn:
    """One stored chat turn, verbatim."""

    id: str
    role: str
    text: str
    timestamp: datetime
    seq: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role, "text": self.text, "timestamp": self.timestamp.isoformat(), "seq": self.seq, "metadata": dict(self.metadata)}


@dataclass(frozen=True)
class TurnTrace:
    """Why a turn is, or is not, in the rebuilt context."""

    id: str
    seq: int
    bm25: float | None
    dense: Mapping[str, float]
    fused: float | None
    included: bool
    reason: str
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "seq": self.seq,
            "bm25": self.bm25,
            "dense": dict(self.dense),
            "fused": self.fused,
            "included": self.included,
            "reason": self.reason,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class MemoryContext:
    """The rebuilt context: turns in chronological order, within ``l_max`` tokens."""

    query: str
    turns: tuple[Turn, ...]
    token_count: int
    trace: tuple[TurnTrace, ...]
    l_max: int
    fusion: str
    ms: float = 0.0

    @property
    def text(self) -> str:
        return "\n".join(f"{t.role}: {t.text}" for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "turns": [t.to_dict() for t in self.turns],
            "token_count": self.token_count,
            "l_max": self.l_max,
            "fusion": self.fusion,
            "ms": round(self.ms, 3),
            "trace": [t.to_dict() for t in self.trace],
        }


def validate_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 256 or any(ord(ch) < 32 for ch in session_id):
        raise InputError(f"session_id={session_id!r} is not allowed: expected a non-empty str of at most 256 printable characters")
    return session_id


def list_sessions(client: Any) -> list[str]:
    """Session ids that have a memory in this Chroma client (read from collection metadata; no model loads)."""
    found = set()
    for col in client.list_collections():
        sid = (getattr(col, "metadata", None) or {}).get("meve:session_id")
        if sid is not None:
            found.add(str(sid))
    return sorted(found)


def _slug(text: str, n: int = 24) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-")[:n] or "x"


def _parse_timestamp(value: Any) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InputError(f"timestamp={value!r} is not ISO-8601 (e.g. '2024-05-01T12:00:00+00:00')") from exc
    if not isinstance(value, datetime):
        raise InputError(f"timestamp={value!r} must be a timezone-aware datetime or an ISO-8601 string")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InputError(f"timestamp={value.isoformat()!r} has no timezone; give an aware datetime (e.g. tzinfo=timezone.utc)")
    return value


def _ranked(scores: Mapping[int, float]) -> list[int]:
    return sorted(scores, key=lambda i: (-scores[i], i))


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MomentaryMemory:
    """Chat memory that stores every turn verbatim and rebuilds a minimal context per query.

    Complexity (N turns in the session, E embedders, P candidate pool):
    ``add`` is O(E · embed(turn) + E · Chroma insert + tokens(turn)): the BM25
    statistics are updated in place, never rebuilt. ``reconstruct`` is
    O(E · ANN search + postings of the query terms + P log P); nothing scans
    all N turns' text.
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
        candidate_pool: int = 64,
        create: bool = True,
    ) -> None:
        """``create=False`` opens an existing session only (read-only callers): an unknown
        session raises :class:`StoreError` naming the sessions that exist, and nothing is created."""
        self.session_id = validate_session_id(session_id)
        if path is not None and client is not None:
            raise InputError("give either path= or client=, not both")
        self.client = client if client is not None else chroma_client(path, create=create)
        self.config = config if config is not None else MemoryConfig()
        if not isinstance(self.config, MemoryConfig):
            raise InputError(f"config must be a MemoryConfig, got {type(self.config).__name__}")
        self.embedders: tuple[Embedder, ...] = tuple(embedders) if embedders else (default_embedder(),)
        names = [e.name for e in self.embedders]
        if len(set(names)) != len(names):
            raise InputError(f"embedders must have distinct names, got {names}")
        validate_weights(self.config.weights, tuple(names))
        self.token_counter: TokenCounter = get_token_counter(token_counter)
        self.clock = clock if clock is not None else _utcnow
        self.candidate_pool = candidate_pool
        self._lock = threading.RLock()
        digest = hashlib.sha1(self.session_id.encode()).hexdigest()[:16]
        self._collections = []
        for emb in self.embedders:
            name = f"{collection_prefix}-{digest}-{_slug(emb.name)}"
            if not create and name not in {c.name for c in self.client.list_collections()}:
                known = list_sessions(self.client)
                where = f" in {path!r}" if path is not None else ""
                raise StoreError(
                    f"no session {self.session_id!r}{where} (embedder {emb.name!r}); sessions there: {', '.join(repr(k) for k in known) if known else 'none'}"
                )
            col = self.client.get_or_create_collection(
                name, metadata={"hnsw:space": "cosine", "meve:session_id": self.session_id, "meve:embedder": emb.name}, embedding_function=None
            )
            stored = (col.metadata or {}).get("meve:session_id")
            if stored != self.session_id:
                raise StoreError(f"collection {name!r} belongs to session {stored!r}, not {self.session_id!r}")
            self._collections.append(col)
        self._dims: list[int] | None = None  # measured at the first write, so reading a memory loads no model
        self._load()

    # -- state -------------------------------------------------------------------------
    def _load(self) -> None:
        """Rebuild turns and BM25 from Chroma; repair secondary collections after a crash."""
        primary = self._collections[0]
        rows = primary.get(include=["documents", "metadatas"])
        turns = [self._turn(pid, doc, meta) for pid, doc, meta in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)]
        turns.sort(key=lambda t: t.seq)
        self._turns: list[Turn] = turns
        self._index: dict[str, int] = {t.id: i for i, t in enumerate(turns)}
        self._bm25 = IncrementalBM25([t.text for t in turns])
        self._tokens: list[int] = count_many(self.token_counter, [t.text for t in turns]) if turns else []
        for emb, col in zip(self.embedders[1:], self._collections[1:], strict=True):
            have = set(col.get(include=[])["ids"])
            orphans = list(have - set(self._index))
            if orphans:  # written before the primary during a crash: never acknowledged
                col.delete(ids=orphans)
            missing = [t for t in turns if t.id not in have]
            if missing:
                self._write(col, missing, emb.encode([t.text for t in missing]))

    def _turn(self, pid: str, doc: str | None, meta: Mapping[str, Any] | None) -> Turn:
        meta = dict(meta or {})
        if meta.get("session_id") != self.session_id:
            raise StoreError(f"turn {pid!r} belongs to session {meta.get('session_id')!r}, not {self.session_id!r}")
        user = {k[2:]: v for k, v in meta.items() if k.startswith("m:")}
        return Turn(
            id=pid, role=str(meta["role"]), text=doc or "", timestamp=datetime.fromisoformat(str(meta["timestamp"])), seq=int(meta["seq"]), metadata=user
        )

    def _write(self, col: Any, turns: Sequence[Turn], vecs: np.ndarray) -> None:
        metas = []
        for t in turns:
            meta: dict[str, Any] = {
                "session_id": self.session_id,
                "role": t.role,
                "seq": t.seq,
                "timestamp": t.timestamp.isoformat(),
                "ts": t.timestamp.timestamp(),
            }
            meta.update({f"m:{k}": v for k, v in t.metadata.items()})
            metas.append(meta)
        step = 1000
        for i in range(0, len(turns), step):
            col.add(
                ids=[t.id for t in turns[i : i + step]],
                documents=[t.text for t in turns[i : i + step]],
                metadatas=metas[i : i + step],
                embeddings=np.asarray(vecs[i : i + step], dtype=np.float32),
            )

    # -- writing -------------------------------------------------------------------------
    def _prepare(self, text: Any, role: Any, turn_id: Any, timestamp: Any, metadata: Any, last: datetime | None, seq: int) -> Turn:
        if not isinstance(text, str):
            raise InputError(f"text must be a str, got {type(text).__name__}: {text!r}"[:200])
        if not text.strip():
            raise InputError("text is empty or whitespace; a turn must say something")
        if len(text) > self.config.max_turn_chars:
            raise InputError(f"text has {len(text)} characters, more than max_turn_chars={self.config.max_turn_chars}")
        if role not in ROLES:
            raise InputError(f"role={role!r} is not allowed: expected one of {', '.join(ROLES)}")
        if turn_id is not None and (not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256):
            raise InputError(f"turn_id={turn_id!r} must be a non-empty str of at most 256 characters")
        ts = self.clock() if timestamp is None else _parse_timestamp(timestamp)
        if ts.tzinfo is None:
            raise InputError(f"the clock returned a naive datetime {ts!r}; it must be timezone-aware")
        if last is not None and ts < last:
            raise InputError(
                f"timestamp {ts.isoformat()} is earlier than the latest turn ({last.isoformat()}); "
                "turns must be added in time order (equal timestamps are ordered by arrival)"
            )
        meta = check_metadata(metadata, "metadata") or {}
        bad = [k for k in meta if k in _RESERVED]
        if bad:
            raise InputError(f"metadata key {bad[0]!r} is reserved; reserved keys: {', '.join(_RESERVED)}")
        tid = turn_id if turn_id is not None else f"{self.session_id[:32]}-{seq}-{hashlib.sha1(f'{seq}{time.time_ns()}{text[:64]}'.encode()).hexdigest()[:8]}"
        return Turn(id=tid, role=role, text=text, timestamp=ts, seq=seq, metadata=meta)

    def add(self, text: str, role: str = "user", *, turn_id: str | None = None, timestamp: Any = None, metadata: Mapping[str, Any] | None = None) -> Turn:
        """Store one turn verbatim. An existing ``turn_id`` returns the stored turn unchanged (idempotent)."""
        return self.add_many([{"text": text, "role": role, "turn_id": turn_id, "timestamp": timestamp, "metadata": metadata}])[0]

    def add_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Turn]:
        """Store several turns in one batch (one embedding pass per embedder).

        Each item is a text (role "user") or a dict with ``text`` and optional
        ``role``, ``turn_id``, ``timestamp``, ``metadata``.
        """
        items = list(items)
        with self._lock:
            result: list[Turn | None] = []
            fresh: list[Turn] = []
            ids_in_batch: dict[str, Turn] = {}
            last = self._turns[-1].timestamp if self._turns else None
            seq = (self._turns[-1].seq + 1) if self._turns else 0
            for i, item in enumerate(items):
                spec = {"text": item} if isinstance(item, str) else item
                if not isinstance(spec, Mapping):
                    raise InputError(f"items[{i}] is {type(item).__name__}; expected a str or a dict with 'text'")
                unknown = set(spec) - {"text", "role", "turn_id", "timestamp", "metadata"}
                if unknown:
                    raise InputError(f"items[{i}] has unknown keys {sorted(unknown)}; allowed: text, role, turn_id, timestamp, metadata")
                tid = spec.get("turn_id")
                if tid is not None and (tid in self._index or tid in ids_in_batch):
                    existing = self._turns[self._index[tid]] if tid in self._index else ids_in_batch[tid]
                    given = (spec.get("text"), spec.get("role", "user"))
                    if given != (existing.text, existing.role):
                        raise InputError(
                            f"turn_id={tid!r} is already stored as {existing.role}: {existing.text[:60]!r}, and items[{i}] gives "
                            f"{given[1]}: {str(given[0])[:60]!r}; stored turns are never overwritten, so give the new turn its own turn_id"
                        )
                    result.append(existing)
                    continue
                turn = self._prepare(spec.get("text"), spec.get("role", "user"), tid, spec.get("timestamp"), spec.get("metadata"), last, seq)
                last, seq = turn.timestamp, seq + 1
                ids_in_batch[turn.id] = turn
                fresh.append(turn)
                result.append(turn)
            if fresh:
                texts = [t.text for t in fresh]
                vecs = [np.asarray(e.encode(texts), dtype=np.float32) for e in self.embedders]
                if self._dims is None:
                    self._dims = [embedder_dimension(e) for e in self.embedders]
                for v, dim, e in zip(vecs, self._dims, self.embedders, strict=True):
                    if v.shape[1] != dim:
                        raise StoreError(f"embedder {e.name!r} returned dimension {v.shape[1]}, expected {dim}")
                # Primary last would lose acknowledged turns on a crash between writes; primary first, repaired on open.
                for col, v in zip(self._collections, vecs, strict=True):
                    self._write(col, fresh, v)
                for turn in fresh:
                    self._index[turn.id] = len(self._turns)
                    self._turns.append(turn)
                self._bm25.add(texts)
                self._tokens.extend(count_many(self.token_counter, texts))
            return [t for t in result if t is not None]

    async def aadd(self, text: str, role: str = "user", **kwargs: Any) -> Turn:
        return await asyncio.to_thread(self.add, text, role, **kwargs)

    async def aadd_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Turn]:
        return await asyncio.to_thread(self.add_many, list(items))

    def turns(self) -> list[Turn]:
        """Every stored turn, oldest first."""
        with self._lock:
            return list(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def clear(self) -> None:
        """Delete every turn of this session (other sessions are untouched)."""
        with self._lock:
            for col in self._collections:
                ids = col.get(include=[])["ids"]
                for i in range(0, len(ids), 1000):
                    col.delete(ids=ids[i : i + 1000])
            self._load()

    # -- reading -------------------------------------------------------------------------
    def _weights(self, weights: Mapping[str, float] | None) -> dict[str, float]:
        names = tuple(e.name for e in self.embedders)
        raw = validate_weights(weights if weights is not None else self.config.weights, names)
        per: dict[str, float] = {"bm25": raw.get("bm25", 0.0)}
        shared = raw.get("dense", 0.0) / len(names)
        for n in names:
            per[f"dense:{n}"] = raw.get(n, shared)
        if not sum(per.values()) > 0:
            raise ConfigError("weights", dict(weights or self.config.weights), "at least one positive weight")
        return per

    def reconstruct(
        self,
        query: str,
        *,
        l_max: int | None = None,
        top_k: int | None = None,
        fusion: str | None = None,
        weights: Mapping[str, float] | None = None,
        recent_turns: int | None = None,
    ) -> MemoryContext:
        """Rebuild the minimal context for ``query`` (per-call overrides of MemoryConfig)."""
        t0 = time.perf_counter()
        query = check_query(query)
        cfg = self.config.replace(l_max=l_max, top_k=top_k, fusion=fusion, recent_turns=recent_turns)
        per_weights = self._weights(weights)
        with self._lock:
            # Lists only grow (clear() swaps in new ones), so the first n entries are a stable snapshot.
            turns = self._turns
            tokens = self._tokens
            n = len(turns)
            n_recent = min(cfg.recent_turns, n)
            recent_idx = list(range(n - n_recent, n))
            past_n = n - n_recent
            bm25: dict[int, float] = {}
            dense: dict[str, dict[int, float]] = {e.name: {} for e in self.embedders}
            if past_n > 0 and cfg.top_k > 0:
                pool = max(self.candidate_pool, 4 * cfg.top_k)
                scores = self._bm25.get_scores(query)[:past_n]
                if scores.size:
                    k = min(pool, scores.size)
                    top = np.argpartition(-scores, k - 1)[:k]
                    bm25 = {int(i): float(scores[i]) for i in top if scores[i] > 0}
                for emb, col in zip(self.embedders, self._collections, strict=True):
                    qv = np.asarray(emb.encode([query])[0], dtype=np.float32)
                    res = col.query(query_embeddings=[qv], n_results=min(pool + n_recent, n), include=["distances"])
                    for pid, dist in zip(res["ids"][0], res["distances"][0], strict=True):
                        i = self._index.get(pid)
                        if i is not None and i < past_n:
                            dense[emb.name][i] = 1.0 - float(dist)
            signals: dict[str, dict[int, float]] = {"bm25": bm25, **{f"dense:{name}": s for name, s in dense.items()}}
            if cfg.fusion == "weighted":
                fused = weighted_sum(signals, per_weights)
            else:
                rankings = {name: _ranked(s) for name, s in signals.items()}
                fused = rrf(rankings, per_weights, k=cfg.rrf_k)
            ranked = sorted(fused, key=lambda i: (-fused[i], -i))
            chosen_rel = ranked[: cfg.top_k]

        # Fill by priority: recent (newest first), then relevance; then sort by time.
        budget = cfg.l_max
        picked: dict[int, Turn] = {}
        traces: dict[int, TurnTrace] = {}

        def trace(i: int, included: bool, reason: str, used: int) -> None:
            traces[i] = TurnTrace(
                id=turns[i].id,
                seq=turns[i].seq,
                bm25=bm25.get(i),
                dense={k: v[i] for k, v in dense.items() if i in v},
                fused=fused.get(i),
                included=included,
                reason=reason,
                tokens=used,
            )

        for i in reversed(recent_idx):
            need = tokens[i]
            if need <= budget:
                picked[i] = turns[i]
                budget -= need
                trace(i, True, "most recent turn (always kept)", need)
                continue
            cut = self._truncate(turns[i].text, need, budget)
            if cut is None:
                trace(i, False, f"recent turn of {need} tokens; only {budget} left and too little for a truncated copy", 0)
                continue
            text, used = cut
            picked[i] = Turn(turns[i].id, turns[i].role, text, turns[i].timestamp, turns[i].seq, {**turns[i].metadata, "meve_truncated": True})
            budget -= used
            trace(i, True, f"most recent turn, truncated to {used} of {need} tokens to fit l_max {cfg.l_max}", used)
        for rank, i in enumerate(chosen_rel, start=1):
            need = tokens[i]
            if need <= budget:
                picked[i] = turns[i]
                budget -= need
                trace(i, True, f"relevance rank {rank} of top_k {cfg.top_k}", need)
            else:
                trace(i, False, f"relevance rank {rank}: needs {need} tokens, {budget} left of l_max {cfg.l_max}", 0)
        for rank, i in enumerate(ranked[cfg.top_k :], start=cfg.top_k + 1):
            trace(i, False, f"relevance rank {rank} is outside top_k {cfg.top_k}", 0)
        order = sorted(picked, key=lambda i: (turns[i].timestamp, turns[i].seq))
        chosen_turns = tuple(picked[i] for i in order)
        used_total = cfg.l_max - budget
        ordered_trace = tuple(traces[i] for i in sorted(traces, key=lambda i: (i not in picked, -(fused.get(i) or 0.0) if i not in recent_idx else -1e9, i)))
        return MemoryContext(
            query=query,
            turns=chosen_turns,
            token_count=used_total,
            trace=ordered_trace,
            l_max=cfg.l_max,
            fusion=cfg.fusion,
            ms=(time.perf_counter() - t0) * 1000.0,
        )

    def _truncate(self, text: str, need: int, budget: int) -> tuple[str, int] | None:
        marker = TRUNCATION_MARKER.format(kept=0, total=need)
        room = budget - self.token_counter.count(marker) - 2
        if room < 1:
            return None
        head = self.token_counter.truncate(text, room)
        kept = self.token_counter.count(head)
        out = head + TRUNCATION_MARKER.format(kept=kept, total=need)
        used = self.token_counter.count(out)
        while used > budget and head:
            head = head[: max(0, len(head) - max(1, len(head) // 20))]
            kept = self.token_counter.count(head)
            out = head + TRUNCATION_MARKER.format(kept=kept, total=need)
            used = self.token_counter.count(out)
        return (out, used) if used <= budget else None

    async def areconstruct(self, query: str, **kwargs: Any) -> MemoryContext:
        return await asyncio.to_thread(self.reconstruct, query, **kwargs)
