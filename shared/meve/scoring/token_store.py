"""Token vectors on disk: product-quantised, append-only, memory-mapped, shared by processes.

Why: late interaction needs every passage's token vectors. Kept in memory as int8 they take
~58 KB per passage (151 tokens x 384 bytes), 58 GB at a million passages, and an in-memory
cache forgets them on restart, so a new replica re-encodes. Here each vector is 32 bytes (product
quantisation: 32 sub-vectors of 12 dimensions, each the index of one of 256 centroids, as in
ColBERTv2/PLAID's ~20-36 bytes), the file is memory-mapped (the OS pages in what queries touch)
and it lives beside the Chroma collection, so a restart reads instead of re-encoding.

Files in the directory: ``meta.json`` (format, codebook digest; written atomically), ``codes.bin`` (uint8 rows of
``m`` bytes, appended), ``index.bin`` (32-byte records: sha1 of the text, first row, row count,
appended after the rows they point to), ``lock`` (``flock`` around appends, so processes that
share the directory never interleave). A record whose rows are not all on disk (a crash between
the two appends) is ignored on open; rows are never rewritten in place.

Formats (:data:`meve.core.formats.FORMATS`): 2 holds every word piece of a passage (the verifier
reads a long passage in windows). 1, written before meve 0.2.0, kept at most 254 per passage (one
256-piece window less its two special tokens): on open its records of 254 rows, which may have been
cut, are dropped from ``index.bin`` (their passages are encoded again when a query needs them), the
shorter ones are kept, and only then does ``meta.json`` say 2, so a crash in between migrates again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from meve.core.durable import append_synced, exclusive, first_missing, remove_made, remove_strays, write_atomically
from meve.core.errors import ConfigError, StoreError
from meve.core.formats import FORMATS, found_format
from meve.core.logs import log

__all__ = ["CODEBOOK_PATH", "ProductQuantizer", "TokenStore"]

CODEBOOK_PATH = Path(__file__).resolve().parents[1] / "weights" / "token_codebook.safetensors"
# "V20", not "S20": numpy strips trailing zero bytes from "S" strings, and 1 digest in 256 ends in one.
_RECORD = np.dtype([("key", "V20"), ("start", "<u8"), ("rows", "<u4")])
FORMAT = FORMATS["token_store"]
_CUT_AT = 254  # format 1's most rows per passage: a record that long may have been truncated


class ProductQuantizer:
    """``centroids``: (m, 256, d/m) float32. Vectors are cut into m sub-vectors, each stored as the
    index of its nearest centroid; decoding concatenates centroids and renormalises each row
    (late interaction compares unit vectors)."""

    def __init__(self, centroids: np.ndarray) -> None:
        c = np.asarray(centroids, dtype=np.float32)
        if c.ndim != 3 or c.shape[1] > 256:
            raise ConfigError("centroids", c.shape, "an array of shape (m, k <= 256, sub_dimension)")
        self.centroids = c
        self.m, self.k, self.sub = c.shape
        self.dimension = self.m * self.sub
        self.digest = hashlib.sha256(c.tobytes()).hexdigest()[:16]
        self._norms = (c * c).sum(axis=2)  # (m, k)
        self._flat = c.reshape(-1, self.sub)
        self._offsets = np.arange(self.m, dtype=np.intp) * self.k

    @classmethod
    def load(cls, path: str | Path = CODEBOOK_PATH) -> ProductQuantizer:
        """A codebook saved with :meth:`save` (default: the one shipped with meve)."""
        from safetensors.numpy import load_file

        return cls(load_file(str(path))["centroids"])

    def save(self, path: str | Path, metadata: dict[str, str] | None = None) -> None:
        from safetensors.numpy import save_file

        save_file({"centroids": np.ascontiguousarray(self.centroids)}, str(path), metadata=metadata)

    @classmethod
    def fit(cls, vectors: np.ndarray, m: int = 32, k: int = 256, iters: int = 12, seed: int = 0) -> ProductQuantizer:
        """k-means (Lloyd, k-means++-free random start) on each of ``m`` sub-spaces of ``vectors``."""
        x = np.asarray(vectors, dtype=np.float32)
        if x.shape[1] % m:
            raise ConfigError("m", m, f"a divisor of the vectors' dimension {x.shape[1]}")
        sub = x.shape[1] // m
        rng = np.random.default_rng(seed)
        books = []
        for i in range(m):
            part = x[:, i * sub : (i + 1) * sub]
            c = part[rng.choice(len(part), k, replace=False)].copy()
            for _ in range(iters):
                assign = _nearest(part, c, (c * c).sum(axis=1))
                sums = np.zeros_like(c)
                np.add.at(sums, assign, part)
                counts = np.bincount(assign, minlength=k)[:, None]
                c = np.where(counts > 0, sums / np.maximum(counts, 1), c)
            books.append(c)
        return cls(np.stack(books))

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """(n, m) uint8 codes of (n, d) vectors."""
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.dimension:
            raise ConfigError("vectors", x.shape, f"(n, {self.dimension}) token vectors")
        codes = np.empty((len(x), self.m), dtype=np.uint8)
        for i in range(self.m):
            codes[:, i] = _nearest(x[:, i * self.sub : (i + 1) * self.sub], self.centroids[i], self._norms[i])
        return codes

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """(n, d) float32 unit rows from (n, m) codes."""
        c = np.asarray(codes)
        # One flat take is ~10x faster than indexing (sub-space, code) pairs.
        out = np.take(self._flat, c.astype(np.intp) + self._offsets, axis=0).reshape(len(c), self.dimension)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


def _nearest(x: np.ndarray, c: np.ndarray, c_norms: np.ndarray) -> np.ndarray:
    # |x - c|^2 = |x|^2 - 2 x.c + |c|^2; |x|^2 is the same for every centroid.
    return np.asarray((c_norms[None, :] - 2.0 * (x @ c.T)).argmin(axis=1))


class TokenStore:
    """Compressed token vectors by text key (sha1 hex, as :func:`meve.scoring.late_interaction.text_key`)
    in ``directory`` (see the module docstring). Thread-safe; processes share it through the lock."""

    def __init__(self, directory: str | Path, quantizer: ProductQuantizer | None = None) -> None:
        self.path = Path(directory)
        self.quantizer = quantizer if quantizer is not None else ProductQuantizer.load()
        made = first_missing(self.path)  # removed again if the folder cannot be made or opened
        try:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the token-vector directory {str(self.path)!r}: {exc.strerror or exc}; choose a path you can write to") from exc
            self._check_meta()
        except BaseException:
            remove_made(made)
            raise
        self._lock = threading.Lock()
        self._where: dict[bytes, tuple[int, int]] = {}
        self._records_read = 0
        self._codes: np.ndarray | None = None
        self._refresh()

    def _check_meta(self) -> None:
        """Write ``meta.json`` if there is none (whole or not at all: :mod:`meve.core.durable`),
        migrate an older format (module docstring), or refuse a folder written with another
        codebook or by a newer meve. One that cannot be read (damaged, or cut short by a crash
        before writes were atomic) cannot say which codebook the vectors used: they are dropped,
        with a warning, and re-encoded as queries need them."""
        meta_path = self.path / "meta.json"
        mine = {"format": FORMAT, "m": self.quantizer.m, "dimension": self.quantizer.dimension, "codebook": self.quantizer.digest}
        with self._file_lock():
            remove_strays(self.path)  # a meta.json a killed process was writing
            try:
                theirs = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else None
            except (OSError, ValueError) as exc:
                log.warning("meve: %r cannot be read (%s); dropping the token vectors beside it, they are re-encoded when needed", str(meta_path), exc)
                for name in ("codes.bin", "index.bin"):
                    (self.path / name).unlink(missing_ok=True)
                theirs = None
            if theirs is None:
                write_atomically(meta_path, json.dumps(mine).encode("utf-8"))
                return
            where = str(self.path)
            found = found_format("token_store", theirs.get("format") if isinstance(theirs, dict) else None, where=repr(where))
            if not isinstance(theirs, dict) or {**theirs, "format": FORMAT} != mine:
                raise StoreError(f"{where!r} holds token vectors written with {theirs}, this scorer uses {mine}; use another folder or its codebook")
            if found < FORMAT:
                self._migrate_from_1()
                write_atomically(meta_path, json.dumps(mine).encode("utf-8"))

    def _migrate_from_1(self) -> None:
        """Keep format 1's records that cannot have been cut (fewer than 254 rows); called under the file lock."""
        index = self.path / "index.bin"
        raw = index.read_bytes() if index.exists() else b""
        records = np.frombuffer(raw[: len(raw) // _RECORD.itemsize * _RECORD.itemsize], dtype=_RECORD)
        kept = records[records["rows"] < _CUT_AT]
        write_atomically(index, kept.tobytes())
        log.warning(
            "meve: the token vectors in %r were written by an earlier meve (format 1, at most %d per passage); %d passage(s) that may have been "
            "cut were dropped and are encoded again when a query needs them, %d kept (format %d now)",
            str(self.path),
            _CUT_AT,
            len(records) - len(kept),
            len(kept),
            FORMAT,
        )

    def _file_lock(self) -> AbstractContextManager[None]:
        return exclusive(self.path / "lock")

    def _rows_on_disk(self) -> int:
        codes = self.path / "codes.bin"
        return codes.stat().st_size // self.quantizer.m if codes.exists() else 0

    def _refresh(self) -> None:
        """Read the index records appended since the last look (by this or another process)."""
        index = self.path / "index.bin"
        if not index.exists():
            return
        with open(index, "rb") as fh:
            fh.seek(self._records_read * _RECORD.itemsize)
            raw = fh.read()
        records = np.frombuffer(raw[: len(raw) // _RECORD.itemsize * _RECORD.itemsize], dtype=_RECORD)
        ends = records["start"] + records["rows"]
        ok = ends <= self._rows_on_disk()  # rows are written before their record; this guards a truncated file
        starts, counts = records["start"][ok].tolist(), records["rows"][ok].tolist()
        self._where.update(zip(records["key"][ok].tolist(), zip(starts, counts, strict=True), strict=True))
        self._records_read += len(records)

    def _mapped(self, end: int) -> np.ndarray:
        if self._codes is None or len(self._codes) < end:
            rows = self._rows_on_disk()
            shape = (rows, self.quantizer.m)
            self._codes = np.memmap(self.path / "codes.bin", dtype=np.uint8, mode="r", shape=shape) if rows else np.zeros(shape, np.uint8)
        return self._codes

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bytes.fromhex(key) in self._where

    def get(self, key: str) -> np.ndarray | None:
        """The decoded (unit-row) token vectors stored under ``key``, or None."""
        return self.get_many([key])[0]

    def get_many(self, keys: list[str]) -> list[np.ndarray | None]:
        """:meth:`get` for several keys: one lock, one read of each entry's rows, one decode."""
        wanted = [bytes.fromhex(k) for k in keys]
        with self._lock:
            if any(w not in self._where for w in wanted):
                self._refresh()  # another process may have added them
            hits = [self._where.get(w) for w in wanted]
            end = max((s + r for s, r in (h for h in hits if h is not None)), default=0)
            codes = self._mapped(end)
            parts = [np.asarray(codes[s : s + r]) for s, r in (h for h in hits if h is not None)]
        if not parts:
            return [None] * len(keys)
        decoded = self.quantizer.decode(np.concatenate(parts))
        bounds = np.cumsum([0, *(len(x) for x in parts)])
        found = iter(decoded[a:b] for a, b in itertools.pairwise(bounds))
        return [next(found) if h is not None else None for h in hits]

    def put_many(self, items: list[tuple[str, np.ndarray]]) -> None:
        """Store each (key, token vectors) not stored yet."""
        with self._lock:
            todo = [(k, t) for k, t in items if bytes.fromhex(k) not in self._where]
        self.put_codes([(k, self.quantizer.encode(t)) for k, t in dict(todo).items()])

    def put_codes(self, items: list[tuple[str, np.ndarray]]) -> None:
        """Store each (key, (n, m) uint8 codes) not stored yet: rows first, then their index records."""
        with self._lock, self._file_lock():
            self._refresh()
            fresh = {bytes.fromhex(k): np.asarray(c, dtype=np.uint8) for k, c in items}
            fresh = {k: c for k, c in fresh.items() if k not in self._where}
            if not fresh:
                return
            start = self._trim()
            records = np.zeros(len(fresh), dtype=_RECORD)
            for i, (key, c) in enumerate(fresh.items()):
                records[i] = (key, start, len(c))
                start += len(c)
            append_synced(self.path / "codes.bin", np.concatenate(list(fresh.values())).tobytes())
            append_synced(self.path / "index.bin", records.tobytes())
            self._where.update(zip(fresh, zip(records["start"].tolist(), records["rows"].tolist(), strict=True), strict=True))
            self._records_read += len(records)

    def _trim(self) -> int:
        """Cut what a writer that crashed mid-append left past the last complete record (the
        next rows must start where the records say the previous ones end); returns that row."""
        end = max((s + r for s, r in self._where.values()), default=0)
        for name, size in (("codes.bin", end * self.quantizer.m), ("index.bin", self._records_read * _RECORD.itemsize)):
            f = self.path / name
            if f.exists() and f.stat().st_size > size:
                os.truncate(f, size)
        return end

    def bytes_on_disk(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())
