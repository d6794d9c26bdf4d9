"""The version of every format meve persists, and the one check each reader makes on open.

Why one table: an upgrade that changes what a file or collection holds must say so where it is
read, or an older meve's data is taken as current (a token store of truncated vectors scored
long passages wrong, and crashed sentence pruning). Each reader compares the version it finds
with :data:`FORMATS`: the same is read; an older one is migrated in place by that reader
(docs/upgrade.md says what each migration does) or refused naming the command that rebuilds it;
a newer one, written by a later meve, is always refused. CHANGELOG.md names every change here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from meve.core.errors import StoreError

__all__ = ["FORMATS", "FormatError", "found_format"]

#: What each persisted thing's current format is (the number its files or collections carry).
FORMATS: Mapping[str, int] = MappingProxyType(
    {
        # 2: every word piece of a passage (windows); 1 kept at most 254 per passage.
        "token_store": 2,
        # 1: the framework paths' token vectors per model, int8 rows, fp16 scales and the dense vector (0.6.0).
        "token_cache": 1,
        # 1: the layout since snapshots began (no marker before 0.2.0; same arrays and tokenizer).
        "bm25_snapshot": 1,
        # 2: id-less chat messages keyed by content and occurrence, every turn with ts and okey;
        # 1 (no marker): keyed by position in the thread (builds before 0.1.0's release), or already
        # by content (0.1.0 as released).
        "memory_session": 2,
        # 1: a long passage's later windows, one vector each, in "<collection>.windows" (0.4.0);
        # a collection built before has none (it opens with a warning; MeVe.add_windows makes them).
        "passage_windows": 1,
        # 1: MeVeConfig's fields as JSON (files written before 0.2.0 carry no marker and are the same).
        "config_file": 1,
    }
)


class FormatError(StoreError):
    """Stored data in a format this meve cannot read as it is (newer than it knows, or unreadable)."""


def found_format(kind: str, value: object, *, where: str, unmarked: int = 1) -> int:
    """The format ``value`` (what a file or collection says, None where it says nothing, i.e.
    written before markers: ``unmarked``) as an int no newer than this meve's; FormatError naming
    ``where`` otherwise."""
    current = FORMATS[kind]
    if value is None:
        return unmarked
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormatError(f"{where} says its {kind.replace('_', ' ')} format is {value!r}; expected an int from 1 to {current}")
    if value > current:
        raise FormatError(
            f"{where} was written by a newer meve ({kind.replace('_', ' ')} format {value}; this meve reads up to {current}); "
            "upgrade meve (pip install -U meve), or point this one at another folder"
        )
    return value
