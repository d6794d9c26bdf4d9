"""The one place meve reaches into Chroma's process-wide instances (``SharedSystemClient``, not a
public API): which instance runs on a directory and with what settings, the settings of one meve
starts. chromadb's upper bound in pyproject.toml is set by what is read here."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

__all__ = ["open_system", "running_settings", "shared_settings"]


# Settings that only decide what Chroma reports about itself, not what it stores or how.
_TELEMETRY = frozenset({"anonymized_telemetry", "chroma_product_telemetry_impl", "chroma_telemetry_impl"})


def shared_settings() -> Any:
    """Chroma's default ``Settings()`` for an instance meve starts, comparing equal to an app's
    settings that differ only in telemetry: Chroma keeps one instance per directory and refuses a
    second client there whose settings differ ("An instance of Chroma already exists ... with
    different settings"), so an app whose ``PersistentClient(path, Settings(anonymized_telemetry=False))``
    comes after meve's shares meve's instance; one that differs in anything stored gets an error
    naming the setting and the fix instead of Chroma's."""
    return _settings_class()()


@functools.cache
def _settings_class() -> Any:
    """The Settings subclass :func:`shared_settings` makes (defined once: chromadb is imported lazily)."""
    from chromadb.config import Settings

    class MeVeSettings(Settings):  # type: ignore[misc]
        def __eq__(self, other: object) -> bool:
            if not isinstance(other, Settings):
                return NotImplemented
            mine, theirs = _fields(self), _fields(other)
            differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k) and k not in _TELEMETRY)
            if differ:
                where = mine.get("persist_directory") if mine.get("is_persistent") else "memory"
                raise ValueError(
                    f"meve opened Chroma at {where!r} with Chroma's default settings and this client's differ in {', '.join(differ)}; "
                    "Chroma runs one instance per directory, so create your client before meve's (meve then uses its settings) "
                    "or pass it to meve (client=... / chroma_client=...)"
                )
            return True

        def __ne__(self, other: object) -> bool:
            equal = self.__eq__(other)
            return equal if equal is NotImplemented else not equal

        __hash__ = object.__hash__

    return MeVeSettings


def _fields(settings: Any) -> dict[str, Any]:
    dump = getattr(settings, "model_dump", None) or settings.dict
    return dict(dump())


def running_settings(identifier: str) -> Any:
    """The settings of the Chroma instance this process runs under ``identifier`` ("ephemeral"), or None."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = getattr(SharedSystemClient, "_identifier_to_system", {}).get(identifier)
    return system.settings if system is not None else None


def open_system(where: Path) -> tuple[str, Any] | None:
    """(path as spelled, settings) of a Chroma instance this process already runs on ``where``, if any.

    Chroma refuses a second client on one directory with different settings ("An instance of
    Chroma already exists"); reusing the first one's settings shares its instance instead.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    systems = getattr(SharedSystemClient, "_identifier_to_system", {})
    target = where.resolve()
    for system in list(systems.values()):
        directory = getattr(system.settings, "persist_directory", None)
        if getattr(system.settings, "is_persistent", False) and directory and Path(directory).expanduser().resolve() == target:
            return str(directory), system.settings
    return None
