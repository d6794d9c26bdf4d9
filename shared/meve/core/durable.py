"""Files that survive a crash whole or not at all: written under a temporary name, flushed to disk,
then renamed over the old one, and the rename itself flushed (the directory's entry). A reader
sees the old content or the new one, never half; a writer killed before the rename leaves a
temporary file that :func:`remove_strays` deletes at the next save. The one I/O in ``core``,
shared by the BM25 snapshot (``retrieval``) and the token store (``scoring``)."""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["TMP_MARK", "append_synced", "exclusive", "first_missing", "fsync_dir", "remove_made", "remove_strays", "unwritable_ancestor", "write_atomically"]

TMP_MARK = ".tmp-"  # in the name of every temporary file or folder written here


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries (a file created or renamed in it) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, write: bytes | Callable[[BinaryIO], object]) -> None:
    """Replace ``path`` with ``write`` (bytes, or a function writing to the open file) so that a
    crash at any point leaves the old file or the new one."""
    tmp = path.with_name(f"{path.name}{TMP_MARK}{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            if isinstance(write, bytes):
                fh.write(write)
            else:
                write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a writer that raised leaves no half file behind (a killed process does; remove_strays)
        raise
    fsync_dir(path.parent)


def remove_strays(directory: Path) -> list[Path]:
    """Delete the temporary files and folders a killed writer left in ``directory`` (callers hold
    the lock every writer there holds, so none is being written); returns what was deleted."""
    gone = [p for p in directory.iterdir() if TMP_MARK in p.name] if directory.is_dir() else []
    for p in gone:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    return gone


def unwritable_ancestor(path: Path) -> Path | None:
    """Why ``path`` (which does not exist yet) cannot be created: its nearest existing ancestor,
    when that is not a folder this user can write into; None when it can be created."""
    parent = next(p for p in path.absolute().parents if p.exists())  # "/" always exists
    return None if parent.is_dir() and os.access(parent, os.W_OK | os.X_OK) else parent


def first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (what creating it would make
    first), or None when ``path`` exists."""
    missing = [p for p in (path.absolute(), *path.absolute().parents) if not p.exists()]
    return missing[-1] if missing else None


def remove_made(top: Path | None) -> None:
    """Remove ``top`` (from :func:`first_missing`), made by an open that then failed."""
    if top is not None:
        shutil.rmtree(top, ignore_errors=True)


def append_synced(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` and flush it to disk before returning (append-only stores write
    their rows, then the records that point to them: each must be on disk before the next)."""
    created = not path.exists()
    with open(path, "ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if created:  # the new file's name must reach the disk too
        fsync_dir(path.parent)


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (made if missing): the writers of one folder,
    in any process, append one at a time."""
    with open(lock_file, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
