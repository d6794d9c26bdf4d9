"""meve's logger and the two switches every layer shares: one-time warnings and ``MEVE_VERBOSE``."""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["log", "verbose", "warn_once"]

log = logging.getLogger("meve")

_warned: set[str] = set()
_warn_lock = threading.Lock()


def warn_once(key: str, message: str) -> None:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(message)


def verbose() -> bool:
    """Third-party progress bars and load messages are shown only when ``MEVE_VERBOSE=1``."""
    return os.environ.get("MEVE_VERBOSE", "").strip().lower() in ("1", "true", "yes")
