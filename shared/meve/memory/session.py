"""A session's storage in Chroma: one collection per embedder, a small "heads" collection that
tells readers when other writers added turns, and every read and write done in pages.

Chroma is the single source of truth; :class:`SessionStore` only reads and writes it. What a
handle knows in memory lives in :class:`meve.memory.log.TurnLog`.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from meve.core.errors import ConfigError, InputError, StoreError
from meve.core.formats import FORMATS, found_format
from meve.core.logs import log
from meve.memory.migrate import leftovers, moved_rows, rekeyed
from meve.memory.records import Turn
from meve.retrieval.chroma import COLLECTION_RULE, check_collection_name, check_directory, chroma_call
from meve.scoring.protocols import Embedder

__all__ = ["EPOCH", "PAGE", "SessionStore", "check_place", "list_sessions", "new_order_key", "parse_timestamp", "time_order", "validate_session_id"]

PAGE = 1000  # rows per Chroma read or write: SQLite refuses statements with 32,767+ variables
EPOCH = "epoch"  # the heads row that deletions bump; every other heads row belongs to one writing handle
FORMAT_KEY = "meve:format"  # in each turns collection's metadata: its memory session format (none: format 1)
_PROCESS = uuid.uuid4().hex[:12]
_counter = itertools.count()


def validate_session_id(session_id: Any) -> str:
    """A usable session id: a non-empty str of at most 256 printable characters."""
    if not isinstance(session_id, str) or not session_id.strip() or len(session_id) > 256 or any(ord(ch) < 32 for ch in session_id):
        raise InputError(f"session_id={session_id!r} is not allowed: expected a non-empty str of at most 256 printable characters")
    return session_id


def check_place(path: object, prefix: object, *, create: bool) -> None:
    """Where a memory would be stored, checked before anything loads or is written: ``path`` as a
    Chroma directory (:func:`~meve.retrieval.chroma.check_directory`; an empty one would put
    Chroma's files at the filesystem root), and a ``collection_prefix`` whose collection names
    (``<prefix>-<16 hex>-<embedder>``, ``<prefix>-<16 hex>.heads``) Chroma accepts."""
    if path is not None:
        check_directory(path, create=create)
    try:
        check_collection_name(f"{prefix}-{'0' * 16}.heads" if isinstance(prefix, str) and prefix else None)
    except ConfigError:
        raise ConfigError("collection_prefix", prefix, f"the start of a Chroma collection name ({COLLECTION_RULE}; at most 490 characters)") from None


def describe(client: Any) -> str:
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
    for col in chroma_call("list collections", client.list_collections):
        sid = (getattr(col, "metadata", None) or {}).get("meve:session_id")
        if sid is not None:
            found.add(str(sid))
    return sorted(found)


def _slug(text: str, n: int = 24) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-")[:n] or "x"


def parse_timestamp(value: Any) -> datetime:
    """A timezone-aware datetime from a datetime or an ISO-8601 string."""
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


def new_order_key(ts: datetime) -> str:
    """A time-ordered key unique across processes: nanoseconds, this process's id, a per-process
    counter. Equal timestamps keep their arrival order within a process; across processes they
    are ordered by process id, the same way for every reader."""
    ns = int(ts.timestamp() * 1_000_000_000)
    return f"{ns:020d}-{_PROCESS}-{next(_counter):012d}"


def legacy_key(turn: Turn) -> str:
    """The order key of a turn stored before order keys existed: its per-process seq was the order."""
    return f"{int(turn.timestamp.timestamp() * 1_000_000_000):020d}-legacy-{turn.seq:012d}"


def time_order(row: tuple[Turn, str]) -> tuple[float, str]:
    """Sort key of a (turn, order key) row: the same key a TurnLog holds."""
    return row[0].timestamp.timestamp(), row[1]


class SessionStore:
    """The Chroma collections of one session: its turns (one collection per embedder, each
    recording its ``session_id``, so a mismatched collection is refused on open) and its heads."""

    def __init__(self, client: Any, session_id: str, embedders: Sequence[Embedder], *, prefix: str, create: bool, path: str | None) -> None:
        self.client, self.session_id = client, session_id
        self.where = repr(path) if path is not None else describe(client)
        self._path_note = f" in {path!r}" if path is not None else ""
        digest = hashlib.sha1(session_id.encode()).hexdigest()[:16]
        existing = {c.name for c in self.call("list collections", client.list_collections)} if not create else set()
        self.collections = [self._open_turns(f"{prefix}-{digest}-{_slug(e.name)}", e.name, existing, create) for e in embedders]
        self.heads = self._open_heads(f"{prefix}-{digest}.heads", existing, create)
        self.format = found_format("memory_session", (self.collections[0].metadata or {}).get(FORMAT_KEY), where=f"session {session_id!r} at {self.where}")
        if self.format < FORMATS["memory_session"] and create:
            self.migrate()
        elif self.format < FORMATS["memory_session"]:
            log.info("meve: session %r was written by meve before 0.2.0; it is read as it is and migrated when next opened for writing", session_id)

    def _open_turns(self, name: str, embedder: str, existing: set[str], create: bool) -> Any:
        if not create and name not in existing:
            known = list_sessions(self.client)
            raise StoreError(
                f"no session {self.session_id!r}{self._path_note} (embedder {embedder!r}); sessions there: {', '.join(map(repr, known)) if known else 'none'}"
            )
        # Only a collection made here takes this metadata (Chroma keeps an existing one's), so an
        # older session keeps saying nothing of its format until it is migrated.
        meta = {"hnsw:space": "cosine", "meve:session_id": self.session_id, "meve:embedder": embedder, FORMAT_KEY: FORMATS["memory_session"]}
        # A read-only open only gets: it never creates a collection or rewrites its metadata.
        if create:
            col = self.call("open the turns collection", self.client.get_or_create_collection, name, metadata=meta, embedding_function=None)
        else:
            col = self.call("open the turns collection", self.client.get_collection, name)
        stored = (col.metadata or {}).get("meve:session_id")
        if stored != self.session_id:
            raise StoreError(f"collection {name!r} belongs to session {stored!r}, not {self.session_id!r}")
        return col

    def _open_heads(self, name: str, existing: set[str], create: bool) -> Any:
        """The session's heads collection; None for a read-only open of a session written before it
        existed, which then falls back to one ``count()`` per read."""
        if not create and name not in existing:
            return None
        meta = {"meve:heads_of": self.session_id}
        if create:
            col = self.call("open the heads collection", self.client.get_or_create_collection, name, metadata=meta, embedding_function=None)
        else:
            col = self.call("open the heads collection", self.client.get_collection, name)
        stored = (col.metadata or {}).get("meve:heads_of")
        if stored != self.session_id:
            raise StoreError(f"collection {name!r} belongs to session {stored!r}, not {self.session_id!r}")
        return col

    def call(self, what: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """A Chroma call whose failure is a StoreError naming the session and where it is stored."""
        return chroma_call(f"{what} for session {self.session_id!r} at {self.where}", fn, *args, **kwargs)

    def head(self) -> dict[str, Any] | None:
        """Every heads row (writer or epoch id -> value), or None without a heads collection."""
        if self.heads is None:
            return None
        rows = self.rows(self.heads, include=("metadatas",))
        return {pid: (meta or {}).get("v") for pid, meta in zip(rows["ids"], rows["metadatas"], strict=True)}

    def bump(self, row: str, value: Any) -> None:
        """Set one heads row (a writer's count, or a new epoch)."""
        if self.heads is not None:
            self.call("record a write", self.heads.upsert, ids=[row], embeddings=[[1.0]], metadatas=[{"v": value}])

    def count(self) -> int:
        """How many turns the primary collection holds."""
        return int(self.call("count turns", self.collections[0].count))

    def rows(self, col: Any, *, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None, include: Sequence[str] = ()) -> dict[str, list[Any]]:
        """Every matching row, read in pages: one unpaginated get() of 32,767+ rows fails in Chroma's SQLite."""
        out: dict[str, list[Any]] = {"ids": [], **{k: [] for k in include}}
        if ids is not None:
            for start in range(0, len(ids), PAGE):
                res = self.call("read turns", col.get, ids=list(ids[start : start + PAGE]), include=list(include))
                for key in out:
                    out[key].extend(res[key] if res[key] is not None else [])  # embeddings come as an array: no truth value
            return out
        offset = 0
        while True:
            res = self.call("read turns", col.get, where=where, include=list(include), limit=PAGE, offset=offset)
            for key in out:
                out[key].extend(res[key] if res[key] is not None else [])
            if len(res["ids"]) < PAGE:
                return out
            offset += len(res["ids"])

    def turns(self, *, ids: Sequence[str] | None = None, where: Mapping[str, Any] | None = None) -> list[tuple[Turn, str]]:
        """Stored turns with their order keys, read from the primary collection."""
        rows = self.rows(self.collections[0], ids=ids, where=where, include=("documents", "metadatas"))
        return [self.turn(pid, doc, meta) for pid, doc, meta in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)]

    def unknown(self, stored: int, index: Mapping[str, int], latest: datetime | None, skew_s: float) -> list[tuple[Turn, str]]:
        """The stored turns a handle does not know (``index``: the ids it knows), when the primary
        holds ``stored``: those from its ``latest`` timestamp (less the accepted clock skew) on,
        and a full id scan only when that window cannot account for the difference."""
        where = {"ts": {"$gte": latest.timestamp() - skew_s}} if latest is not None else None
        new = [tk for tk in self.turns(where=where) if tk[0].id not in index]
        if len(index) + len(new) < stored:  # a writer's clock is further behind than the window: scan ids
            seen_ids = {t.id for t, _ in new}
            every = self.rows(self.collections[0])["ids"]
            new += self.turns(ids=[pid for pid in every if pid not in index and pid not in seen_ids])
        return new

    def repair(self, loaded: Sequence[tuple[Turn, str]], encoders: Sequence[Callable[[list[str]], Any]]) -> None:
        """Make each secondary collection hold the primary's turns (``loaded``, with order keys),
        after a crash between collections: rows the primary lacks were never acknowledged and are
        deleted; a turn missing, or with another text (an edit the crash cut short), is rewritten
        with vectors from its collection's encoder."""
        known = {t.id for t, _ in loaded}
        for encode, col in zip(encoders, self.collections[1:], strict=True):
            rows = self.rows(col, include=("documents",))
            have = dict(zip(rows["ids"], rows["documents"], strict=True))
            self.delete(col, [pid for pid in have if pid not in known])
            stale = [(t, k) for t, k in loaded if have.get(t.id) != t.text]
            if stale:
                self.write(col, [t for t, _ in stale], [k for _, k in stale], encode([t.text for t, _ in stale]), overwrite=True)

    def turn(self, pid: str, doc: str | None, meta: Mapping[str, Any] | None) -> tuple[Turn, str]:
        """A stored row as a Turn and its order key; a row of another session is refused."""
        meta = dict(meta or {})
        if meta.get("session_id") != self.session_id:
            raise StoreError(f"turn {pid!r} belongs to session {meta.get('session_id')!r}, not {self.session_id!r}")
        user = {k[2:]: v for k, v in meta.items() if k.startswith("m:")}
        when = datetime.fromisoformat(str(meta["timestamp"]))
        edited = datetime.fromisoformat(str(meta["edited"])) if meta.get("edited") is not None else None
        turn = Turn(id=pid, role=str(meta["role"]), text=doc or "", timestamp=when, seq=int(meta["seq"]), metadata=user, edited=edited)
        return turn, str(meta.get("okey") or legacy_key(turn))

    def write(self, col: Any, turns: Sequence[Turn], okeys: Sequence[str], vecs: np.ndarray, *, overwrite: bool = False) -> None:
        """Store turns (verbatim text, metadata, vectors) in one collection, in pages; ``overwrite``
        replaces the rows of turns already stored (edits)."""
        metas = []
        for t, okey in zip(turns, okeys, strict=True):
            meta: dict[str, Any] = {"session_id": self.session_id, "role": t.role, "seq": t.seq, "okey": okey}
            meta.update({"timestamp": t.timestamp.isoformat(), "ts": t.timestamp.timestamp()})
            meta.update({"edited": t.edited.isoformat()} if t.edited is not None else {})
            meta.update({f"m:{k}": v for k, v in t.metadata.items()})
            metas.append(meta)
        for i in range(0, len(turns), PAGE):
            page = turns[i : i + PAGE]
            vectors = np.asarray(vecs[i : i + PAGE], dtype=np.float32)
            fn = col.upsert if overwrite else col.add
            self.call("store turns", fn, ids=[t.id for t in page], documents=[t.text for t in page], metadatas=metas[i : i + PAGE], embeddings=vectors)

    def overwrite(self, turns: Sequence[Turn], okeys: Sequence[str], vecs: Sequence[np.ndarray]) -> list[dict[str, list[Any]]]:
        """Replace stored turns in every collection (the primary first), all or nothing: the rows as
        they were are read first, written back if a write fails, and returned (for :meth:`restore`)."""
        ids = [t.id for t in turns]
        saved = [self.rows(col, ids=ids, include=("documents", "metadatas", "embeddings")) for col in self.collections]
        written: list[Any] = []
        try:
            for col, v in zip(self.collections, vecs, strict=True):
                written.append(col)
                self.write(col, turns, okeys, v, overwrite=True)
        except StoreError:
            self.restore(saved, written)
            raise
        return saved

    def restore(self, saved: Sequence[Mapping[str, list[Any]]], cols: Sequence[Any] | None = None) -> None:
        """Write back rows :meth:`overwrite` saved, each write under the directory's lock and counted
        (other processes reload after it), then a new epoch (other handles re-read the turns); a
        failure is logged (on the next open the secondary collections are repaired to the primary's text)."""
        for col, rows in zip(cols if cols is not None else self.collections, saved, strict=False):
            try:
                self.put_rows(col, rows)
            except StoreError:
                log.warning("meve: could not restore the turns of a failed edit in %s; it is repaired when the session is next opened", col.name)
        try:
            self.bump(EPOCH, uuid.uuid4().hex)
        except StoreError:
            log.warning("meve: could not record the undoing of a failed edit in session %r", self.session_id)

    def put_rows(self, col: Any, rows: Mapping[str, list[Any]]) -> None:
        """Upsert rows as :meth:`rows` read them (ids, documents, metadatas, embeddings), in pages."""
        for i in range(0, len(rows["ids"]), PAGE):
            page = {k: v[i : i + PAGE] for k, v in rows.items()}
            self.call("write turns back", col.upsert, ids=page["ids"], documents=page["documents"], metadatas=page["metadatas"], embeddings=page["embeddings"])

    def migrate(self) -> None:
        """Bring a format-1 session to the current format (:mod:`meve.memory.migrate`): re-key its
        position-keyed turns, if any, in every collection (secondaries first, primary last), then mark it."""
        for col in (*self.collections[1:], self.collections[0]):  # what an earlier migration, cut short, left behind
            seen = self.rows(col, include=("metadatas",))
            self.delete(col, sorted(leftovers(seen["ids"], seen["metadatas"])))
        loaded = sorted(self.turns(), key=time_order)
        plan = rekeyed([t for t, _ in loaded])
        for col in (*self.collections[1:], self.collections[0]):
            rows = self.rows(col, ids=list(plan), include=("documents", "metadatas", "embeddings"))
            moved = moved_rows(rows, plan)
            self.put_rows(col, moved)
            written = set(moved["ids"])  # a new id may be an old one's: that row now holds the new turn
            self.delete(col, [pid for pid in rows["ids"] if pid not in written])
        for col in (*self.collections[1:], self.collections[0]):
            kept = {k: v for k, v in (col.metadata or {}).items() if not k.startswith("hnsw:")}  # Chroma refuses to be told the space again
            self.call("mark the session's format", col.modify, metadata={**kept, FORMAT_KEY: FORMATS["memory_session"]})
        self.bump(EPOCH, uuid.uuid4().hex)  # other handles re-read the turns under their new ids
        self.format = FORMATS["memory_session"]
        renamed = sum(1 for v in plan.values() if v is not None)
        if not plan:  # 0.1.0 as released wrote no marker either, and keyed by content already
            log.warning(
                "meve: session %r was written by meve before 0.2.0 with id-less messages keyed by content already: "
                "no turn re-keyed; memory session format %d now",
                self.session_id,
                FORMATS["memory_session"],
            )
            return
        log.warning(
            "meve: session %r was written by meve before 0.2.0 (id-less messages keyed by position): %d turn(s) re-keyed by content, "
            "%d stored twice since removed; memory session format %d now",
            self.session_id,
            renamed,
            len(plan) - renamed,
            FORMATS["memory_session"],
        )

    def delete(self, col: Any, ids: Sequence[str]) -> None:
        """Delete rows by id, in pages."""
        for start in range(0, len(ids), PAGE):
            self.call("delete turns", col.delete, ids=list(ids[start : start + PAGE]))

    def roll_back(self, cols: Sequence[Any], ids: list[str]) -> None:
        """Undo a partly written batch (under the directory's lock, counted); a failure is logged (the next open repairs it)."""
        for col in cols:
            for start in range(0, len(ids), PAGE):
                try:
                    self.call("delete a partly written batch", col.delete, ids=ids[start : start + PAGE])
                except StoreError:
                    log.warning("meve: could not delete a partly written batch from %s; it is repaired when the session is next opened", col.name)
        try:  # a reader may have learned the rolled-back turns from storage: a new epoch makes it reload
            self.bump(EPOCH, uuid.uuid4().hex)
        except StoreError:
            log.warning("meve: could not record the roll-back of a batch in session %r", self.session_id)
