"""What may be stored as a turn: the validation of one item, and of a batch against what is stored."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from meve.core.errors import InputError
from meve.core.records import check_metadata, check_text
from meve.memory.records import ROLES, Turn
from meve.memory.session import parse_timestamp

__all__ = ["Resolved", "TurnRules", "edited_turn", "new_turn", "resolve_items", "timestamp_of"]

_RESERVED = ("session_id", "role", "seq", "okey", "timestamp", "ts", "turn_id", "edited")
_ITEM_KEYS = ("text", "role", "turn_id", "timestamp", "metadata")


@dataclass(frozen=True)
class TurnRules:
    """A session's limits for new turns: its id, the longest text, the clock and how far ahead of it a timestamp may be."""

    session_id: str
    max_chars: int
    max_skew_s: float
    clock: Callable[[], datetime]


def new_turn(spec: Mapping[str, Any], rules: TurnRules, last: datetime | None, seq: int) -> Turn:
    """A validated Turn from one item's fields (``text``, ``role``, ``turn_id``, ``timestamp``, ``metadata``)."""
    text, role, turn_id = spec.get("text"), spec.get("role", "user"), spec.get("turn_id")
    if not isinstance(text, str):
        raise InputError(f"text must be a str, got {type(text).__name__}: {text!r}"[:200])
    if not text.strip():
        raise InputError("text is empty or whitespace; a turn must say something")
    if len(text) > rules.max_chars:
        raise InputError(f"text has {len(text)} characters, more than max_turn_chars={rules.max_chars}")
    check_text(text, "text")
    if role not in ROLES:
        raise InputError(f"role={role!r} is not allowed: expected one of {', '.join(ROLES)}")
    if turn_id is not None and (not isinstance(turn_id, str) or not turn_id or len(turn_id) > 256):
        raise InputError(f"turn_id={turn_id!r} must be a non-empty str of at most 256 characters")
    if turn_id is not None:
        check_text(turn_id, "turn_id")
    ts = timestamp_of(rules, spec.get("timestamp"), last)
    meta = check_metadata(spec.get("metadata"), "metadata") or {}
    bad = [k for k in meta if k in _RESERVED]
    if bad:
        raise InputError(f"metadata key {bad[0]!r} is reserved; reserved keys: {', '.join(_RESERVED)}")
    tid = turn_id if turn_id is not None else f"{rules.session_id[:32]}-{uuid.uuid4().hex}"
    return Turn(id=tid, role=role, text=text, timestamp=ts, seq=seq, metadata=meta)


def timestamp_of(rules: TurnRules, given: Any, last: datetime | None) -> datetime:
    """The turn's timestamp: the clock's now, or the one given, never ahead of the clock nor before ``last``."""
    now = rules.clock()
    if now.tzinfo is None:
        raise InputError(f"the clock returned a naive datetime {now!r}; it must be timezone-aware")
    ts = now if given is None else parse_timestamp(given)
    if (ts - now).total_seconds() > rules.max_skew_s:
        raise InputError(
            f"timestamp {ts.isoformat()} is more than max_clock_skew_s={rules.max_skew_s} s ahead of the clock ({now.isoformat()}); "
            "a turn from the future would make every later turn look out of order"
        )
    if last is not None and ts < last:
        raise InputError(
            f"timestamp {ts.isoformat()} is earlier than the latest turn ({last.isoformat()}); "
            "turns must be added in time order (equal timestamps are ordered by arrival)"
        )
    return ts


@dataclass(frozen=True)
class Resolved:
    """A batch checked against what is stored: every item's turn, in order; the new turns; and the
    edits, each (the stored turn, the turn that supersedes it)."""

    turns: list[Turn]
    fresh: list[Turn]
    edits: list[tuple[Turn, Turn]]


def resolve_items(
    items: list[Any], stored: Callable[[str], Turn | None], rules: TurnRules, last: datetime | None, seq: int, *, supersede: bool = False
) -> Resolved:
    """Each item's turn: a turn_id already stored (``stored``) or earlier in the batch with the
    same role and text is that turn. With another role or text it is refused, or, with
    ``supersede``, an edit (:func:`edited_turn`). Within a batch the last write of an id wins."""
    current: dict[str, Turn] = {}  # id -> the turn as the batch leaves it so far
    fresh: list[str] = []  # ids new in this batch, in order
    superseded: dict[str, Turn] = {}  # id -> the stored turn its edits replace
    order: list[str] = []
    for i, item in enumerate(items):
        spec = _spec(item, i)
        tid = spec.get("turn_id")
        existing = (current.get(tid) or stored(tid)) if isinstance(tid, str) else None
        if existing is None:
            turn = new_turn(spec, rules, last, seq)
            last, seq = turn.timestamp, seq + 1
            fresh.append(turn.id)
        elif (spec.get("text"), spec.get("role", "user")) == (existing.text, existing.role):
            turn = existing
        elif not supersede:
            raise InputError(
                f"turn_id={tid!r} is already stored as {existing.role}: {existing.text[:60]!r}, and items[{i}] gives "
                f"{spec.get('role', 'user')}: {str(spec.get('text'))[:60]!r}; stored turns are never overwritten unless "
                "supersede=True, so give the new turn its own turn_id"
            )
        elif existing.id in fresh:  # new in this very batch: its later text is the one stored, as a new turn
            turn = replace(edited_turn(spec, existing, rules), edited=None)
        else:
            superseded.setdefault(existing.id, existing)
            turn = edited_turn(spec, existing, rules)
        current[turn.id] = turn
        order.append(turn.id)
    return Resolved([current[t] for t in order], [current[t] for t in fresh], [(old, current[t]) for t, old in superseded.items()])


def edited_turn(spec: Mapping[str, Any], stored: Turn, rules: TurnRules) -> Turn:
    """The turn that supersedes ``stored`` (an edited or regenerated message: the same id, new text):
    the new role, text and metadata, validated as a new turn's are; the stored turn's time, seq and
    place in the conversation (a timestamp given with an edit must be the stored one); ``edited``
    the clock's now."""
    given = spec.get("timestamp")
    if given is not None and parse_timestamp(given) != stored.timestamp:
        raise InputError(
            f"turn_id={stored.id!r} is an edit of a turn stored at {stored.timestamp.isoformat()}, but timestamp={given!r} was given; "
            "an edit keeps the turn's place in the conversation, so give no timestamp (or the stored one)"
        )
    checked = new_turn({**spec, "timestamp": None}, rules, None, stored.seq)  # its timestamp is the clock's now
    metadata = checked.metadata if spec.get("metadata") is not None else stored.metadata
    return replace(stored, role=checked.role, text=checked.text, metadata=metadata, edited=checked.timestamp)


def _spec(item: Any, i: int) -> Mapping[str, Any]:
    spec = {"text": item} if isinstance(item, str) else item
    if not isinstance(spec, Mapping):
        raise InputError(f"items[{i}] is {type(item).__name__}; expected a str or a dict with 'text'")
    unknown = set(spec) - set(_ITEM_KEYS)
    if unknown:
        raise InputError(f"items[{i}] has unknown keys {sorted(unknown)}; allowed: {', '.join(_ITEM_KEYS)}")
    return spec
