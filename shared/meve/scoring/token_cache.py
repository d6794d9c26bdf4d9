"""The verifier's token vectors on disk, per model, so each passage is read by the model once.

Why: late interaction's advantage over a cross-encoder is that a passage's token vectors are made
once and reused by every query. Kept in process memory only, an app over a LlamaIndex index or a
LangChain store paid ingestion-scale work on its first queries after every restart (issue 75: a
39 s first query). Here the rows the in-memory cache holds (int8, one fp16 scale per row, and the
passage's float32 dense vector from the same pass) are appended to a folder per model, found with
nothing passed: ``$MEVE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/meve``, else ``~/.cache/meve``, as
the model hubs keep theirs; ``MEVE_CACHE_DIR=off`` turns it off). A passage scores the same read
from here as on the query that encoded it: both read the same int8 rows.

Files in ``tokens-v<format>/<model>-<identity>/``: ``meta.json`` (format, identity, dimensions; written
atomically), ``data.bin`` (each entry's int8 rows, fp16 scales and dense vector, appended),
``index.bin`` (32-byte records: sha1 of the text, byte offset, row count; appended after the data
they point to), ``lock`` (``flock`` around appends and rotation). A record whose data is not all on
disk (a crash between the two appends) is ignored. Bounded: a write that would pass
``$MEVE_CACHE_MAX_BYTES`` (default 4 GiB a model) starts the folder's files afresh under a new name
in ``generation`` (readers compare it with the one they read and drop what they had read of the old
files: a new file can reuse a removed one's inode).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from meve.core.durable import append_synced, exclusive, first_missing, remove_made, remove_strays, write_atomically
from meve.core.errors import ConfigError, StoreError
from meve.core.formats import FORMATS, found_format
from meve.core.logs import log

__all__ = ["DiskTokens", "cache_root", "file_digest", "max_bytes", "model_identity", "open_for"]

FORMAT = FORMATS["token_cache"]
_RECORD = np.dtype([("key", "V20"), ("start", "<u8"), ("rows", "<u4")])
_OFF = {"", "0", "off", "none", "false", "no"}
_SIZE = re.compile(r"(\d+)\s*([kmgt]?)i?b?", re.IGNORECASE)


def cache_root() -> Path | None:
    """Where token vectors are kept: ``$MEVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/meve``, else
    ``~/.cache/meve``; None when ``MEVE_CACHE_DIR`` is ``off`` (or empty, 0, none, false, no)."""
    given = os.environ.get("MEVE_CACHE_DIR")
    if given is not None:
        return None if given.strip().lower() in _OFF else Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "meve"


def max_bytes() -> int:
    """The most bytes of token vectors kept on disk for one model: ``$MEVE_CACHE_MAX_BYTES``
    (a number of bytes, or with a K/M/G/T suffix), else 4 GiB."""
    given = os.environ.get("MEVE_CACHE_MAX_BYTES")
    if given is None:
        return 4 * 2**30
    m = _SIZE.fullmatch(given.strip())
    if m is None:
        raise ConfigError("MEVE_CACHE_MAX_BYTES", given, "a size in bytes, e.g. 4000000000 or 4G (suffixes K, M, G, T)")
    size = int(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower())
    if size < 2**20:  # under one long passage's rows: every write would start the files afresh and keep nothing
        raise ConfigError("MEVE_CACHE_MAX_BYTES", given, "at least 1M (to turn the cache off, set MEVE_CACHE_DIR=off)")
    return size


def model_identity(path: str | None, precision: str) -> str | None:
    """A name for a model's token vectors that two different checkpoints never share: its folder's
    name, then a digest of each file's name, size and whole bytes (:func:`file_digest`: read once
    per file version, then remembered) and of the precision. A name that is not a local folder (a
    hub id) is taken as it is. None for no path (a loaded model handed in: nothing says which
    weights it has)."""
    if path is None:
        return None
    where = Path(path).expanduser()
    digest = hashlib.sha256(json.dumps(["meve-token-pass-1", precision]).encode())
    if where.is_dir():
        for f in sorted(p for p in where.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(where).parts)):
            digest.update(f"{f.relative_to(where).as_posix()}\0{f.stat().st_size}\0".encode())
            digest.update(file_digest(f))
    else:
        digest.update(str(path).encode())
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", where.name or str(path)).strip("-.")[:40] or "model"
    return f"{name}-{digest.hexdigest()[:16]}"


_DIGESTS: dict[tuple[str, int, int, int], bytes] = {}


def file_digest(f: Path) -> bytes:
    """sha256 of a file's whole bytes (a fine-tune that changes a few layers changes it), kept per
    file version (path, size, mtime, inode) in this process and beside the cache (``digests/``), so
    a model's 90 MB is read once, not at every start."""
    st = f.stat()
    version = (str(f.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if version in _DIGESTS:
        return _DIGESTS[version]
    root = cache_root()
    kept = root / "digests" / hashlib.sha1(json.dumps(version).encode()).hexdigest() if root is not None else None
    if kept is not None and kept.is_file() and len(known := kept.read_bytes()) == 32:
        _DIGESTS[version] = known
        return known
    whole = hashlib.sha256()
    with open(f, "rb") as fh:
        while block := fh.read(2**22):
            whole.update(block)
    out = _DIGESTS[version] = whole.digest()
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(kept, out)
        except OSError:  # a read-only cache folder only costs reading the file again next start
            pass
    return out


class DiskTokens:
    """One model's token vectors and dense vectors by text key (sha1 hex) in ``directory`` (see
    the module docstring). Thread-safe; processes share it through the lock."""

    def __init__(self, directory: str | Path, *, identity: str, dimension: int, vector_dimension: int | None = None, limit: int | None = None) -> None:
        self.path = Path(directory)
        self.identity, self.dimension = identity, dimension
        self.vector_dimension = dimension if vector_dimension is None else vector_dimension
        self.limit = max_bytes() if limit is None else limit
        made = first_missing(self.path)  # removed again if the folder cannot be made or opened
        self._lock = threading.Lock()
        try:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the token-vector cache {str(self.path)!r}: {exc.strerror or exc}; "
                    "set MEVE_CACHE_DIR to a folder you can write to, or to off"
                ) from exc
            self._check_meta()
        except BaseException:
            remove_made(made)
            raise
        self._reset(self._generation_now())
        self.reads = 0

    def _check_meta(self) -> None:
        meta_path = self.path / "meta.json"
        mine = {"format": FORMAT, "identity": self.identity, "dimension": self.dimension, "vector_dimension": self.vector_dimension}
        with self._file_lock():
            remove_strays(self.path)
            try:
                theirs = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else None
            except (OSError, ValueError) as exc:
                log.warning("meve: %r cannot be read (%s); starting the token-vector cache beside it afresh", str(meta_path), exc)
                theirs = None
            if not isinstance(theirs, dict):
                for name in ("data.bin", "index.bin"):
                    (self.path / name).unlink(missing_ok=True)
                write_atomically(meta_path, json.dumps(mine).encode("utf-8"))
                self._new_generation()
                return
            found_format("token_cache", theirs.get("format"), where=repr(str(self.path)))
            if theirs != mine:
                raise StoreError(
                    f"{str(self.path)!r} holds token vectors of {theirs}, this model's are {mine}; remove the folder or set MEVE_CACHE_DIR elsewhere"
                )
            if self._generation_now() is None:
                self._new_generation()

    def _new_generation(self) -> None:
        """Name the files' generation anew (under the lock, before any row of it is written): a
        handle compares it with the one it read, since a new file can reuse a removed one's inode."""
        write_atomically(self.path / "generation", uuid.uuid4().hex.encode("ascii"))

    def _generation_now(self) -> str | None:
        try:
            return (self.path / "generation").read_text(encoding="ascii")
        except FileNotFoundError:
            return None

    def _file_lock(self) -> AbstractContextManager[None]:
        return exclusive(self.path / "lock")

    def _entry_bytes(self, rows: int) -> int:
        return rows * (self.dimension + 2) + self.vector_dimension * 4

    def _reset(self, generation: str | None) -> None:
        """Forget what was read (the files were started afresh, by this process or another)."""
        self._where: dict[bytes, tuple[int, int]] = {}
        self._records_read = 0
        self._generation = generation
        self._data: np.ndarray | None = None

    def _refresh(self) -> None:
        """Read the index records appended since the last look (by this or another process)."""
        generation = self._generation_now()
        if generation != self._generation:
            self._reset(generation)
        try:
            with open(self.path / "index.bin", "rb") as fh:
                fh.seek(self._records_read * _RECORD.itemsize)
                raw = fh.read()
        except FileNotFoundError:
            return
        if self._generation_now() != generation:
            return  # started afresh while it was read: the next look reads the new files
        records = np.frombuffer(raw[: len(raw) // _RECORD.itemsize * _RECORD.itemsize], dtype=_RECORD)
        on_disk = self._data_size()
        for key, start, rows in zip(records["key"].tolist(), records["start"].tolist(), records["rows"].tolist(), strict=True):
            if start + self._entry_bytes(rows) <= on_disk:  # data is written before its record; this guards a cut file
                self._where[key] = (start, rows)
        self._records_read += len(records)

    def _data_size(self) -> int:
        data = self.path / "data.bin"
        return data.stat().st_size if data.exists() else 0

    def _mapped(self, end: int) -> np.ndarray | None:
        if self._data is None or len(self._data) < end:
            if not (self.path / "data.bin").exists():  # removed by hand, or started afresh this instant
                return None
            with open(self.path / "data.bin", "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                # The generation is named before a new file's first row: if it is still ours, so is this file.
                if self._generation_now() != self._generation or size < end:
                    return None
                self._data = np.memmap(fh, dtype=np.uint8, mode="r", shape=(size,))
        return self._data

    def __len__(self) -> int:
        return len(self._where)

    def get_many(self, keys: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """Each key's (int8 rows, fp16 scales, float32 dense vector), or None."""
        wanted = [bytes.fromhex(k) for k in keys]
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * len(keys)
        with self._lock:
            if any(w not in self._where for w in wanted) or self._generation_now() != self._generation:
                self._refresh()
            hits = [(i, self._where[w]) for i, w in enumerate(wanted) if w in self._where]
            if not hits:
                return out
            data = self._mapped(max(s + self._entry_bytes(r) for _, (s, r) in hits))
            if data is None:
                return out
            d = self.dimension
            for i, (s, r) in hits:
                q = np.array(data[s : s + r * d]).view(np.int8).reshape(r, d)
                scale = np.array(data[s + r * d : s + r * (d + 2)]).view(np.float16).reshape(r, 1)
                vec = np.array(data[s + r * (d + 2) : s + self._entry_bytes(r)]).view(np.float32)
                out[i] = (q, scale, vec)
        self.reads += len(hits)
        return out

    def put_many(self, items: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Append each (key, int8 rows, fp16 scales, dense vector) not kept yet; past the size
        bound the folder's files start afresh first."""
        with self._lock, self._file_lock():
            self._refresh()
            fresh: dict[bytes, bytes] = {}
            for key, q, scale, vec in items:
                k = bytes.fromhex(key)
                if k in self._where or k in fresh:
                    continue
                q8 = np.ascontiguousarray(q, dtype=np.int8)
                if q8.ndim != 2 or q8.shape[1] != self.dimension:
                    raise ValueError(f"token rows of shape {q8.shape} for a cache of dimension {self.dimension}")
                blob = q8.tobytes() + np.ascontiguousarray(scale, dtype=np.float16).tobytes() + np.ascontiguousarray(vec, dtype=np.float32).tobytes()
                fresh[k] = blob
            if not fresh:
                return
            start = self._trim()
            if start + sum(len(b) for b in fresh.values()) > self.limit or self._data_size() != start:
                start = self._start_afresh()  # past the bound, or the rows are not where the records say
            records = np.zeros(len(fresh), dtype=_RECORD)
            blobs: list[bytes] = []
            for i, (k, blob) in enumerate(fresh.items()):
                if start + len(blob) > self.limit:
                    records = records[:i]
                    break
                records[i] = (k, start, (len(blob) - self.vector_dimension * 4) // (self.dimension + 2))
                blobs.append(blob)
                start += len(blob)
            if not blobs:
                return
            append_synced(self.path / "data.bin", b"".join(blobs))
            append_synced(self.path / "index.bin", records.tobytes())
            self._where.update(zip(records["key"].tolist(), zip(records["start"].tolist(), records["rows"].tolist(), strict=True), strict=True))
            self._records_read += len(records)

    def _trim(self) -> int:
        """Cut what a writer that crashed mid-append left past the last complete record; returns that byte."""
        end = max((s + self._entry_bytes(r) for s, r in self._where.values()), default=0)
        for name, size in (("data.bin", end), ("index.bin", self._records_read * _RECORD.itemsize)):
            f = self.path / name
            if f.exists() and f.stat().st_size > size:
                os.truncate(f, size)
        return end

    def _start_afresh(self) -> int:
        """Past the bound: new, empty files (under the lock; readers holding the old ones keep reading them)."""
        log.info("meve: the token-vector cache %r reached %d bytes (MEVE_CACHE_MAX_BYTES); starting it afresh", str(self.path), self.limit)
        for name in ("index.bin", "data.bin"):
            (self.path / name).unlink(missing_ok=True)
        self._new_generation()
        self._reset(self._generation_now())
        return 0

    def bytes_on_disk(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())


def open_for(identity: str | None, dimension: int, vector_dimension: int) -> DiskTokens | None:
    """The cache folder of the model named ``identity`` under :func:`cache_root`, or None where the
    cache is turned off or the model has no identity."""
    root = cache_root()
    if root is None or identity is None:
        return None
    return DiskTokens(root / f"tokens-v{FORMAT}" / identity, identity=identity, dimension=dimension, vector_dimension=vector_dimension)
