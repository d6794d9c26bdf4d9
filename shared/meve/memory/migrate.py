"""A session written by meve before 0.2.0 (memory session format 1) brought to the current format
when it is opened for writing.

What changed: builds before the 0.1.0 release (7d57c2a) stored a chat message without an id under
a hash of its role, its position in the thread and its text (:func:`meve.memory.ids.position_id`);
0.1.0 as released (49180b1) and later key it by role, text and occurrence
(:func:`meve.memory.ids.content_id`), and 0.1.0 wrote no marker either, so an unmarked session may
be keyed either way, or both (position-keyed turns first). Recording a position-keyed thread again
stored every turn a second time, and the current question was recalled as history. The
migration re-keys each turn whose id is a position id to the content id the adapters now give it
(the k-th stored copy of one role and text gets occurrence k); a turn already stored under that
content id (recorded again after an upgrade without this migration) is the same message, and
its position-keyed copy is deleted. Turn ids of any other kind (given by the caller, or made by
:meth:`MomentaryMemory.add`) are left as they are.

Crash-safe: each collection gets the new rows before losing the old ones (never an id that is
also a new one), the primary last, and the session is marked current only at the end. Each row
written under its new id records the id it came from (:data:`MOVED_FROM`), so after a crash
between the two steps the next open knows the old rows left behind for what they are
(:func:`leftovers`: deleted, their turns already stand under the new ids) and does not take
them for turns to re-key; a new id may be an old one's (occurrence k and position k hash alike),
so an id alone could not tell.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

from meve.memory.ids import content_id, position_id
from meve.memory.records import Turn

__all__ = ["MOVED_FROM", "SEARCH_GUARD", "leftovers", "moved_rows", "number_of", "rekeyed"]

log = logging.getLogger("meve")

#: Metadata of a row the migration wrote under its new id: the id it had before.
MOVED_FROM = "meve:moved_from"

# The shape of every id meve gave an id-less message, in either format: a turn id of another shape
# (the caller's, or MomentaryMemory.add's "<session>-<uuid hex>") is never searched.
_HASHED = re.compile(r"msg-[0-9a-f]{24}")

#: How many numbers are tried for one id before it is taken for one meve did not make. Not a bound
#: on thread length: the search starts at the previous turn's position, so it bounds the messages
#: between two stored turns (tool calls and the like: a few, never tens of thousands). Every id meve
#: made is the hash of its own role and text at one number, so the search ends there; only an id
#: shaped like meve's but chosen elsewhere (which matches no number) reaches this, costs about 0.1 s
#: of hashing, and is reported and kept as it is.
SEARCH_GUARD = 1 << 16


def _numbers(after: int) -> Iterator[int]:
    """after + 1, 0, after + 2, 1, ...: past the previous position, where a position id lies, and
    back over the numbers up to it, where a content id's occurrence lies, in step; then onward."""
    forward = itertools.count(after + 1)
    for back in range(after + 1):
        yield next(forward)
        yield back
    yield from forward


def number_of(turn: Turn, after: int) -> int | None:
    """The number ``turn.id`` hashes with its role and text (its position in the thread, or its
    occurrence), searched from ``after`` outward; None if it hashes none (not meve's)."""
    for n in itertools.islice(_numbers(after), SEARCH_GUARD):
        if position_id(turn.role, n, turn.text) == turn.id:
            return n
    log.warning("meve: turn id %r has the shape of meve's ids but is not one; it is kept as it is", turn.id)
    return None


def rekeyed(turns: Sequence[Turn]) -> dict[str, str | None]:
    """Format-1 turn id -> its content id, or None where a turn that stays holds that content id
    (the same message stored twice: delete). ``turns``: every stored turn, in time order.

    One hash serves both formats (``position_id(r, p, t) == content_id(r, t, p)``), so an id meve
    made is the hash of its role and text at one number, found by :func:`number_of`: a position or
    an occurrence. It is the content id already when the number is the turn's place among the same
    role and text (the k-th copy: occurrence k). It is read as a position only where a thread's
    positions can be: past the previous position (they grow in time order), and at least the number
    of meve's ids before it (each earlier turn of the thread took a position of its own). Otherwise
    it is an occurrence, which 0.1.0 counted over unstored copies too (a tool call saying the same
    words), and stays. An edited turn stays: its id hashes the text it had."""
    rank: dict[tuple[str, str], int] = {}
    moved: list[tuple[str, str]] = []
    kept: set[str] = set()
    last, hashed = -1, 0
    for t in turns:
        r = rank[t.role, t.text] = rank.get((t.role, t.text), -1) + 1
        target = content_id(t.role, t.text, r)
        ours = bool(_HASHED.fullmatch(t.id)) and t.edited is None
        n = number_of(t, last) if ours and t.id != target else None
        earlier, hashed = hashed, hashed + ours
        if n is None or n <= last or n < earlier:  # a content id already, or an id meve did not make
            kept.add(t.id)
            continue
        last = n
        moved.append((t.id, target))
    out: dict[str, str | None] = {}
    for old, new in moved:
        out[old] = None if new in kept else new
        kept.add(new)
    return out


def moved_rows(rows: dict[str, list[Any]], plan: dict[str, str | None]) -> dict[str, list[Any]]:
    """The rows of one collection (ids, documents, metadatas, embeddings) to write under their new
    ids, each recording its old one (:data:`MOVED_FROM`): the rows ``plan`` renames, not the
    duplicates it deletes."""
    keep = [i for i, pid in enumerate(rows["ids"]) if plan.get(pid) is not None]
    out = {k: [v[i] for i in keep] for k, v in rows.items()}
    out["metadatas"] = [{**(m or {}), MOVED_FROM: pid} for pid, m in zip(out["ids"], out["metadatas"], strict=True)]
    out["ids"] = [plan[pid] for pid in out["ids"]]
    return out


def leftovers(ids: Sequence[str], metadatas: Sequence[Any]) -> set[str]:
    """The rows of one collection a migration cut short left behind: ids that some row written
    under its new id came from, and that were not themselves overwritten by such a row."""
    moved = {pid for pid, m in zip(ids, metadatas, strict=True) if (m or {}).get(MOVED_FROM)}
    return {str(m[MOVED_FROM]) for m in metadatas if (m or {}).get(MOVED_FROM)} - moved
