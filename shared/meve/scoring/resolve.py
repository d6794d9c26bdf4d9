"""Which scorer a name means, and how a MeVe runs it: the one place that knows every scorer.

Phases never ask which scorer they hold: a MeVe resolves its ``scorer=`` once, here, into a
:class:`~meve.scoring.protocols.Scoring` (passage scores, sentence scores, an optional shared pass).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from meve.core.errors import ConfigError
from meve.scoring.cosine import CosineScorer
from meve.scoring.cross_encoder import CrossEncoderScorer
from meve.scoring.embedders import default_embedder
from meve.scoring.late_interaction import LateInteractionScorer, shared_cache
from meve.scoring.meve_cross_encoder import SHIPPED, MeveCrossEncoderScorer
from meve.scoring.protocols import Embedder, ProvidesScoring, Scorer, Scoring
from meve.scoring.token_store import TokenStore

__all__ = ["SCORER_NAMES", "Models", "ScorerSpec", "make_scorer", "make_scoring", "store_scoring", "warm_up_scorer"]

#: What ``scorer=`` accepts: a name, a scorer object, a resolved Scoring, or None (the default).
ScorerSpec = Scoring | Scorer | str | None
SCORER_NAMES = ("late-interaction", "meve-cross-encoder", "meve-cross-encoder-l3", "cosine")
_ALLOWED = ", ".join(repr(n) for n in SCORER_NAMES)


def _name(spec: str | None) -> str:
    return spec if spec is not None else (os.environ.get("MEVE_SCORER") or "late-interaction")


def make_scoring(spec: ScorerSpec, embedder: Embedder) -> Scoring:
    """The scoring a MeVe over ``embedder`` runs, never a silent substitute.

    A name (or ``None``: ``$MEVE_SCORER``, else ``"late-interaction"``): ``"late-interaction"``
    shares the embedder's forward pass and scores sentences in their passage's context;
    ``"meve-cross-encoder"`` / ``"-l3"`` are meve's shipped cross-encoders; ``"cosine"`` the
    bi-encoder baseline; any other string a sentence-transformers cross-encoder name or path (one
    that cannot load raises :class:`ConfigError` naming it). A scorer object runs through the one
    protocol (:meth:`Scoring.of`) unless it provides its own (:class:`ProvidesScoring`; its shared
    pass is kept only over the embedder it was built on). A :class:`Scoring` is taken as it is,
    after checking that its shared pass makes ``embedder``'s vectors.
    """
    if isinstance(spec, Scoring):
        if spec.shared is not None and spec.shared.name != embedder.name:
            allowed = f"a Scoring whose shared pass makes the embedder's vectors ({embedder.name!r}), or one with shared=None"
            raise ConfigError("scorer", spec.shared.name, allowed)
        return spec
    if isinstance(spec, ProvidesScoring):
        own = spec.scoring()
        # A shared pass makes the vectors of the model the scorer runs; over another embedder
        # the MeVe's vectors come from that embedder, and only the sentence scoring is the scorer's.
        return own if own.shared is None or own.shared.name == embedder.name else replace(own, shared=None)
    if spec is not None and not isinstance(spec, str):
        return Scoring.of(spec)
    name = _name(spec)
    if name == "late-interaction":
        return LateInteractionScorer(embedder, cache=shared_cache(embedder)).scoring()
    if name == "cosine":
        return Scoring.of(CosineScorer(embedder))
    if name in SHIPPED:
        return MeveCrossEncoderScorer.shipped(name).scoring()
    if not name.strip():
        raise ConfigError("scorer", name, f"{_ALLOWED} or a cross-encoder name/path")
    try:
        return Scoring.of(CrossEncoderScorer(name).load())
    except Exception as exc:
        raise ConfigError("scorer", name, f"{_ALLOWED} or a loadable cross-encoder name/path (loading it failed: {type(exc).__name__}: {exc})") from exc


def make_scorer(spec: Scorer | str | None = None, embedder: Embedder | None = None) -> Scorer:
    """A scorer from a name (as :func:`make_scoring`), over ``embedder`` (default: meve's MiniLM)."""
    return make_scoring(spec, embedder if embedder is not None else default_embedder()).scorer


def store_scoring(spec: ScorerSpec, store_embedder: Embedder) -> Scoring:
    """The scoring over a user's own vector store or index, whose embedding model need not be
    meve's: the default late interaction runs meve's MiniLM (the model its calibration was fitted
    on) with no shared pass (the store makes its own vectors), ``"cosine"`` compares in the
    store's own vector space, anything else as :func:`make_scoring`."""
    if spec is not None and not isinstance(spec, str):
        return make_scoring(spec, store_embedder)
    name = _name(spec)
    if name == "late-interaction":
        return replace(make_scoring(name, default_embedder()), shared=None)
    return make_scoring(name, store_embedder)


class Models:
    """The embedder and scorer a component was given, or the defaults, resolved on first use
    (so nothing loads until a model is really needed). ``scorer`` is anything :func:`make_scoring`
    takes; ``store=True`` resolves it as :func:`store_scoring` does."""

    def __init__(self, embedder: Embedder | None = None, scorer: ScorerSpec = None, *, store: bool = False) -> None:
        self._embedder = embedder
        self._spec = scorer
        self._store = store
        self._scoring: Scoring | None = None
        self._token_dir: Path | None = None
        self._passages: Any = None
        # Threads share a component: without the lock two first calls could each build a scorer
        # (two models, two token stores), and one of them would be lost.
        self._lock = threading.RLock()

    def keep_tokens_in(self, directory: Path | None) -> None:
        """Where the default verifier keeps its token vectors (a
        :class:`~meve.scoring.token_store.TokenStore`), attached when the scorer is resolved."""
        with self._lock:
            self._token_dir = directory
            if directory is not None and self._scoring is not None:
                self._attach(self._scoring)

    def _attach(self, scoring: Scoring) -> None:
        if self._token_dir is not None and isinstance(scoring.scorer, LateInteractionScorer):
            scoring.scorer.attach(TokenStore(self._token_dir))

    @property
    def embedder(self) -> Embedder:
        """The embedder given, else meve's default (loaded on first use)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = default_embedder()
        return self._embedder

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """The embedder's vectors of passages being indexed. Over a sentence-transformers model
        (meve's default included) the same pass keeps their token vectors, in memory and in the
        on-disk cache (:func:`~meve.scoring.late_interaction.shared_cache`), so the verifier reads
        them with no model at query time, in this process or a later one; a text kept already runs
        no model. Any other embedder just encodes."""
        with self._lock:
            if self._passages is None:
                try:
                    self._passages = LateInteractionScorer(self.embedder, cache=shared_cache(self.embedder))
                except ConfigError:  # not a sentence-transformers model: no token vectors to keep
                    self._passages = False
        if self._passages is False:
            return np.asarray(self.embedder.encode(list(texts)), dtype=np.float32)
        return np.asarray(self._passages.embed_passages(list(texts)))

    def read_ahead(self, texts: Sequence[str], *, show_progress: bool = True, batch_size: int = 64) -> int:
        """Load the models, then have the verifier read ``texts`` now (a late-interaction verifier
        keeps their token vectors, in memory and on disk), so no query reads them; returns how
        many went through the model (those kept already, here or on disk, do not). Other
        verifiers read a passage with each query, so for them this only loads the model."""
        from meve.core.progress import progress_bar

        self.embedder.encode(["warm up"])
        warm_up_scorer(self.scorer)
        scorer = self.scorer
        if not isinstance(scorer, LateInteractionScorer):
            return 0
        todo = list(dict.fromkeys(texts))
        before = scorer.encoded_ahead
        with progress_bar(len(todo), desc="meve: reading passages", unit="passage", show=show_progress) as bar:
            for start in range(0, len(todo), batch_size):
                scorer.embed_passages(todo[start : start + batch_size])
                bar.update(len(todo[start : start + batch_size]))
        return scorer.encoded_ahead - before

    @property
    def scoring(self) -> Scoring:
        """The resolved scoring (resolved once, whichever thread asks first)."""
        if self._scoring is None:
            with self._lock:
                if self._scoring is None:
                    resolve = store_scoring if self._store else make_scoring
                    scoring = resolve(self._spec, self.embedder)
                    self._attach(scoring)
                    self._scoring = scoring  # published only once attached
        return self._scoring

    @property
    def scorer(self) -> Scorer:
        """The scorer of :attr:`scoring`."""
        return self.scoring.scorer


def warm_up_scorer(scorer: Scorer) -> None:
    """Load ``scorer``'s model now: through its own ``warm_up``/``load`` where it has one (scoring
    a made-up passage would keep that passage's token vectors in a persistent store like a real
    one's), else by scoring one pair."""
    own = getattr(scorer, "warm_up", None) or getattr(scorer, "load", None)
    if callable(own):
        own()
    else:
        scorer.score("warm up", ["warm up"])
