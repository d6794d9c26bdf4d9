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
turn. Several processes may write one session through one Chroma server: turns
are ordered by (timestamp, a key unique across processes), and before each read
a handle learns what other writers added since it last looked. Each writing
handle keeps one row in a small per-session "heads" collection: how many turns it
has written, bumped after every acknowledged batch (deletions bump an epoch row).
A read fetches those few rows; when they equal what the handle last reconciled,
nothing is new, so the common check costs a lookup of a handful of rows instead of
counting every turn (count() grows with the session: ~6 ms at 100k turns). Threads
are safe, and no lock is held across a model or network call.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import hashlib
import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from meve.budget import Ledger, shrink_to_fit
from meve.config import MemoryConfig, validate_weights
from meve.errors import ConfigError, InputError, StoreError
from meve.fusion import rrf, weighted_sum
from meve.lexical import IncrementalBM25, stemmed_tokenize
from meve.models import Embedder, default_embedder, embedder_dimension
from meve.records import check_metadata, check_query, check_text
from meve.store import acquire_client, chroma_call, chroma_client, release_client, warn_if_untimed
from meve.tokens import TokenCounter, count_many, get_token_counter

log = logging.getLogger("meve")

ROLES = ("user", "assistant", "system", "tool")
_RESERVED = ("session_id", "role", "seq", "okey", "timestamp", "ts", "turn_id")
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
    l_max: int
    fusion: str
    ms: float = 0.0
    dates: bool = False
    build_trace: Callable[[], tuple[TurnTrace, ...]] = field(default=tuple, repr=False, compare=False)

    @functools.cached_property
    def trace(self) -> tuple[TurnTrace, ...]:
        """Every candidate turn with its scores and the reason it is in or out, the kept ones first.

        Built on first access: a reply that never reads it does not pay for a record per candidate
        (~3 ms for the 400 candidates of a 100k-turn session)."""
        return self.build_trace()

    @property
    def text(self) -> str:
        """What the budget counts: one ``role: text`` line per turn, ``[YYYY-MM-DD] role: text`` with
        ``dates`` (``token_count`` is this text's tokens)."""
        return render(self.turns, dates=self.dates)

    def content_of(self, turn: Turn) -> str:
        """A chosen turn's text as a chat message should carry it (dated when ``dates``)."""
        return content(turn, dates=self.dates)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "turns": [t.to_dict() for t in self.turns],
            "token_count": self.token_count,
            "l_max": self.l_max,
            "fusion": self.fusion,
            "dates": self.dates,
            "ms": round(self.ms, 3),
            "trace": [t.to_dict() for t in self.trace],
        }


SEPARATOR = "\n"


def date_prefix(turn: Turn) -> str:
    """The date a line carries with ``dates``: the turn's UTC calendar day."""
    return f"[{turn.timestamp.astimezone(timezone.utc):%Y-%m-%d}]"


def content(turn: Turn, *, dates: bool = False) -> str:
    """A turn's text as a chat message carries it: with ``dates``, prefixed by its date."""
    return f"{date_prefix(turn)} {turn.text}" if dates else turn.text


def render_turn(turn: Turn, *, dates: bool = False) -> str:
    return f"{date_prefix(turn)} {turn.role}: {turn.text}" if dates else f"{turn.role}: {turn.text}"


def render(turns: Iterable[Turn], *, dates: bool = False) -> str:
    """The one rendering of a rebuilt context; l_max is counted on exactly this text. Adapters that
    pass turns as chat messages send only the texts, which is never more."""
    return SEPARATOR.join(render_turn(t, dates=dates) for t in turns)


def validate_session_id(session_id: Any) -> str:
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 256 or any(ord(ch) < 32 for ch in session_id):
        raise InputError(f"session_id={session_id!r} is not allowed: expected a non-empty str of at most 256 printable characters")
    return session_id


def _describe(client: Any) -> str:
    """Where a Chroma client stores data, for error messages: the server address, or the directory."""
    try:
        settings = client.get_settings()
    except Exception:
        return "the given Chroma client"
    if getattr(settings, "chroma_server_host", None):
        return f"the Chroma server at {settings.chroma_server_host}:{settings.chroma_server_http_port}"
    if getattr(settings, "is_persistent", False):
        return repr(settings.persist_directory)
    return "an in-memory Chroma"


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


_PAGE = 1000  # rows per Chroma read or write: SQLite refuses statements with 32,767+ variables
_PROCESS = uuid.uuid4().hex[:12]
_counter = itertools.count()
_EPOCH = "epoch"  # the heads row that deletions bump; every other heads row belongs to one writing handle


def _new_order_key(ts: datetime) -> str:
    """A time-ordered key unique across processes: nanoseconds, this process's id, a per-process
    counter. Equal timestamps keep their arrival order within a process; across processes they
    are ordered by process id, the same way for every reader."""
    ns = int(ts.timestamp() * 1_000_000_000)
    return f"{ns:020d}-{_PROCESS}-{next(_counter):012d}"


def _time_order(row: tuple[Turn, str]) -> tuple[float, str]:
    """Sort key of a (turn, order key) row: the same key ``_keys`` holds."""
    return row[0].timestamp.timestamp(), row[1]


def _legacy_key(turn: Turn) -> str:
    # Turns stored before order keys existed: their per-process seq was the order.
    return f"{int(turn.timestamp.timestamp() * 1_000_000_000):020d}-legacy-{turn.seq:012d}"


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
        candidate_pool: int = 256,
        create: bool = True,
    ) -> None:
        """``create=False`` opens an existing session only (read-only callers): an unknown
        session raises :class:`StoreError` naming the sessions that exist, and nothing is created."""
        self.session_id = validate_session_id(session_id)
        if path is not None and client is not None:
            raise InputError("give either path= or client=, not both")
        # A path is meve's to open and to release on close(); a client given is the caller's.
        self._owned_path = path
        self._closed = False
        self.client = client if client is not None else (acquire_client(path, create=create) if path is not None else chroma_client())
        warn_if_untimed(self.client)
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
        self._lock = threading.RLock()  # in-memory state only: never held across model or network calls
        self._write_lock = threading.Lock()  # one batch at a time from this handle
        self._where = repr(path) if path is not None else _describe(self.client)
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
        self._heads = self._open_heads(f"{collection_prefix}-{digest}.heads", create)
        self._writer = f"w-{uuid.uuid4().hex}"  # this handle's heads row
        self._written = 0  # turns this handle has written: its heads row's value, strictly increasing
        self._dims: list[int] | None = None  # measured at the first write, so reading a memory loads no model
        self._reset_state()
        self._load()

    # -- state -------------------------------------------------------------------------
    # Positions index everything held in memory (turns, BM25 documents, token counts) in the order
    # this handle learned of the turns; ``_chrono`` lists the positions in time order. Turns that
    # other processes write arrive later but may be older, so the two orders differ.
    def _open_heads(self, name: str, create: bool) -> Any:
        """The session's heads collection; None for a read-only open of a session written before it
        existed, which then falls back to one ``count()`` per read."""
        if not create and name not in {c.name for c in self.client.list_collections()}:
            return None
        col = self._call(
            "open the heads collection", self.client.get_or_create_collection, name, metadata={"meve:heads_of": self.session_id}, embedding_function=None
        )
        stored = (col.metadata or {}).get("meve:heads_of")
        if stored != self.session_id:
            raise StoreError(f"collection {name!r} belongs to session {stored!r}, not {self.session_id!r}")
        return col

    def _head(self) -> dict[str, Any] | None:
        """Every heads row (writer or epoch id -> value), or None without a heads collection."""
        if self._heads is None:
            return None
        rows = self._rows(self._heads, include=("metadatas",))
        return {pid: (meta or {}).get("v") for pid, meta in zip(rows["ids"], rows["metadatas"], strict=True)}

    def _bump(self, row: str, value: Any) -> None:
        if self._heads is not None:
            self._call("record a write", self._heads.upsert, ids=[row], embeddings=[[1.0]], metadatas=[{"v": value}])

    def _reset_state(self) -> None:
        self._turns: list[Turn] = []
        self._index: dict[str, int] = {}
        self._tokens: list[int] = []
        self._keys: list[tuple[float, str]] = []
        self._chrono: list[int] = []  # positions sorted by self._keys
        self._bm25 = IncrementalBM25(tokenize=stemmed_tokenize if self.config.stemming else None)
        self._latest: datetime | None = None
        self._seen: dict[str, Any] | None = None  # the heads rows as of the last reconciliation with storage
        self._min_tokens = 0  # the fewest tokens any stored turn renders to: below it, nothing more fits

    def _append(self, rows: Sequence[tuple[Turn, str]]) -> None:
        """Add turns (with their order keys) to the in-memory state; caller holds ``_lock``."""
        if not rows:
            return
        texts = [t.text for t, _ in rows]
        rendered = count_many(self.token_counter, [render_turn(t) for t, _ in rows])
        self._min_tokens = min(rendered) if not self._turns else min(self._min_tokens, *rendered)
        for (turn, okey), used in zip(rows, rendered, strict=True):
            pos = len(self._turns)
            key = (turn.timestamp.timestamp(), okey)
            self._turns.append(turn)
            self._index[turn.id] = pos
            self._tokens.append(used)
            self._keys.append(key)
            self._chrono.insert(bisect.bisect(self._chrono, key, key=self._keys.__getitem__), pos)
            if self._latest is None or turn.timestamp > self._latest:
                self._latest = turn.timestamp
        self._bm25.add(texts)

    def _rows(self, col: Any, *, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None, include: Sequence[str] = ()) -> dict[str, list[Any]]:
        """Every matching row, read in pages: one unpaginated get() of 32,767+ rows fails in Chroma's SQLite."""
        out: dict[str, list[Any]] = {"ids": [], **{k: [] for k in include}}
        if ids is not None:
            for start in range(0, len(ids), _PAGE):
                res = self._call("read turns", col.get, ids=list(ids[start : start + _PAGE]), include=list(include))
                for key in out:
                    out[key].extend(res[key] or [])
            return out
        offset = 0
        while True:
            res = self._call("read turns", col.get, where=where, include=list(include), limit=_PAGE, offset=offset)
            for key in out:
                out[key].extend(res[key] or [])
            if len(res["ids"]) < _PAGE:
                return out
            offset += len(res["ids"])

    def _load(self) -> None:
        """Rebuild turns and BM25 from Chroma; repair secondary collections after a crash."""
        primary = self._collections[0]
        head = self._head()  # read before the turns: whatever lands after it is learned at the next read
        rows = self._rows(primary, include=("documents", "metadatas"))
        loaded = [self._turn(pid, doc, meta) for pid, doc, meta in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)]
        loaded.sort(key=_time_order)
        with self._lock:
            self._reset_state()
            self._append(loaded)
            self._seen = head
            turns = list(self._turns)
        for emb, col in zip(self.embedders[1:], self._collections[1:], strict=True):
            have = set(self._rows(col)["ids"])
            known = {t.id for t in turns}
            orphans = list(have - known)
            for start in range(0, len(orphans), _PAGE):  # written before the primary during a crash: never acknowledged
                self._call("repair a secondary collection", col.delete, ids=orphans[start : start + _PAGE])
            missing = [t for t in turns if t.id not in have]
            if missing:
                self._write(col, missing, [self._order_key(t) for t in missing], emb.encode([t.text for t in missing]))

    def _order_key(self, turn: Turn) -> str:
        with self._lock:
            pos = self._index.get(turn.id)
            return self._keys[pos][1] if pos is not None else _legacy_key(turn)

    def warm_up(self) -> MomentaryMemory:
        """Load the embedders' models now, so the first turn or query pays no load time."""
        for emb in self.embedders:
            emb.encode(["warm up"])
        return self

    def close(self) -> None:
        """Release what this handle opened: the embedded Chroma instance of ``path=`` (its files,
        caches and threads) once no other meve handle in the process uses that directory. Stored
        turns stay on disk. Idempotent; any later call on this handle raises StoreError."""
        with self._write_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned_path is not None:
                release_client(self._owned_path)

    def __enter__(self) -> MomentaryMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"session {self.session_id!r} on {self._where}: this MomentaryMemory was closed; open a new one")

    def _catch_up(self) -> int:
        """Learn the turns other processes wrote to this session since this handle last looked.

        When the heads rows equal those last reconciled, nothing is new (one small read). Otherwise
        one ``count()``; then the turns from the last known timestamp (less the accepted clock skew)
        onwards, and a full id scan only when that window cannot account for the difference. A
        changed epoch (another handle deleted turns) reloads. Returns how many turns were learned.
        """
        self._check_open()
        head = self._head()
        with self._lock:
            seen = self._seen
        if head is not None and head == seen:
            return 0
        if head is not None and seen is not None and head.get(_EPOCH) != seen.get(_EPOCH):
            self._load()
            return 0
        primary = self._collections[0]
        stored = int(self._call("count turns", primary.count))
        with self._lock:
            known = len(self._turns)
            latest = self._latest
        if stored < known:  # another process deleted turns: rebuild from storage
            self._load()
            return 0
        new: list[tuple[str, Any, Any]] = []
        if stored > known:
            where = {"ts": {"$gte": latest.timestamp() - self.config.max_clock_skew_s}} if latest is not None else None
            rows = self._rows(primary, where=where, include=("documents", "metadatas"))
            with self._lock:
                new = [(pid, doc, meta) for pid, doc, meta in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True) if pid not in self._index]
            if known + len(new) < stored:  # a writer's clock is further behind than the window: scan ids
                every = self._rows(primary)["ids"]
                with self._lock:
                    seen_ids = {pid for pid, _, _ in new}
                    missing = [pid for pid in every if pid not in self._index and pid not in seen_ids]
                extra = self._rows(primary, ids=missing, include=("documents", "metadatas"))
                new += list(zip(extra["ids"], extra["documents"], extra["metadatas"], strict=True))
        fresh = sorted((self._turn(pid, doc, meta) for pid, doc, meta in new), key=_time_order)
        with self._lock:
            fresh = [tk for tk in fresh if tk[0].id not in self._index]
            self._append(fresh)
            if head is not None:
                self._seen = head
        return len(fresh)

    def _call(self, what: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return chroma_call(f"{what} for session {self.session_id!r} at {self._where}", fn, *args, **kwargs)

    def _stored(self, turn_id: str) -> Turn | None:
        with self._lock:
            pos = self._index.get(turn_id)
            return self._turns[pos] if pos is not None else None

    def _turn(self, pid: str, doc: str | None, meta: Mapping[str, Any] | None) -> tuple[Turn, str]:
        meta = dict(meta or {})
        if meta.get("session_id") != self.session_id:
            raise StoreError(f"turn {pid!r} belongs to session {meta.get('session_id')!r}, not {self.session_id!r}")
        user = {k[2:]: v for k, v in meta.items() if k.startswith("m:")}
        turn = Turn(
            id=pid, role=str(meta["role"]), text=doc or "", timestamp=datetime.fromisoformat(str(meta["timestamp"])), seq=int(meta["seq"]), metadata=user
        )
        return turn, str(meta.get("okey") or _legacy_key(turn))

    def _write(self, col: Any, turns: Sequence[Turn], okeys: Sequence[str], vecs: np.ndarray) -> None:
        metas = []
        for t, okey in zip(turns, okeys, strict=True):
            meta: dict[str, Any] = {
                "session_id": self.session_id,
                "role": t.role,
                "seq": t.seq,
                "okey": okey,
                "timestamp": t.timestamp.isoformat(),
                "ts": t.timestamp.timestamp(),
            }
            meta.update({f"m:{k}": v for k, v in t.metadata.items()})
            metas.append(meta)
        for i in range(0, len(turns), _PAGE):
            self._call(
                "store turns",
                col.add,
                ids=[t.id for t in turns[i : i + _PAGE]],
                documents=[t.text for t in turns[i : i + _PAGE]],
                metadatas=metas[i : i + _PAGE],
                embeddings=np.asarray(vecs[i : i + _PAGE], dtype=np.float32),
            )

    # -- writing -------------------------------------------------------------------------
    def _prepare(self, text: Any, role: Any, turn_id: Any, timestamp: Any, metadata: Any, last: datetime | None, seq: int) -> Turn:
        if not isinstance(text, str):
            raise InputError(f"text must be a str, got {type(text).__name__}: {text!r}"[:200])
        if not text.strip():
            raise InputError("text is empty or whitespace; a turn must say something")
        if len(text) > self.config.max_turn_chars:
            raise InputError(f"text has {len(text)} characters, more than max_turn_chars={self.config.max_turn_chars}")
        check_text(text, "text")
        if role not in ROLES:
            raise InputError(f"role={role!r} is not allowed: expected one of {', '.join(ROLES)}")
        if turn_id is not None and (not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256):
            raise InputError(f"turn_id={turn_id!r} must be a non-empty str of at most 256 characters")
        if turn_id is not None:
            check_text(turn_id, "turn_id")
        now = self.clock()
        if now.tzinfo is None:
            raise InputError(f"the clock returned a naive datetime {now!r}; it must be timezone-aware")
        ts = now if timestamp is None else _parse_timestamp(timestamp)
        if (ts - now).total_seconds() > self.config.max_clock_skew_s:
            raise InputError(
                f"timestamp {ts.isoformat()} is more than max_clock_skew_s={self.config.max_clock_skew_s} s ahead of the clock ({now.isoformat()}); "
                "a turn from the future would make every later turn look out of order"
            )
        if last is not None and ts < last:
            raise InputError(
                f"timestamp {ts.isoformat()} is earlier than the latest turn ({last.isoformat()}); "
                "turns must be added in time order (equal timestamps are ordered by arrival)"
            )
        meta = check_metadata(metadata, "metadata") or {}
        bad = [k for k in meta if k in _RESERVED]
        if bad:
            raise InputError(f"metadata key {bad[0]!r} is reserved; reserved keys: {', '.join(_RESERVED)}")
        tid = turn_id if turn_id is not None else f"{self.session_id[:32]}-{uuid.uuid4().hex}"
        return Turn(id=tid, role=role, text=text, timestamp=ts, seq=seq, metadata=meta)

    def add(self, text: str, role: str = "user", *, turn_id: str | None = None, timestamp: Any = None, metadata: Mapping[str, Any] | None = None) -> Turn:
        """Store one turn verbatim. Re-adding the same ``turn_id`` with the same role and text returns the stored turn (idempotent)."""
        return self.add_many([{"text": text, "role": role, "turn_id": turn_id, "timestamp": timestamp, "metadata": metadata}])[0]

    def add_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Turn]:
        """Store several turns in one batch (one embedding pass per embedder), all or nothing.

        Each item is a text (role "user") or a dict with ``text`` and optional
        ``role``, ``turn_id``, ``timestamp``, ``metadata``. If Chroma rejects any part of the
        batch, what was already written is deleted again and a StoreError is raised, so storage
        and this handle stay equal. No lock is held that ``reconstruct`` waits on while the batch
        is embedded or written.
        """
        items = list(items)
        with self._write_lock:
            self._catch_up()
            with self._lock:
                last = self._latest
                seq = len(self._turns)
            result: list[Turn] = []
            fresh: list[Turn] = []
            ids_in_batch: dict[str, Turn] = {}
            for i, item in enumerate(items):
                spec = {"text": item} if isinstance(item, str) else item
                if not isinstance(spec, Mapping):
                    raise InputError(f"items[{i}] is {type(item).__name__}; expected a str or a dict with 'text'")
                unknown = set(spec) - {"text", "role", "turn_id", "timestamp", "metadata"}
                if unknown:
                    raise InputError(f"items[{i}] has unknown keys {sorted(unknown)}; allowed: text, role, turn_id, timestamp, metadata")
                tid = spec.get("turn_id")
                existing = (ids_in_batch.get(tid) or self._stored(tid)) if isinstance(tid, str) else None
                if existing is not None:
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
                okeys = [_new_order_key(t.timestamp) for t in fresh]
                texts = [t.text for t in fresh]
                vecs = [np.asarray(e.encode(texts), dtype=np.float32) for e in self.embedders]
                if self._dims is None:
                    self._dims = [embedder_dimension(e) for e in self.embedders]
                for v, dim, e in zip(vecs, self._dims, self.embedders, strict=True):
                    if v.shape[1] != dim:
                        raise StoreError(f"embedder {e.name!r} returned dimension {v.shape[1]}, expected {dim}")
                # Primary first: a crash between collections is repaired on open (secondaries follow the primary).
                written: list[Any] = []
                # Advanced before the attempt: a heads value is never reused, even when a bump fails after
                # the server applied it, so a reader can never mistake a later batch for one it has seen.
                self._written += len(fresh)
                try:
                    for col, v in zip(self._collections, vecs, strict=True):
                        written.append(col)
                        self._write(col, fresh, okeys, v)
                    self._bump(self._writer, self._written)  # the batch is acknowledged to other readers from here
                except StoreError as exc:
                    self._roll_back(written, [t.id for t in fresh])
                    raise StoreError(f"{exc}; none of the {len(fresh)} turn(s) of this batch is stored (the part already written was deleted)") from exc
                with self._lock:
                    # A read on another thread may have learned these turns from storage already.
                    self._append([(t, k) for t, k in zip(fresh, okeys, strict=True) if t.id not in self._index])
                    if self._seen is not None:
                        self._seen = {**self._seen, self._writer: self._written}
            return result

    def _roll_back(self, cols: Sequence[Any], ids: list[str]) -> None:
        for col in cols:
            for start in range(0, len(ids), _PAGE):
                try:
                    col.delete(ids=ids[start : start + _PAGE])
                except Exception:
                    log.warning("meve: could not delete a partly written batch from %s; it is repaired when the session is next opened", col.name)
        try:  # a reader may have learned the rolled-back turns from storage: a new epoch makes it reload
            self._bump(_EPOCH, uuid.uuid4().hex)
        except StoreError:
            log.warning("meve: could not record the roll-back of a batch in session %r", self.session_id)

    def delete(self, turn_id: str) -> Turn:
        """Delete one stored turn from every collection; returns it. An unknown id raises InputError."""
        with self._write_lock:
            self._catch_up()
            turn = self._stored(turn_id)
            if turn is None:
                raise InputError(f"turn_id={turn_id!r} is not stored in session {self.session_id!r}")
            for col in self._collections:
                self._call("delete a turn", col.delete, ids=[turn_id])
            self._bump(_EPOCH, uuid.uuid4().hex)
            self._load()  # BM25 statistics and positions are rebuilt; deletions are rare
            return turn

    async def aadd(self, text: str, role: str = "user", **kwargs: Any) -> Turn:
        return await asyncio.to_thread(self.add, text, role, **kwargs)

    async def aadd_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[Turn]:
        return await asyncio.to_thread(self.add_many, list(items))

    def turns(self) -> list[Turn]:
        """Every stored turn (this process's and other writers'), oldest first."""
        self._catch_up()
        with self._lock:
            return [self._turns[i] for i in self._chrono]

    def __len__(self) -> int:
        self._catch_up()
        return len(self._turns)

    def clear(self) -> None:
        """Delete every turn of this session (other sessions are untouched)."""
        self._check_open()
        with self._write_lock:
            for col in self._collections:
                ids = self._rows(col)["ids"]
                for i in range(0, len(ids), _PAGE):
                    self._call("delete turns", col.delete, ids=ids[i : i + _PAGE])
            self._bump(_EPOCH, uuid.uuid4().hex)
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
        keep_roles: Sequence[str] = (),
        dates: bool | None = None,
    ) -> MemoryContext:
        """Rebuild the minimal context for ``query`` (per-call overrides of MemoryConfig).

        ``l_max`` bounds the tokens of ``context.text``, the rendered ``role: text`` lines and
        their separators. Turns whose role is in ``keep_roles`` (e.g. ``("system",)``) are kept
        after the most recent turns, oldest first, and count against ``l_max`` like the others.
        """
        bad_roles = [r for r in keep_roles if r not in ROLES]
        if isinstance(keep_roles, str) or bad_roles:
            raise InputError(f"keep_roles={keep_roles!r} is not allowed: expected a sequence of roles among {', '.join(ROLES)}")
        t0 = time.perf_counter()
        query = check_query(query)
        cfg = self.config.replace(l_max=l_max, top_k=top_k, fusion=fusion, recent_turns=recent_turns, dates=dates)
        per_weights = self._weights(weights)
        self._catch_up()
        with self._lock:
            # Lists only grow (clear() and delete() swap in new ones), so the first n entries are a stable
            # snapshot; everything slow (the model, Chroma) happens after the lock is released.
            turns = self._turns
            tokens = self._tokens
            keys = self._keys
            index = self._index
            chrono = self._chrono  # read under the lock only: inserts from other writers' turns may land anywhere
            n = len(turns)
            n_recent = min(cfg.recent_turns, n)
            recent_idx = chrono[n - n_recent :]
            pinned_idx = [i for i in chrono[: n - n_recent] if turns[i].role in keep_roles] if keep_roles else []
            recent = set(recent_idx) | set(pinned_idx)
            past_n = n - n_recent
            smallest = self._min_tokens
            cap = cfg.top_k if cfg.top_k is not None else n
            pool = max(self.candidate_pool, 4 * cap if cfg.top_k is not None else cfg.l_max // 8)
            scores = self._bm25.get_scores(query)[:n] if past_n > 0 and cap > 0 else np.zeros(0)
        bm25: dict[int, float] = {}
        dense: dict[str, dict[int, float]] = {e.name: {} for e in self.embedders}
        if past_n > 0 and cap > 0:
            if scores.size:
                scores[list(recent)] = 0.0
                k = min(pool, scores.size)
                top = np.argpartition(-scores, k - 1)[:k]
                bm25 = {int(i): float(scores[i]) for i in top if scores[i] > 0}
            for emb, col in zip(self.embedders, self._collections, strict=True):
                qv = np.asarray(emb.encode([query])[0], dtype=np.float32)
                res = self._call("search turns", col.query, query_embeddings=[qv], n_results=min(pool + n_recent, n), include=["distances"])
                for pid, dist in zip(res["ids"][0], res["distances"][0], strict=True):
                    i = index.get(pid)
                    if i is not None and i < n and i not in recent:
                        dense[emb.name][i] = 1.0 - float(dist)
        signals: dict[str, dict[int, float]] = {"bm25": bm25, **{f"dense:{name}": s for name, s in dense.items()}}
        if cfg.fusion == "weighted":
            fused = weighted_sum(signals, per_weights)
        else:
            rankings = {name: _ranked(s) for name, s in signals.items()}
            fused = rrf(rankings, per_weights, k=cfg.rrf_k)
        ranked = sorted(fused, key=lambda i: keys[i], reverse=True)  # ties: the newer turn first
        ranked.sort(key=lambda i: -fused[i])
        chosen_rel = ranked[:cap]

        # Fill by priority: recent (newest first), kept roles, then relevance; then sort by time.
        # Each turn costs its rendered line plus a separator once another line is in (the Ledger
        # MeVe's packing uses too).
        sep = self.token_counter.count(SEPARATOR)
        ledger = Ledger(cfg.l_max, sep)
        picked: dict[int, Turn] = {}
        traces: dict[int, tuple[bool, str, int]] = {}

        def trace(i: int, included: bool, reason: str, used: int) -> None:
            traces[i] = (included, reason, used)

        dated: dict[int, int] = {}

        def line(i: int) -> int:
            # A dated line costs its date too (counted once per UTC day; the joined text is recounted below).
            extra = 0
            if cfg.dates:
                day = int(keys[i][0] // 86_400)
                extra = dated.get(day, -1)
                if extra < 0:
                    extra = dated[day] = self.token_counter.count(date_prefix(turns[i]))
            return tokens[i] + extra

        for i in reversed(recent_idx):
            own = line(i)
            need = ledger.cost(own)
            taken = ledger.take(own)
            if taken is not None:
                picked[i] = turns[i]
                trace(i, True, "most recent turn (always kept)", taken)
                continue
            head = self.token_counter.count(render_turn(replace(turns[i], text=""), dates=cfg.dates))
            cut = self._truncate(turns[i].text, tokens[i], ledger.left - ledger.cost(head))
            if cut is None:
                trace(i, False, f"recent turn of {need} tokens; only {ledger.left} left and too little for a truncated copy", 0)
                continue
            text, used = cut
            taken = ledger.take(used + head)
            if taken is None:  # _truncate guarantees the fit; a failure here is a bug, not a budget overrun
                raise RuntimeError(f"truncated recent turn of {used + head} tokens does not fit {ledger.left} left")
            picked[i] = Turn(turns[i].id, turns[i].role, text, turns[i].timestamp, turns[i].seq, {**turns[i].metadata, "meve_truncated": True})
            trace(i, True, f"most recent turn, truncated to {taken} of {need} tokens to fit l_max {cfg.l_max}", taken)
        for i in pinned_idx:
            taken = ledger.take(line(i))
            if taken is not None:
                picked[i] = turns[i]
                trace(i, True, f"role {turns[i].role!r} is in keep_roles", taken)
            else:
                need = ledger.cost(line(i))
                trace(i, False, f"role {turns[i].role!r} is in keep_roles, but it needs {need} tokens and {ledger.left} are left of l_max {cfg.l_max}", 0)

        def partner(i: int) -> int | None:
            # The adjacent turn by the other role: the reply after it, else the turn it answered.
            at = bisect.bisect_left(chrono, keys[i], key=keys.__getitem__)
            for k in (at + 1, at - 1):
                if 0 <= k < len(chrono) and turns[chrono[k]].role != turns[i].role:
                    return chrono[k]
            return None

        with self._lock:  # partner lookups read the live chronological list; nothing slow happens here
            for rank, i in enumerate(chosen_rel, start=1):
                if i in picked:
                    pass  # already in as a partner turn; its own partner may still come in below
                elif (taken := ledger.take(line(i))) is not None:
                    picked[i] = turns[i]
                    trace(i, True, f"relevance rank {rank}" + (f" of top_k {cfg.top_k}" if cfg.top_k is not None else ""), taken)
                else:
                    trace(i, False, f"relevance rank {rank}: needs {ledger.cost(line(i))} tokens, {ledger.left} left of l_max {cfg.l_max}", 0)
                # The partner is tried even when the turn itself did not fit: a short reply often holds the answer.
                j = partner(i) if cfg.partner_turns and ledger.left >= smallest + sep else None
                if j is not None and j not in picked and j < n and (taken := ledger.take(line(j))) is not None:
                    picked[j] = turns[j]
                    trace(j, True, f"partner turn of relevance rank {rank}", taken)
        for rank, i in enumerate(ranked[cap:], start=cap + 1):
            if i not in picked:  # a partner turn may rank here and still be in
                trace(i, False, f"relevance rank {rank} is outside top_k {cfg.top_k}", 0)

        # picked is in priority order (recent, kept roles, relevance with partners): the rendered,
        # chronological text must fit, so the shared rule drops from the end, never a recent turn.
        def rendered(idx: list[int]) -> str:
            return render(tuple(picked[i] for i in sorted(idx, key=lambda i: keys[i])), dates=cfg.dates)

        kept_idx, over, _, used_total = shrink_to_fit(list(picked), rendered, self.token_counter, cfg.l_max, keep=frozenset(recent_idx))
        for i, n in over:
            del picked[i]
            trace(i, False, f"rendered context was {n} tokens > l_max {cfg.l_max}", 0)
        chosen_turns = tuple(picked[i] for i in sorted(kept_idx, key=lambda i: keys[i]))

        def build_trace() -> tuple[TurnTrace, ...]:
            order = sorted(traces, key=lambda i: (i not in picked, -(fused.get(i) or 0.0) if i not in recent else -1e9, keys[i]))
            return tuple(
                TurnTrace(
                    id=turns[i].id,
                    seq=turns[i].seq,
                    bm25=bm25.get(i),
                    dense={k: v[i] for k, v in dense.items() if i in v},
                    fused=fused.get(i),
                    included=traces[i][0],
                    reason=traces[i][1],
                    tokens=traces[i][2],
                )
                for i in order
            )

        return MemoryContext(
            query=query,
            turns=chosen_turns,
            token_count=used_total,
            l_max=cfg.l_max,
            fusion=cfg.fusion,
            dates=cfg.dates,
            ms=(time.perf_counter() - t0) * 1000.0,
            build_trace=build_trace,
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
