"""Embedders: the bundled sentence-transformers bi-encoder and a cache that never embeds a text twice."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from meve.core.errors import ConfigError, StoreError
from meve.scoring.devices import check_device, check_precision, resolve_device
from meve.scoring.protocols import Embedder
from meve.scoring.registry import INSTALL_HINT, default_model_path, registry

__all__ = ["CachedEmbedder", "SentenceTransformerEmbedder", "default_embedder", "embedder_dimension", "encode_checked", "encode_windows"]


class SentenceTransformerEmbedder:
    """A sentence-transformers bi-encoder; the default is all-MiniLM-L6-v2, offline.

    ``model`` is a path, a model name, or a loaded ``SentenceTransformer``; it loads on first use.
    ``device``: "auto" (CUDA, then Apple MPS, then the CPU, decided at load), or a device name.
    ``precision``: "float32", or "int8" (the linear layers in int8 on the CPU, :mod:`meve.scoring.int8`;
    "auto" then means the CPU, and the name says int8, so a collection built with it is not
    read with float32 vectors).
    """

    def __init__(self, model: Any = None, *, device: str = "auto", batch_size: int = 64, name: str | None = None, precision: str = "float32") -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise ConfigError("batch_size", batch_size, "an int in [1, 4096] (texts per forward pass)")
        self.requested_device = check_device(device)
        self.precision = check_precision(precision, device)
        if precision == "int8" and model is not None and not isinstance(model, str):
            raise ConfigError("precision", precision, '"float32" for a loaded model you pass (int8 quantises the copy meve loads: pass its path or name)')
        self._given = model
        self._device: str | None = "cpu" if precision == "int8" else None
        self.batch_size = batch_size
        if model is None:
            base = "all-MiniLM-L6-v2"
        elif isinstance(model, str):
            base = os.path.basename(model.rstrip("/")) or model
        else:
            base = str((getattr(model, "model_card_data", None) and model.model_card_data.base_model) or type(model).__name__)
        self.name = name or (f"{base} (int8)" if precision == "int8" else base)

    @property
    def device(self) -> str:
        """The device the model runs on: a loaded model's own, else ``device`` resolved once."""
        if self._given is not None and not isinstance(self._given, str):
            return str(getattr(self._given, "device", "cpu"))
        if self._device is None:
            self._device = resolve_device(self.requested_device)
        return self._device

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (shared by every handle on the same path, precision and device)."""
        if self._given is not None and not isinstance(self._given, str):
            return self._given
        path = self._given if isinstance(self._given, str) else default_model_path()

        def factory() -> Any:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover
                raise ImportError(f"SentenceTransformerEmbedder needs sentence-transformers; {INSTALL_HINT}") from exc
            model = SentenceTransformer(path, device=self.device)
            if self.precision == "int8":
                from meve.scoring.int8 import quantize_linears

                quantize_linears(model)
            return model

        return registry.get("st", f"{path}|{self.precision}", self.device, factory, label=self.name)

    @property
    def identity(self) -> str | None:
        """Which weights this is, from its files (:func:`meve.scoring.token_cache.model_identity`),
        without loading it; None for a loaded model handed in. Computed once."""
        if not hasattr(self, "_identity"):
            from meve.scoring.token_cache import model_identity

            path = self._given if isinstance(self._given, str) else (default_model_path() if self._given is None else None)
            self._identity = model_identity(path, self.precision)
        return self._identity

    @property
    def dimension(self) -> int:
        """The length of the vectors this model makes."""
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)

    def encode_windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's later windows' unit vectors (:class:`meve.scoring.token_pass.Pass`; none for a
        text that fits the model's window): only the longer texts run the model."""
        from meve.scoring.batching import default_batch_tokens
        from meve.scoring.token_pass import forward
        from meve.scoring.windows import frame, text_pieces

        model = self.model
        before, after = frame(model.tokenizer)
        size = model.max_seq_length - before - after
        out = [np.zeros((0, self.dimension), dtype=np.float32) for _ in texts]
        long = [i for i, p in enumerate(text_pieces(model.tokenizer, [t.strip() for t in texts])) if len(p) > size]
        if long:
            windows = forward(model, [texts[i] for i in long], max_items=self.batch_size, max_tokens=default_batch_tokens(self.device)).windows
            for i, w in zip(long, windows, strict=True):
                out[i] = w
        return out


class CachedEmbedder:
    """Never embeds the same text twice while it is cached: an LRU of sha1(text) -> vector in front
    of any Embedder, bounded by bytes (keys are digests, so long texts cost no more than short ones)."""

    _ENTRY_OVERHEAD = 200  # dict slot, digest bytes object and ndarray header, measured roughly

    def __init__(self, inner: Embedder, *, max_bytes: int = 128 * 1024 * 1024) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ConfigError("max_bytes", max_bytes, "an int >= 0 (bytes of cached vectors; 0 disables the cache)")
        self.inner = inner
        self.name = inner.name
        self.max_bytes = max_bytes
        self.bytes = 0
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually sent to the model

    @property
    def dimension(self) -> int:
        """The inner embedder's dimension."""
        return embedder_dimension(self.inner)

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The inner embedder's vectors, each distinct text sent to it at most once while cached."""
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:  # hits are copied out here, so an eviction by another thread cannot lose them
            for key in keys:
                vec = self._cache.get(key)
                if vec is not None:
                    found[key] = vec
                    self._cache.move_to_end(key)
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in found))
        if missing:
            vecs = np.asarray(self.inner.encode([t for _, t in missing]), dtype=np.float32)
            self._store(missing, vecs, found)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _store(self, missing: list[tuple[bytes, str]], vecs: np.ndarray, found: dict[bytes, np.ndarray]) -> None:
        with self._lock:
            self.encoded += len(missing)
            for (key, _), vec in zip(missing, vecs, strict=True):
                found[key] = vec
                if key not in self._cache and self.max_bytes:
                    self._cache[key] = vec
                    self.bytes += vec.nbytes + self._ENTRY_OVERHEAD
            while self.bytes > self.max_bytes and self._cache:
                _, old = self._cache.popitem(last=False)
                self.bytes -= old.nbytes + self._ENTRY_OVERHEAD


def default_embedder() -> CachedEmbedder:
    """The process-wide default: cached all-MiniLM-L6-v2 on CPU (kept by the model registry)."""
    embedder: CachedEmbedder = registry.singleton("default-embedder", lambda: CachedEmbedder(SentenceTransformerEmbedder()))
    return embedder


def embedder_dimension(embedder: Embedder) -> int:
    """An embedder's vector length: its ``dimension`` attribute, else measured on one text."""
    dim = getattr(embedder, "dimension", None)
    if isinstance(dim, int):
        return dim
    return int(embedder.encode(["dimension probe"]).shape[1])


def encode_windows(embedder: Embedder, texts: Sequence[str]) -> list[np.ndarray] | None:
    """Each text's later windows' vectors where ``embedder`` can make them (meve's
    sentence-transformers embedder, behind a cache or not, or any with an ``encode_windows``
    method); None where it cannot (its passages are found by their first window and BM25)."""
    while isinstance(embedder, CachedEmbedder):
        embedder = embedder.inner
    fn = getattr(embedder, "encode_windows", None)
    return list(fn(list(texts))) if callable(fn) else None


def encode_checked(embedders: Sequence[Embedder], texts: Sequence[str], dims: Sequence[int]) -> list[np.ndarray]:
    """Each embedder's float32 vectors of ``texts``; a StoreError, before anything is stored, when
    one returns another length than ``dims`` gives (that of the collection it writes to)."""
    vecs = [np.asarray(e.encode(list(texts)), dtype=np.float32) for e in embedders]
    for v, dim, e in zip(vecs, dims, embedders, strict=True):
        if v.shape[1] != dim:
            raise StoreError(f"embedder {e.name!r} returned dimension {v.shape[1]}, expected {dim}")
    return vecs
