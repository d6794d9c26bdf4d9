"""The ids of chat messages that come without one, in each memory session format
(:data:`meve.core.formats.FORMATS`): the current one, by content and occurrence, and format 1's,
by position in the thread, which :mod:`meve.memory.migrate` recognises to re-key."""

from __future__ import annotations

import hashlib

__all__ = ["content_id", "position_id"]


def content_id(role: str, text: str, occurrence: int = 0) -> str:
    """The id of a message that has none: a hash of its role and text, and of how many messages
    without an id, with the same role and text, come before it in the messages given (``occurrence``).

    Not its position: a trimmed or sliding-window history shifts every position, and stored the
    same turns again under new ids. Not the previous message either: the first message of a
    window has lost its predecessor, so each shift would store it again. By content, a shifted
    window maps the same turns to the same ids, and a user who says "ok" twice in view is stored
    twice ("ok" #0 and #1). The cost: once the earlier copy has left the window, a repeat maps
    to it and is not stored again. The same in every process (``hash()`` is salted per process)."""
    return _digest(role, occurrence, text)


def position_id(role: str, position: int, text: str) -> str:
    """Format 1's id of a message without one (meve before 0.2.0): role, position in the thread, text."""
    return _digest(role, position, text)


def _digest(role: str, number: int, text: str) -> str:
    digest = hashlib.sha256(f"{role}\x00{number}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"msg-{digest[:24]}"
