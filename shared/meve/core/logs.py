"""meve's logger and the two switches every layer shares: one-time warnings and ``MEVE_VERBOSE``."""

from __future__ import annotations

import hashlib
import logging
import os
import threading

__all__ = ["log", "query_label", "verbose", "warn_once"]

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


def query_label(text: str) -> str:
    """How a log line above DEBUG names a user's query: a short digest and its length, never its
    words (a query can hold what its user would not have written to a log); the words go to a
    DEBUG line of their own (issue 78 #10)."""
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    log.debug("meve: query %s is %r", digest, text)
    return f"query {digest} ({len(text)} characters)"
