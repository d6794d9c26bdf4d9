"""Passage stores: a Protocol and its Chroma implementation."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meve.errors import ConfigError, InputError, StoreError
from meve.records import Passage

log = logging.getLogger("meve")


@runtime_checkable
class PassageStore(Protocol):
    """Where passages and their embeddings live (dense search happens here)."""

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None: ...

    def query(self, vector: np.ndarray, k: int) -> list[Passage]: ...

    def get(self, ids: Sequence[str]) -> list[Passage]: ...

    def documents(self) -> tuple[list[str], list[str]]: ...

    def count(self) -> int: ...


def chroma_client(path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Any:
    """An embedded Chroma client with telemetry off: persistent at ``path``, else in memory.

    Filesystem and Chroma failures are raised as :class:`StoreError` naming the path and the fix
    (the original exception is the ``__cause__``). ``create=False`` is for read-only callers: a
    missing directory is an error instead of being created. A path that a client in this process
    already opened (the user's own ``chromadb.PersistentClient`` included) is shared with it.
    """
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    if path is None:
        return chromadb.EphemeralClient(settings=settings)
    where = Path(path).expanduser()
    if where.exists() and not where.is_dir():
        raise StoreError(f"db path {str(path)!r} is a file, not a directory; Chroma keeps several files there, so give a directory path")
    if not where.exists():
        if not create:
            raise StoreError(f"no Chroma directory at {str(path)!r}; check the path (or create it with `meve index` / by adding data)")
        try:
            where.mkdir(parents=True)
        except OSError as exc:
            raise StoreError(f"cannot create the Chroma directory {str(path)!r}: {exc.strerror or exc}; choose a path you can write to") from exc
    if not os.access(where, os.R_OK | os.W_OK | os.X_OK):
        raise StoreError(f"db path {str(path)!r} is not readable and writable by this user; Chroma writes even to read, so fix its permissions or copy it")
    db = where / "chroma.sqlite3"
    if db.exists() and not os.access(db, os.R_OK | os.W_OK):
        raise StoreError(f"{str(db)!r} is not readable and writable by this user; fix its permissions")
    # An instance this process already runs on the directory is reused under its own spelling of
    # the path: Chroma keys instances by that string, and two instances on one directory corrupt it.
    opened = _open_system(where)
    directory, settings = opened if opened is not None else (str(path), settings)
    try:
        return chromadb.PersistentClient(path=directory, settings=settings)
    except Exception as exc:
        raise StoreError(f"Chroma could not open {str(path)!r}: {exc}") from exc


class _Owned:
    __slots__ = ("client", "refs", "started")

    def __init__(self, client: Any, started: bool) -> None:
        self.client, self.refs, self.started = client, 0, started


_owned: dict[Path, _Owned] = {}
_owned_lock = threading.Lock()


def acquire_client(path: str | os.PathLike[str], *, create: bool = True) -> Any:
    """The embedded client for ``path``, shared by every meve handle on that directory in this
    process and counted, so :func:`release_client` can stop Chroma's instance (its file handles
    and caches) when the last handle closes. Errors as :func:`chroma_client`."""
    with _owned_lock:
        key = Path(path).expanduser().resolve()
        owned = _owned.get(key)
        if owned is None:
            # A directory some other client in this process already runs (the user's own) is shared, never stopped by meve.
            started = _open_system(Path(path).expanduser()) is None
            owned = _owned[key] = _Owned(chroma_client(path, create=create), started)
        owned.refs += 1
        return owned.client


def release_client(path: str | os.PathLike[str]) -> None:
    """One handle on ``path`` is done; the last one stops the Chroma instance meve started there."""
    from chromadb.api.shared_system_client import SharedSystemClient

    with _owned_lock:
        key = Path(path).expanduser().resolve()
        owned = _owned.get(key)
        if owned is None:
            return
        owned.refs -= 1
        if owned.refs > 0:
            return
        del _owned[key]
        if owned.started:
            system = SharedSystemClient._identifier_to_system.pop(owned.client._identifier, None)
            if system is not None:
                system.stop()


def chroma_http_client(
    host: str = "127.0.0.1", port: int = 8000, *, timeout_s: float = 30.0, ssl: bool = False, headers: Mapping[str, str] | None = None
) -> Any:
    """A ``chromadb.HttpClient`` whose requests time out after ``timeout_s`` seconds.

    Chroma's own HTTP client waits forever (``httpx.Client(timeout=None)``): against a frozen
    server an ``add`` hung for more than 75 s. With this client the call fails after
    ``timeout_s`` and meve raises a ``StoreError`` naming the server.
    """
    import chromadb
    import httpx
    from chromadb.config import Settings

    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 3600:
        raise ConfigError("timeout_s", timeout_s, "a number of seconds in (0, 3600]")
    try:
        client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=dict(headers or {}), settings=Settings(anonymized_telemetry=False))
    except Exception as exc:
        raise StoreError(f"cannot reach the Chroma server at {host}:{port}: {type(exc).__name__}: {exc}; is `chroma run` up?") from exc
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        raise StoreError(f"this chromadb version's HTTP client has no session meve can set a timeout on (chromadb {chromadb.__version__})")
    session.timeout = httpx.Timeout(timeout_s)
    return client


_WARNED_UNTIMED: set[int] = set()


def warn_if_untimed(client: Any) -> None:
    """Log once per client when it is an HTTP client whose requests never time out.

    A user's own ``chromadb.HttpClient`` is not changed behind their back; they are told how to
    get one that fails instead of hanging (``chroma_http_client``).
    """
    session = getattr(getattr(client, "_server", None), "_session", None)
    timeout = getattr(session, "timeout", None)
    if timeout is None or getattr(timeout, "read", 0) is not None or id(session) in _WARNED_UNTIMED:
        return
    _WARNED_UNTIMED.add(id(session))
    log.warning(
        "meve: this Chroma HTTP client has no request timeout, so a frozen server makes every call wait forever; "
        "meve.store.chroma_http_client(host, port, timeout_s=30) gives one whose calls fail with a StoreError instead"
    )


def _open_system(where: Path) -> tuple[str, Any] | None:
    """(path as spelled, settings) of a Chroma instance this process already runs on ``where``, if any.

    Chroma refuses a second client on one directory with different settings ("An instance of
    Chroma already exists"); reusing the first one's settings shares its instance instead.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    systems = getattr(SharedSystemClient, "_identifier_to_system", {})
    target = where.resolve()
    for system in list(systems.values()):
        directory = getattr(system.settings, "persist_directory", None)
        if getattr(system.settings, "is_persistent", False) and directory and Path(directory).expanduser().resolve() == target:
            return str(directory), system.settings
    return None


def chroma_call(what: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a Chroma call; any failure but meve's own (server down, corrupt
    directory, rejected write) becomes a StoreError saying what was being done, with the cause kept."""
    try:
        return fn(*args, **kwargs)
    except (InputError, StoreError):
        raise
    except Exception as exc:
        raise StoreError(f"Chroma could not {what}: {type(exc).__name__}: {exc}") from exc


def unique_collection_name(prefix: str = "meve") -> str:
    # In-memory Chroma clients share one store per process, so default names must not collide.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def check_embedder(collection: Any, embedder: Any) -> None:
    """A collection's vectors are only comparable with its own model's, even at the same dimension."""
    stored = (collection.metadata or {}).get("meve:embedder")
    if stored is not None and stored != embedder.name:
        raise ConfigError(
            "embedder", embedder.name, f"the embedder collection {collection.name!r} was built with, {stored!r} (its vectors live in that model's space)"
        )


class ChromaStore:
    """Passages in one Chroma collection; cosine similarity computed from returned embeddings,
    so collections in any distance space work."""

    def __init__(self, collection: Any, *, dimension: int | None = None) -> None:
        self.collection = collection
        self.dimension = dimension
        warn_if_untimed(getattr(collection, "_client", None))
        stored = self.stored_dimension()
        if dimension is not None and stored is not None and stored != dimension:
            raise StoreError(
                f"collection {collection.name!r} holds {stored}-dimensional embeddings but the embedder makes {dimension}-dimensional ones; "
                "use the embedder the collection was built with, or another collection"
            )

    def _call(self, what: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return chroma_call(f"{what} in collection {self.collection.name!r}", fn, *args, **kwargs)

    def stored_dimension(self) -> int | None:
        if self._call("count passages", self.collection.count) == 0:
            return None
        peek = self._call("read a passage", self.collection.peek, limit=1)
        embs = peek.get("embeddings")
        if embs is None or len(embs) == 0:
            return None
        return len(embs[0])

    def count(self) -> int:
        return int(self._call("count passages", self.collection.count))

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None:
        if self.dimension is not None and embeddings.shape[1] != self.dimension:
            raise StoreError(f"embeddings have dimension {embeddings.shape[1]}, the store expects {self.dimension}")
        # Chroma skips an id it already holds without an error, which would lose this text: another
        # handle (or process) on the same collection may have added it since this one last looked.
        taken = self._call("check ids", self.collection.get, ids=list(ids), include=[])["ids"]
        if taken:
            raise InputError(f"ids already in collection {self.collection.name!r}: {sorted(taken)[:5]} (added by another handle or process?); use new ids")
        kwargs: dict[str, Any] = {"ids": list(ids), "documents": list(texts), "embeddings": np.asarray(embeddings, dtype=np.float32)}
        if any(m is not None for m in metadatas):
            kwargs["metadatas"] = [m if m else None for m in metadatas]
        self._call(f"store {len(kwargs['ids'])} passage(s) (first id {kwargs['ids'][0]!r})", self.collection.add, **kwargs)

    def mark_complete(self, complete: bool) -> None:
        """Record in the collection's metadata whether the last ingestion finished (``meve:complete``)."""
        # Chroma refuses a metadata update that names the distance space; the space is kept anyway.
        meta = {k: v for k, v in (self.collection.metadata or {}).items() if not k.startswith("hnsw:")}
        self._call("record ingestion state", self.collection.modify, metadata={**meta, "meve:complete": complete})

    def _passages(self, ids: list[str], docs: list[Any], metas: list[Any], embs: Any, query: np.ndarray | None) -> list[Passage]:
        out: list[Passage] = []
        for i, pid in enumerate(ids):
            emb = np.asarray(embs[i], dtype=np.float32) if embs is not None else None
            sim = None
            if query is not None and emb is not None:
                norm = float(np.linalg.norm(emb)) or 1.0
                sim = float(emb @ query) / norm
            out.append(Passage(id=pid, text=docs[i] or "", metadata=dict(metas[i] or {}), dense_score=sim, embedding=emb))
        return out

    def query(self, vector: np.ndarray, k: int) -> list[Passage]:
        # Chroma returns what it has when k exceeds the collection (tested), so no count() round trip per query.
        res = self._call(
            "search passages",
            self.collection.query,
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=k,
            include=["documents", "metadatas", "embeddings"],
        )
        if not res["ids"] or not res["ids"][0]:
            return []
        passages = self._passages(res["ids"][0], res["documents"][0], res["metadatas"][0], res["embeddings"][0], np.asarray(vector, dtype=np.float32))
        return sorted(passages, key=lambda p: -(p.dense_score or 0.0))

    def get(self, ids: Sequence[str]) -> list[Passage]:
        if not ids:
            return []
        res = self._call("read passages", self.collection.get, ids=list(ids), include=["documents", "metadatas", "embeddings"])
        by_id = {p.id: p for p in self._passages(res["ids"], res["documents"], res["metadatas"], res["embeddings"], None)}
        return [by_id[i] for i in ids if i in by_id]

    def rows(self, offset: int = 0, include: Sequence[str] = ("documents",), page: int = 5000) -> list[tuple[str, str, dict[str, Any]]]:
        """(id, text, metadata) of every row from ``offset`` on, in the order Chroma stored them."""
        out: list[tuple[str, str, dict[str, Any]]] = []
        while True:
            res = self._call("read passages", self.collection.get, include=list(include), limit=page, offset=offset)
            if not res["ids"]:
                return out
            docs = res.get("documents") or [""] * len(res["ids"])
            metas = res.get("metadatas") or [None] * len(res["ids"])
            out.extend((i, d or "", dict(m or {})) for i, d, m in zip(res["ids"], docs, metas, strict=True))
            offset += len(res["ids"])

    def documents(self, page: int = 5000, offset: int = 0) -> tuple[list[str], list[str]]:
        """Every passage's id and text from ``offset`` on, in the order Chroma stored them."""
        rows = self.rows(offset, page=page)
        return [i for i, _, _ in rows], [t for _, t, _ in rows]

    def rows_after(self, known: int, known_ids: Collection[str], include: Sequence[str] = ("documents",)) -> list[tuple[str, str, dict[str, Any]]]:
        """The rows that other handles or processes (app replicas) stored and ``known_ids`` lacks:
        one ``count()``, and only on a difference the rows after the first ``known`` (Chroma keeps
        stored order), or every row if that does not add up (rows deleted meanwhile)."""
        total = self.count()
        if total <= known:
            return []
        new = [r for r in self.rows(known, include) if r[0] not in known_ids]
        if known + len(new) < total:
            new = [r for r in self.rows(0, include) if r[0] not in known_ids]
        return new
