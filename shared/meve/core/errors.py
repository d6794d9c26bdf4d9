"""One error family for everything meve rejects.

Every error subclasses :class:`ValueError` so callers that already catch
``ValueError`` keep working, and every message names the bad value and what is
allowed instead.
"""

from __future__ import annotations

from typing import Any


class MeVeError(ValueError):
    """Base class of every error meve raises on purpose."""


class ConfigError(MeVeError):
    """A configuration field holds a value outside what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field}={value!r} is not allowed: expected {allowed}")


class InputError(MeVeError):
    """A query, text, id or other call argument is unusable."""


class StoreError(MeVeError):
    """The vector store cannot be used as asked (e.g. embedding dimension mismatch)."""
