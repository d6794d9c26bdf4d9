"""Chroma plumbing every store shares: clients (embedded, shared per directory, HTTP with a
timeout), one error translation (every meve call on an embedded directory under its lock,
:mod:`meve.retrieval.directory`), collection names and the embedder check."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from meve.core.durable import first_missing, remove_made, unwritable_ancestor
from meve.core.errors import ConfigError, InputError, StoreError
from meve.core.logs import log
from meve.retrieval.chroma_instances import open_system, running_settings, shared_settings
from meve.retrieval.directory import WRITES, directory_lock, lock_at, no_writer

__all__ = [
    "acquire_client",
    "check_collection_name",
    "check_directory",
    "check_embedder",
    "check_path",
    "chroma_call",
    "chroma_client",
    "chroma_http_client",
    "delete_sibling",
    "made_by_open",
    "open_clients",
    "read_only_copy",
    "release_client",
    "sibling_collection",
    "similarities",
    "undo_open",
    "unique_collection_name",
    "warn_if_untimed",
]


def chroma_client(path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Any:
    """An embedded Chroma client: persistent at ``path``, else in memory.

    Its settings are those of the instance this process already runs there (the app's own
    ``chromadb.EphemeralClient()``, ``PersistentClient`` or ``langchain_chroma.Chroma``), else
    Chroma's defaults, as an app's plain client has them: Chroma keeps one instance per place
    and refuses a second client there with other settings ("An instance of Chroma already exists
    ... with different settings"), so meve never brings settings of its own. Filesystem and
    Chroma failures are raised as :class:`StoreError` naming the path and the fix
    (the original exception is the ``__cause__``). ``create=False`` is for read-only callers: a
    missing directory is an error instead of being created. A path that a client in this process
    already opened (the user's own ``chromadb.PersistentClient`` included) is shared with it.
    """
    import chromadb

    if path is None:
        return chromadb.EphemeralClient(settings=running_settings("ephemeral") or shared_settings())
    where = check_directory(path, create=create)
    made = first_missing(where)  # what is made here is removed again if the open fails
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        remove_made(made)
        raise StoreError(f"cannot create the Chroma directory {str(path)!r}: {exc.strerror or exc}; choose a path you can write to") from exc
    try:
        # An instance this process already runs on the directory is reused under its own spelling of
        # the path: Chroma keys instances by that string, and two instances on one directory corrupt it.
        opened = open_system(where)
        directory, settings = opened if opened is not None else (str(path), shared_settings())
        # Started under the lock: the instance then knows which writes it has seen.
        with lock_at(where).hold(write=False):
            return chromadb.PersistentClient(path=directory, settings=settings)
    except BaseException as exc:
        remove_made(made)
        if isinstance(exc, StoreError) or not isinstance(exc, Exception):
            raise
        raise StoreError(f"Chroma could not open {str(path)!r}: {exc}") from exc


def check_path(path: object, what: str = "path") -> Path:
    """``path`` as a Path, or ConfigError naming it: a str or PathLike that says something (an
    empty one would put Chroma's files in the working directory, or at ``/``)."""
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise ConfigError(what, path, "a directory path (str or PathLike); an empty one would write into the working directory")
    return Path(path)


# Chroma's rule for collection names (checked by chromadb only when a collection is created, after a
# model may have loaded): 3-512 letters, digits, '.', '_' or '-', letter or digit at both ends.
_COLLECTION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{1,510})[A-Za-z0-9]")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
COLLECTION_RULE = "3-512 letters, digits, '.', '_' or '-', starting and ending with a letter or digit, no '..', not an IPv4 address (Chroma's rule)"


def check_collection_name(name: object, what: str = "collection_name") -> str:
    """``name`` if Chroma accepts it as a collection name, else ConfigError naming it."""
    if not isinstance(name, str) or not _COLLECTION.fullmatch(name) or ".." in name or _IPV4.fullmatch(name):
        raise ConfigError(what, name, COLLECTION_RULE)
    return name


def check_directory(path: object, *, create: bool = True) -> Path:
    """``path`` expanded, checked as a Chroma directory without creating anything: ConfigError for
    an empty path; StoreError for a file, a directory this user cannot write (Chroma writes even to
    read) or, when ``create`` is False, one that does not exist; a missing one needs a writable parent."""
    where = check_path(path).expanduser()
    if where.exists() and not where.is_dir():
        raise StoreError(f"db path {str(path)!r} is a file, not a directory; Chroma keeps several files there, so give a directory path")
    if not create and not where.exists():
        raise StoreError(f"no Chroma directory at {str(path)!r}; check the path (or create it with `meve index` / by adding data)")
    if where.exists():
        if not os.access(where, os.R_OK | os.W_OK | os.X_OK):
            raise StoreError(f"db path {str(path)!r} is not readable and writable by this user; Chroma writes even to read, so fix its permissions or copy it")
        db = where / "chroma.sqlite3"
        if db.exists() and not os.access(db, os.R_OK | os.W_OK):
            raise StoreError(f"{str(db)!r} is not readable and writable by this user; fix its permissions")
        return where
    parent = unwritable_ancestor(where)
    if parent is not None:
        raise StoreError(f"cannot create the Chroma directory {str(path)!r}: {str(parent)!r} is not a directory this user can write to; choose another path")
    return where


def _directory(path: str | os.PathLike[str], *, create: bool) -> Path:
    """``path`` expanded, refused when it is empty, a file, or (``create=False``) missing."""
    where = check_path(path).expanduser()
    if where.exists() and not where.is_dir():
        raise StoreError(f"db path {str(path)!r} is a file, not a directory; Chroma keeps several files there, so give a directory path")
    if not create and not where.exists():
        raise StoreError(f"no Chroma directory at {str(path)!r}; check the path (or create it with `meve index` / by adding data)")
    return where


class _Owned:
    __slots__ = ("client", "refs")

    def __init__(self, client: Any) -> None:
        self.client, self.refs = client, 0


_owned: dict[Path, _Owned] = {}
_owned_lock = threading.Lock()


def acquire_client(path: str | os.PathLike[str], *, create: bool = True) -> Any:
    """The embedded client for ``path``, shared by every meve handle on that directory in this
    process and counted, so :func:`release_client` can stop Chroma's instance (its file handles
    and caches) when the last handle closes and no other client holds it. Errors as :func:`chroma_client`."""
    with _owned_lock:
        key = Path(path).expanduser().resolve()
        owned = _owned.get(key)
        if owned is None:
            owned = _owned[key] = _Owned(chroma_client(path, create=create))
        owned.refs += 1
        return owned.client


def made_by_open(path: str | os.PathLike[str] | None) -> Path | None:
    """The outermost folder opening ``path`` would create (:func:`~meve.core.durable.first_missing`);
    None when it exists, or for no path (in memory)."""
    return first_missing(Path(path).expanduser()) if path is not None else None


def undo_open(path: str | os.PathLike[str] | None, made: Path | None) -> None:
    """After an open of ``path`` failed and released its client: remove the folders it made
    (:func:`made_by_open`), unless a meve handle in this process holds the directory now."""
    if path is not None and made is not None and str(Path(path).expanduser().resolve()) not in open_clients():
        remove_made(made)


def open_clients() -> dict[str, int]:
    """Directory -> how many meve handles hold the embedded client meve opened on it."""
    with _owned_lock:
        return {str(k): v.refs for k, v in _owned.items()}


def release_client(path: str | os.PathLike[str]) -> None:
    """One handle on ``path`` is done; the last one closes meve's client."""
    with _owned_lock:
        key = Path(path).expanduser().resolve()
        owned = _owned.get(key)
        if owned is None:
            return
        owned.refs -= 1
        if owned.refs > 0:
            return
        del _owned[key]
        # Chroma (1.5.2 on, pyproject's floor) counts an instance's clients, the app's own on this directory among
        # them, and stops it only when the last closes (issue 78 #1: meve stopped the instance under the app's
        # client). Closing may write its index: never beside another process's load (a deleted directory has no one to wait for).
        with lock_at(key).hold(write=False) if key.is_dir() else nullcontext():
            owned.client.close()


def copy_client(copy: str | os.PathLike[str]) -> Any:
    """The client :func:`read_only_copy` holds on its ``copy``, closed when the copy is removed:
    a client opened there apart would keep Chroma's files (deleted with the copy) open for the
    rest of the process."""
    with _owned_lock:
        owned = _owned.get(Path(copy).expanduser().resolve())
    if owned is None:
        raise StoreError(f"{str(copy)!r} is not a copy read_only_copy holds open")
    return owned.client


@contextmanager
def held_client(path: str | os.PathLike[str], *, create: bool = True) -> Iterator[Any]:
    """:func:`acquire_client` for the length of a ``with`` block, then released (a command that
    returns must not leave Chroma's files open in a process that goes on: ``meve.cli.main`` called
    from a program, or a test suite)."""
    client = acquire_client(path, create=create)
    try:
        yield client
    finally:
        release_client(path)


@contextmanager
def read_only_copy(path: str | os.PathLike[str]) -> Iterator[str]:
    """A private copy of the Chroma directory at ``path``, removed on exit, for callers that only read.

    Chroma writes to its files whenever a client opens them (a lock row in its SQLite file, index
    flushes), and has no read-only client (chroma-core/chroma#1438); reading the copy leaves the
    directory as it was, byte for byte, and also works on one this user cannot write to (the copy
    is made writable). It is copied while no meve process writes there, so it is whole; errors
    name ``path``, not the copy. It costs a copy of the directory, so it is for the command line's
    inspection commands, not for a service.
    """
    where = _directory(path, create=False)
    with tempfile.TemporaryDirectory(prefix="meve-read-") as tmp:
        copy = Path(tmp) / where.name
        try:
            with no_writer(where):
                shutil.copytree(where, copy)
            _let_owner_write(copy)
        except OSError as exc:
            raise StoreError(f"cannot read the Chroma directory {str(path)!r}: {exc}") from exc
        try:
            with held_client(copy, create=False):
                yield str(copy)
        except (InputError, StoreError) as exc:  # name the user's directory, not the copy
            raise type(exc)(str(exc).replace(str(copy), str(path))) from exc


def _let_owner_write(root: Path) -> None:
    """Give the owner write access to everything under ``root``: a copy keeps the modes of a
    read-only source, and Chroma (and the copy's removal) must write there."""
    for folder, _dirs, files in os.walk(root):
        for p in (Path(folder), *(Path(folder) / f for f in files)):
            p.chmod(p.stat().st_mode | stat.S_IWUSR | (stat.S_IXUSR if p.is_dir() else 0))


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
        # Every HTTP client has an instance of its own (Chroma keys them by a fresh uuid): settings never clash there.
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


def chroma_call(what: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a Chroma call (a method of a collection or a client); on an
    embedded directory it runs under the directory's lock (:mod:`meve.retrieval.directory`). Any failure
    but meve's own (server down, corrupt directory, rejected write) becomes a StoreError saying
    what was being done, with the cause kept."""
    try:
        with directory_lock(getattr(fn, "__self__", None), write=getattr(fn, "__name__", "") in WRITES):
            return fn(*args, **kwargs)
    except (InputError, StoreError):
        raise
    except Exception as exc:
        raise StoreError(f"Chroma could not {what}: {type(exc).__name__}: {exc}") from exc


def sibling_collection(collection: Any, name: str, *, metadata: dict[str, Any], create: bool) -> Any | None:
    """Collection ``name`` in ``collection``'s client, tenant and database (a ``from_chroma`` caller
    hands meve a collection, not its client): made with ``metadata`` when ``create``, else None
    where there is none. Vectors are always given, so it has no embedding function."""
    from chromadb.api.models.Collection import Collection
    from chromadb.errors import NotFoundError

    server, where = collection._client, {"tenant": collection.tenant, "database": collection.database}
    if create:
        model = chroma_call(f"open collection {name!r}", server.get_or_create_collection, name=name, metadata=metadata, **where)
    else:
        try:
            model = server.get_collection(name=name, **where)
        except (NotFoundError, ValueError):  # ValueError: Chroma before 1.0 said "does not exist" so
            return None
    return Collection(client=server, model=model, embedding_function=None)


def delete_sibling(collection: Any, name: str) -> None:
    """Delete collection ``name`` in ``collection``'s client, tenant and database."""
    server = collection._client
    chroma_call(f"delete collection {name!r}", server.delete_collection, name=name, tenant=collection.tenant, database=collection.database)


def unique_collection_name(prefix: str = "meve") -> str:
    """A fresh collection name (``prefix-<12 hex>``)."""
    # In-memory Chroma clients share one store per process, so default names must not collide.
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def check_embedder(collection: Any, embedder: Any) -> None:
    """A collection's vectors are only comparable with its own model's, even at the same dimension."""
    stored = (collection.metadata or {}).get("meve:embedder")
    if stored is not None and stored != embedder.name:
        raise ConfigError(
            "embedder", embedder.name, f"the embedder collection {collection.name!r} was built with, {stored!r} (its vectors live in that model's space)"
        )


def similarities(result: Mapping[str, Any]) -> dict[str, float]:
    """Id -> cosine of one query's Chroma results (collections in the cosine space: distance = 1 - cosine)."""
    if not result["ids"]:
        return {}
    return {pid: 1.0 - float(d) for pid, d in zip(result["ids"][0], (result.get("distances") or [[]])[0], strict=True)}
