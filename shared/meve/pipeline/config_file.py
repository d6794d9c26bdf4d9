"""A MeVeConfig from what a user holds: the record itself, a dict of its fields, or the path of a
JSON file of its fields (what ``meve tune --out`` writes). ``MeVe(config=...)``, its
constructors, ``meve query --config`` and both frameworks' adapters read a config through here.

A file carries ``"format"`` (:data:`meve.core.formats.FORMATS`); one without it predates the
marker and holds the same fields (format 1); one from a newer meve is refused."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from meve.core.config import MeVeConfig
from meve.core.durable import write_atomically
from meve.core.errors import ConfigError, InputError
from meve.core.formats import FORMATS, found_format

__all__ = ["ConfigLike", "as_config", "read_config", "write_config"]

#: What ``config=`` accepts.
ConfigLike: TypeAlias = "MeVeConfig | Mapping[str, Any] | str | os.PathLike[str]"


def read_config(path: str | os.PathLike[str]) -> MeVeConfig:
    """The MeVeConfig in a JSON file of its fields; a refusal names the file and what is wrong."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no such config file (write one with `meve tune --out`, or json.dump(config.to_dict(), ...))") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{p}: expected a JSON object of MeVeConfig fields, got {type(raw).__name__}")
    found_format("config_file", raw.pop("format", None), where=str(p))
    try:
        return MeVeConfig(**raw)
    except ConfigError as exc:
        raise ConfigError(exc.field, exc.value, f"{exc.allowed} (in {p})") from None


def as_config(config: Any) -> MeVeConfig:
    """``config`` as a MeVeConfig: None gives the defaults; a MeVeConfig is kept; a dict is its
    fields; a str or path names a JSON file of its fields."""
    if config is None:
        return MeVeConfig()
    if isinstance(config, MeVeConfig):
        return config
    if isinstance(config, Mapping):  # a config file's JSON, loaded by the caller, may carry its format
        fields = dict(config)
        found_format("config_file", fields.pop("format", None), where="the config given")
        return MeVeConfig(**fields)
    if isinstance(config, str | os.PathLike):
        return read_config(config)
    raise InputError(f"config must be a MeVeConfig, a dict of its fields or the path of a JSON file of them, got {type(config).__name__}")


def write_config(config: MeVeConfig, path: str | os.PathLike[str]) -> Path:
    """Write ``config``'s fields as JSON (read back by :func:`as_config`); returns the path."""
    out = Path(path)
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    fields = {"format": FORMATS["config_file"], **config.to_dict()}
    write_atomically(out, (json.dumps(fields, indent=1) + "\n").encode("utf-8"))
    return out
