"""MeVeConfig fields given as keyword arguments to a framework component (``t_max=256``): the one
conversion both adapters use (:mod:`meve.integration` re-exports it), so every component takes
every field by its name, checked by MeVeConfig's own validation before anything loads.

A keyword wins over the same field of ``config=`` (as a flag wins over ``meve query --config``);
one setting given twice under two names with different values is refused, and so is a value a
component cannot run with (a single-phase postprocessor's fixed settings)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from meve.core.config import MeVeConfig, check_names
from meve.core.errors import ConfigError
from meve.pipeline.config_file import ConfigLike, as_config

__all__ = ["CONFIG_FIELDS", "builder_kwargs", "config_from", "run_overrides"]

CONFIG_FIELDS: tuple[str, ...] = tuple(MeVeConfig.__dataclass_fields__)


def _given(options: dict[str, Any], aliases: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """Pop the settings out of ``options``: config field -> (the name it was given under, value)."""
    out: dict[str, tuple[str, Any]] = {}
    for name in [k for k in options if k in aliases or k in CONFIG_FIELDS]:
        field, value = aliases.get(name, name), options.pop(name)
        if field in out and out[field][1] != value:
            raise ConfigError(name, value, f"{out[field][1]!r}, the value given as {out[field][0]} (both name {field!r}); give it once")
        out[field] = (name, value)
    return out


def config_from(
    options: dict[str, Any],
    base: ConfigLike | None = None,
    *,
    owner: str,
    others: Collection[str] = (),
    aliases: Mapping[str, str] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> MeVeConfig:
    """Pop every MeVeConfig field (or a name in ``aliases``: the component's own name -> the
    field, e.g. ``{"theta": "theta_redundancy"}``) out of ``options`` (a component's keyword
    arguments) into a copy of ``base`` (a MeVeConfig, a dict of its fields or a JSON file of them:
    :func:`as_config`), and apply ``fixed`` (what the component always runs with). A keyword that
    is none of these nor one of ``others`` is refused, naming the nearest valid one; a bad value
    is refused by MeVeConfig's validation under the name it was given."""
    aliases, fixed = dict(aliases or {}), dict(fixed or {})
    check_names(owner, options, set(CONFIG_FIELDS) | set(aliases) | set(others))
    given = _given(options, aliases)
    for field, (name, value) in given.items():
        if field in fixed and value != fixed[field]:
            raise ConfigError(name, value, f"{fixed[field]!r}: {owner} always runs with it (MeVePostprocessor / MeVeCompressor take any setting)")
    try:
        return as_config(base).replace(**{**{field: value for field, (_, value) in given.items()}, **fixed})
    except ConfigError as exc:
        name = given[exc.field][0] if exc.field in given else exc.field
        raise ConfigError(name, exc.value, exc.allowed) from None


def run_overrides(options: dict[str, Any], config: ConfigLike | None, current: MeVeConfig, *, owner: str, others: Collection[str] = ()) -> dict[str, Any]:
    """For a component wrapping a ready MeVe (whose ``current`` config it must not change): the
    fields its every run passes as overrides, validated now. With ``config=``, all of that
    config's fields (the keywords over it); else just the keywords, so a later change of the
    wrapped MeVe's config still shows. Pops them out of ``options`` as :func:`config_from` does."""
    fields = set(CONFIG_FIELDS) & set(options)
    chosen = config_from(options, config if config is not None else current, owner=owner, others=others)
    picked = chosen.to_dict() if config is not None else {f: getattr(chosen, f) for f in fields}
    return {k: v for k, v in picked.items() if v is not None}


def builder_kwargs(kwargs: Mapping[str, Any], build: Callable[..., Any], owner: str) -> dict[str, Any]:
    """Keyword arguments for a MeVe constructor (``MeVe.from_texts``, ``MeVe.from_documents``):
    MeVeConfig fields folded into ``config``, anything the constructor does not take refused by
    name (with the nearest valid one) before a corpus is embedded."""
    params = inspect.signature(build).parameters
    allowed = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    rest = dict(kwargs)
    has_fields = any(key in CONFIG_FIELDS for key in rest)
    config = config_from(rest, rest.pop("config", None), owner=owner, others=allowed)
    return {**rest, "config": config} if has_fields or "config" in kwargs else rest
