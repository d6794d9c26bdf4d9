"""The verifier's token vectors in memory: int8 rows with one fp16 scale each, by text, shared by
every component over one model in a process and backed by that model's on-disk cache
(:mod:`meve.scoring.token_cache`), so a passage is read by the model once."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from meve.core.errors import ConfigError, StoreError
from meve.core.logs import log
from meve.scoring.embedders import CachedEmbedder, SentenceTransformerEmbedder
from meve.scoring.registry import registry
from meve.scoring.token_cache import DiskTokens, open_for

__all__ = ["TokenVectorCache", "dequantize", "quantize", "sentence_transformer_of", "shared_cache", "text_key", "warn_query_time"]


def quantize(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows with one fp16 scale each: a quarter of fp32, and no measurable AUC loss (BENCHMARKS.md)."""
    scale = np.abs(tokens).max(axis=1, keepdims=True) / 127.0
    scale = np.where(scale == 0, 1.0, scale)
    return np.round(tokens / scale).astype(np.int8), scale.astype(np.float16)


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 rows :func:`quantize` stored (scaled in place: one array, not two, per read)."""
    out = np.asarray(q).astype(np.float32)
    out *= np.asarray(scale, dtype=np.float32)
    return out


def text_key(text: str) -> str:
    """The cache key of a text: its sha1, hex."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class TokenVectorCache:
    """Token vectors by text (sha1 key), int8-quantised, least recently used evicted past ``max_bytes``;
    with each text's dense vector when the pass that made them kept it (:meth:`put_vector`), so a
    text seen by an earlier query goes through no model again. ``disk`` (a function returning a
    :class:`~meve.scoring.token_cache.DiskTokens` or None, called once, when first needed: it may
    read the model's dimensions) keeps what :meth:`keep` is given across processes and restarts,
    and serves what memory lacks."""

    def __init__(self, max_bytes: int = 512 * 2**20, *, disk: Callable[[], DiskTokens | None] | None = None) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ConfigError("cache_bytes", max_bytes, "an int >= 0 (bytes of token vectors kept in memory)")
        self.max_bytes = max_bytes
        self._disk_factory = disk
        self._disk: DiskTokens | None = None
        self._disk_lock = threading.Lock()
        self._rows: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.owner: Any = None  # what keys this cache, kept alive while it is (a loaded model handed in)
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._rows

    def quantized(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """A snapshot of every entry as stored: (key, int8 rows, fp16 scales), oldest first."""
        with self._lock:
            return [(k, q, s) for k, (q, s) in self._rows.items()]

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            self._rows.move_to_end(key)
        return dequantize(*row)

    def vector(self, key: str) -> np.ndarray | None:
        """The dense vector kept beside ``key``'s token vectors, if any."""
        with self._lock:
            return self._vectors.get(key) if key in self._rows else None

    @property
    def disk(self) -> DiskTokens | None:
        """The on-disk tier, opened on first use (one thread opens it, the others wait); None where
        there is none. One that cannot be opened (another model's folder there, a folder this user
        cannot write) is said at WARNING with the fix, and this process goes on without it."""
        with self._disk_lock:
            if self._disk_factory is not None:
                try:
                    self._disk = self._disk_factory()
                except (StoreError, OSError) as exc:
                    log.warning("meve: the on-disk token-vector cache is off in this process: %s", exc)
                    self._disk = None
                self._disk_factory = None
            return self._disk

    def get_many(self, keys: Sequence[str]) -> list[np.ndarray | None]:
        """:meth:`get` for each key, what memory lacks read from disk (and kept in memory)."""
        found = [self.get(k) for k in keys]
        read = self._from_disk([k for k, f in zip(keys, found, strict=True) if f is None])
        return [f if f is not None else (dequantize(*hit[:2]) if (hit := read.get(k)) is not None else None) for k, f in zip(keys, found, strict=True)]

    def vectors(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Key -> dense vector for the keys whose vector is kept, in memory or on disk."""
        out = {k: v for k in dict.fromkeys(keys) if (v := self.vector(k)) is not None}
        read = self._from_disk([k for k in dict.fromkeys(keys) if k not in out])
        return {**out, **{k: hit[2] for k, hit in read.items()}}

    def _from_disk(self, keys: Sequence[str]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The entries of ``keys`` the disk tier holds (int8 rows, scales, dense vector), kept in memory too."""
        if not keys or self.disk is None:
            return {}
        read = {k: hit for k, hit in zip(keys, self.disk.get_many(keys), strict=True) if hit is not None}
        if read:
            self.keep(list(read), [hit[:2] for hit in read.values()], np.stack([hit[2] for hit in read.values()]), disk=False)
        return read

    def keep(self, keys: Sequence[str], rows: Sequence[tuple[np.ndarray, np.ndarray]], vecs: np.ndarray | None, *, disk: bool = True) -> None:
        """Keep each key's int8 rows and scales (and dense vector): in memory, and on disk where
        ``disk`` is True, there is a disk tier and the vector is given (a disk entry always has one)."""
        for i, (key, (q, scale)) in enumerate(zip(keys, rows, strict=True)):
            self.put_quantized(key, q, scale)
            if vecs is not None:
                self.put_vector(key, vecs[i])
        if disk and vecs is not None and self.disk is not None:
            self.disk.put_many([(k, q, scale, v) for k, (q, scale), v in zip(keys, rows, vecs, strict=True)])

    def put_vector(self, key: str, vec: np.ndarray) -> None:
        """Keep ``vec`` (float32) beside ``key``'s token vectors (which must be cached), counted in ``bytes``."""
        with self._lock:
            if key in self._rows and key not in self._vectors:
                self._vectors[key] = vec
                self.bytes += vec.nbytes
                self._evict()

    def info(self) -> dict[str, int]:
        """What the cache holds and how it served: entries, bytes, max_bytes, hits, misses."""
        with self._lock:
            return {"entries": len(self._rows), "bytes": self.bytes, "max_bytes": self.max_bytes, "hits": self.hits, "misses": self.misses}

    def _evict(self) -> None:
        while self.bytes > self.max_bytes and self._rows:
            old, (oq, os_) = self._rows.popitem(last=False)
            vec = self._vectors.pop(old, None)
            self.bytes -= oq.nbytes + os_.nbytes + (vec.nbytes if vec is not None else 0)

    def put(self, key: str, tokens: np.ndarray) -> None:
        self.put_quantized(key, *quantize(np.asarray(tokens, dtype=np.float32)))

    def put_quantized(self, key: str, q: np.ndarray, s: np.ndarray) -> None:
        """An entry already in the stored form (see :meth:`quantized`), evicting past ``max_bytes``."""
        size = q.nbytes + s.nbytes
        with self._lock:
            old = self._rows.pop(key, None)
            if old is not None:
                vec = self._vectors.pop(key, None)
                self.bytes -= old[0].nbytes + old[1].nbytes + (vec.nbytes if vec is not None else 0)
            if size > self.max_bytes:
                return
            self._rows[key] = (q, s)
            self.bytes += size
            self._evict()


def sentence_transformer_of(embedder: Any) -> Any:
    """The sentence-transformers model behind a meve embedder (unwrapping CachedEmbedder)."""
    inner = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
    if not isinstance(inner, SentenceTransformerEmbedder):
        raise ConfigError(
            "embedder",
            getattr(embedder, "name", type(embedder).__name__),
            "a SentenceTransformerEmbedder (late interaction needs its token embeddings); pass scorer='cosine' or a cross-encoder for other embedders",
        )
    return inner


_WARNED: set[str] = set()


def warn_query_time(model: str, count: int, on_disk: bool) -> None:
    """Say once per model in a process that passages are being read by the model at query time."""
    if model in _WARNED:
        return
    _WARNED.add(model)
    kept = "memory and the on-disk cache keep them" if on_disk else "memory keeps them for this process only: MEVE_CACHE_DIR is off"
    log.warning(
        "meve: the verifier is reading %d passage(s) with %s at query time (each once: %s). To read them at ingestion instead, "
        "index with meve's embeddings (llamaindex_meve.MeVeEmbedding, langchain_meve.MeVeEmbeddings), or call warm_up(...) "
        "on the meve component with its nodes or documents first",
        count,
        model,
        kept,
    )


def shared_cache(embedder: Any) -> TokenVectorCache:
    """The process's token-vector cache for ``embedder``'s model, bounded at 512 MiB in memory and
    backed by the on-disk cache of that model (:mod:`meve.scoring.token_cache`): a text verified
    or indexed by one component (the embeddings an index was built with, a postprocessor, a
    compressor, a retriever) is not encoded again by the next one over the same model, nor by a
    new process. Keyed by the model's identity (its files), not its name: two checkpoints in
    folders of one name never read each other's vectors."""
    st = sentence_transformer_of(embedder)
    identity = st.identity

    def disk() -> DiskTokens | None:
        model = st.model
        return open_for(identity, int(model[0].auto_model.config.hidden_size), st.dimension)

    key = identity if identity is not None else f"loaded-model-{id(st.model)}"
    cache: TokenVectorCache = registry.singleton(f"token-cache:{key}", lambda: TokenVectorCache(disk=disk))
    if identity is None:
        cache.owner = st.model  # keeps the model alive, so its id() is never another model's key
    return cache
