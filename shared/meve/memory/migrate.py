"""A session written by meve before 0.2.0 (memory session format 1) brought to the current format
when it is opened for writing.

What changed: a chat message without an id was stored under a hash of its role, its position in
the thread and its text (:func:`meve.memory.ids.position_id`); it is now keyed by role, text and
occurrence (:func:`meve.memory.ids.content_id`). Recording an old thread again under the new ids
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

from collections.abc import Sequence
from typing import Any

from meve.memory.ids import content_id, position_id
from meve.memory.records import Turn

__all__ = ["MOVED_FROM", "POSITION_SLACK", "leftovers", "moved_rows", "position_of", "rekeyed"]

#: Metadata of a row the migration wrote under its new id: the id it had before.
MOVED_FROM = "meve:moved_from"

# Room for the messages a thread holds but never stored (system, tool, empty) between stored turns.
POSITION_SLACK = 512


def position_of(turn: Turn, after: int, bound: int) -> int | None:
    """The thread position after ``after`` whose format-1 id is ``turn.id``, or None. Only
    forward: a thread's stored turns come in time order, so their positions grow."""
    for position in range(after + 1, bound):
        if position_id(turn.role, position, turn.text) == turn.id:
            return position
    return None


def rekeyed(turns: Sequence[Turn]) -> dict[str, str | None]:
    """Format-1 turn id -> its content id, or None where a turn that stays holds that content id
    (the same message stored twice: delete). ``turns``: every stored turn, in time order.

    One hash serves both formats (``position_id(r, p, t) == content_id(r, t, p)``), so an id is
    read as its content id when it is the one its place among the same role and text gives
    (the k-th copy: occurrence k), and as a position id otherwise, where one is found past the
    previous one's position."""
    bound = 4 * len(turns) + POSITION_SLACK  # a thread of n stored turns, with room for the unstored messages between them
    rank: dict[tuple[str, str], int] = {}
    moved: list[tuple[str, str]] = []
    kept: set[str] = set()
    last = -1
    for t in turns:
        r = rank[t.role, t.text] = rank.get((t.role, t.text), -1) + 1
        target = content_id(t.role, t.text, r)
        position = None if not t.id.startswith("msg-") or t.id == target else position_of(t, last, bound)
        if position is None:  # a content id already, or an id the caller chose
            kept.add(t.id)
            continue
        last = position
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
