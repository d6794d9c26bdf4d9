"""Several processes on one embedded Chroma directory.

Chroma keeps each collection's vector index in the memory of every process that opened it and
never reloads it: a process cannot read rows another process added after it looked ("Error
finding id", for as long as it runs), and a process that loads the index while another one
writes it can leave the files unreadable for everyone. meve's calls follow one protocol instead
(docs/scaling.md, "Several processes on one directory"): each Chroma call on an embedded
directory holds an exclusive ``flock`` on ``<directory>/meve.lock``, whose first 8 bytes count
the writes; a process that finds the count changed by another one restarts its Chroma instance on
the directory (its next call loads what is on disk) before it calls.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from meve.core.errors import StoreError

__all__ = ["LOCK_FILE", "WRITES", "DirectoryLock", "directory_lock", "lock_at", "no_writer"]

# The collection and client methods that change what is on disk (what other processes must reload).
WRITES = frozenset({"add", "upsert", "update", "delete", "modify", "create_collection", "get_or_create_collection", "delete_collection"})
LOCK_FILE = "meve.lock"


class DirectoryLock:
    """This process's side of the protocol on one embedded Chroma directory (module docstring).

    ``hold`` is reentrant in a thread, so a check and the write it guards (an id check before an
    add) can share one hold; threads of the process take turns, as flock does not tell them apart.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.restarts = 0  # how often this process reloaded the directory after another one wrote
        self._lock = threading.RLock()
        self._depth = 0
        self._fd = -1
        self._seen: tuple[int, int, int] | None = None  # (pid, lock file's inode, write count) this process's instance reflects

    def _open(self) -> int:
        # Opened for each outermost hold and closed after: a directory deleted and made again gets a
        # new lock file, a forked child its own open file (flock is per open file, so a shared one
        # would not keep it out), and a process that used many directories keeps no descriptor each.
        try:
            return os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StoreError(
                f"cannot open {str(self.directory / LOCK_FILE)!r} ({exc.strerror or exc}): meve coordinates the processes that share a "
                "Chroma directory through it; make the directory writable (Chroma writes there even to read), or read a copy"
            ) from exc

    @contextmanager
    def hold(self, *, write: bool) -> Iterator[None]:
        """Exclusive use of the directory: reload it first if another process wrote since this one
        last looked; count a write (before it happens, so a writer killed mid-call still makes the
        others reload)."""
        with self._lock:
            if self._depth == 0:
                fd = self._open()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            try:
                raw = os.pread(self._fd, 8, 0)
                state = (os.getpid(), os.fstat(self._fd).st_ino, int(struct.unpack("<Q", raw)[0]) if len(raw) == 8 else 0)
                if state != self._seen and _restart_instances(self.directory):
                    self.restarts += 1
                if write:
                    state = (*state[:2], state[2] + 1)
                    os.pwrite(self._fd, struct.pack("<Q", state[2]), 0)
                self._seen = state
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    os.close(self._fd)  # and with it the lock
                    self._fd = -1


_locks: dict[str, DirectoryLock] = {}
_locks_lock = threading.Lock()


def lock_at(directory: Path) -> DirectoryLock:
    """This process's lock of the embedded Chroma directory ``directory`` (one per directory)."""
    key = str(directory.expanduser().resolve())
    with _locks_lock:
        found = _locks.get(key)
        if found is None:
            found = _locks[key] = DirectoryLock(Path(key))
        return found


def _embedded_directory(owner: Any) -> str | None:
    """The directory of the embedded persistent Chroma behind ``owner`` (a collection, a client or
    its API), else None."""
    api = getattr(owner, "_server", None) or getattr(owner, "_client", None) or owner  # a client's API, a collection's, or the API
    settings = getattr(getattr(api, "_system", None), "settings", None)
    if settings is None or not getattr(settings, "is_persistent", False) or str(getattr(settings, "chroma_api_impl", "")).endswith("FastAPI"):
        return None
    directory = getattr(settings, "persist_directory", None)
    return str(directory) if directory else None


def directory_lock(owner: Any, *, write: bool = True) -> AbstractContextManager[None]:
    """A hold of the lock of the embedded directory behind ``owner`` (a collection or a client) for
    several calls that must not be interleaved with another process's (a check and its write);
    nothing for an in-memory or HTTP client."""
    directory = _embedded_directory(owner)
    if directory is None:
        return nullcontext()
    with _locks_lock:
        found = _locks.get(directory)
    return (found if found is not None else _remember_lock(directory)).hold(write=write)


def _remember_lock(directory: str) -> DirectoryLock:
    lock = lock_at(Path(directory))
    with _locks_lock:
        _locks[directory] = lock  # also under the spelling Chroma uses, so the next call needs no resolve()
    return lock


@contextmanager
def no_writer(directory: Path) -> Iterator[None]:
    """While no meve process writes to ``directory`` (a shared hold of its lock: several readers
    at once, for copying its files whole). The lock file is opened read-only, so this works on a
    directory this user cannot write; one without a lock file has had no meve writer to wait for."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _restart_instances(directory: Path) -> bool:
    """Restart every Chroma instance this process runs on ``directory`` (the next call reloads from
    disk what other processes wrote); whether there was one. Collections already opened keep
    working: they reach the instance through the same API object."""
    from chromadb.api import ServerAPI
    from chromadb.api.shared_system_client import SharedSystemClient

    restarted = False
    for system in list(getattr(SharedSystemClient, "_identifier_to_system", {}).values()):
        where = getattr(system.settings, "persist_directory", None)
        if getattr(system.settings, "is_persistent", False) and where and Path(where).expanduser().resolve() == directory:
            api = system.instance(ServerAPI)
            api.stop()
            api.start()
            restarted = True
    return restarted
