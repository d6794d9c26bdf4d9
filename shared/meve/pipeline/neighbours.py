"""Neighbours of a split answer (issue 77 #2): after packing, a kept passage joined, as one
passage, with the passage before or after it in its source.

A splitter cuts text where its size runs out, so an answer can start in one chunk and end in the
next: the chunk with its start scores high, the one with its end low, and the verifier's cut drops
it. Whether the answer may run on is read from what the verifier already said: the passage's best
sentence (its sentence scores, as pruning and the budget's cut read them) opens or ends its text,
so the evidence touches that boundary. Nothing is tuned. The join is made only when the room that
packing left in t_max holds what the neighbour adds (the whole context counted again), so it never
displaces a passage the verifier ranked higher, and the text both chunks hold (splitters overlap
them) appears once.

Where a passage sits is the framework's (:class:`Place`): LlamaIndex's PREVIOUS/NEXT relationships
and ``start_char_idx``, LangChain's ``source`` and ``start_index`` (:func:`link` orders those). The
adapters give it through :class:`Neighbours`. These functions are pure: the runner scores the
sentences and fetches the neighbours (:func:`meve.pipeline.runner.join_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from meve.core.records import Passage
from meve.pipeline.phases import PhaseOutput, rankable

__all__ = ["SIDES", "Neighbours", "Place", "facing", "join_neighbours", "link", "metadata_place", "seam"]

#: The sides a neighbour can join on, in the order they are tried: an answer runs on after the
#: words a question shares with it more often than it starts before them.
SIDES = ("next", "prev")


@dataclass(frozen=True)
class Place:
    """Where a passage sits in its source, as the framework that cut it says.

    ``source`` names the source; ``start`` is the offset in it of the passage's source text (None:
    not known); ``prev``/``next`` are the ids of the passages before and after it where the
    framework links them (LlamaIndex), else found from the offsets (:func:`link`); ``head`` is how
    many characters open the passage's text without being source text (the metadata lines
    LlamaIndex sends the LLM before a node's text)."""

    source: str
    start: int | None = None
    prev: str | None = None
    next: str | None = None
    head: int = 0


@dataclass(frozen=True)
class Neighbours:
    """How a run learns where its passages sit: ``place`` (a passage -> its :class:`Place`, or
    None) and ``fetch`` (ids -> the passages among them a run may join that are not among its
    candidates, as LlamaIndex's docstore holds them; None: candidates only)."""

    place: Callable[[Passage], Place | None]
    fetch: Callable[[Sequence[str]], Sequence[Passage]] | None = None


def metadata_place(metadata: Mapping[str, Any], source_key: str = "source", start_key: str = "start_index") -> Place | None:
    """Where a chunk sits by its metadata: LangChain's loaders name the source under ``source``, and
    its splitters with ``add_start_index=True`` put the chunk's first character under
    ``start_index``. None without both (or when the start is not an int): chunks of different
    documents must never be ordered as one."""
    source, start = metadata.get(source_key), metadata.get(start_key)
    if source is None or isinstance(start, bool) or not isinstance(start, int):
        return None
    return Place(str(source), start)


def link(places: Mapping[str, Place], texts: Mapping[str, str]) -> dict[str, Place]:
    """``places`` with ``prev``/``next`` found from the offsets where the framework gave neither:
    within one source, a passage's next is the first after it (by start) that starts inside it (a
    splitter's overlap) or where it ends, and runs past its end; one that lies within it continues
    nothing. A gap keeps two apart: what lies in it is not known (a chunk not among these, say)."""
    out = dict(places)
    rows: dict[str, list[tuple[int, int, str]]] = {}
    for pid, at in places.items():
        if at.start is not None and at.prev is None and at.next is None:
            rows.setdefault(at.source, []).append((at.start, at.start + len(texts[pid]) - at.head, pid))
    for ordered in rows.values():
        ordered.sort()
        for k, (a_start, a_end, a) in enumerate(ordered):
            b = next((b for b_start, b_end, b in ordered[k + 1 :] if a_start < b_start <= a_end < b_end), None)
            if b is not None:
                out[a], out[b] = replace(out[a], next=b), replace(out[b], prev=a)
    return out


def facing(scores: Sequence[float] | np.ndarray) -> frozenset[str]:
    """The boundaries of a passage's source text its best sentence touches (``scores``: the
    verifier's, one per sentence in order): "prev" when it is the first, "next" when the last
    (both for a passage of one sentence); none when no score is a number."""
    ranked = rankable(scores)
    if not len(ranked) or not np.isfinite(ranked).any():
        return frozenset()
    best = int(np.argmax(ranked))
    return frozenset(side for side, at in (("prev", 0), ("next", len(ranked) - 1)) if best == at)


def _overlaps(a: str, b: str) -> Iterator[int]:
    """Every k > 0 with ``a`` ending in ``b[:k]``, longest first (the prefix function of b + a's end)."""
    s = b + "\0" + (a[-len(b) :] if b else "")
    pi = [0] * len(s)
    for i in range(1, len(s)):
        k = pi[i - 1]
        while k and s[i] != s[k]:
            k = pi[k - 1]
        pi[i] = k + 1 if s[i] == s[k] else k
    k = min(pi[-1], len(a), len(b))
    while k:
        if a.endswith(b[:k]):  # a NUL inside the texts could let a border cross the separator
            yield k
        k = pi[k - 1]


def _word_bounded(a: str, b: str, k: int) -> bool:
    # A splitter's overlap runs from a word's start to a word's end; "cat" + "the" share a "t" by chance.
    starts = k == len(a) or not (a[-k - 1].isalnum() and a[-k].isalnum())
    return starts and (k == len(b) or not (b[k - 1].isalnum() and b[k].isalnum()))


def _shared_by_offsets(a: str, a_start: int | None, b: str, b_start: int | None) -> int | None:
    """Characters the offsets say ``a`` and ``b`` share (negative: a gap between them); None where
    either has no offset or the texts disagree with them."""
    if a_start is None or b_start is None:
        return None
    n = a_start + len(a) - b_start
    return n if n <= 0 or (n <= len(b) and a.endswith(b[:n])) else None


def seam(first: str, first_at: Place, second: str, second_at: Place) -> tuple[str, int]:
    """``first``, then ``second`` (the passage after it in their source), as one text that holds
    their overlap once: (that text, characters of source text they shared). ``first``'s head leads
    and ``second``'s is dropped. What they share is read from the offsets where both have one and
    the texts agree there, else it is the longest end of ``first`` that ``second`` opens with,
    from a word's start to a word's end. Texts that meet (by their offsets) are put end to end;
    texts that share nothing otherwise get a space between them, the whitespace a splitter drops
    between chunks."""
    a, b = first[first_at.head :], second[second_at.head :]
    n = _shared_by_offsets(a, first_at.start, b, second_at.start)
    if n is None:
        n = next((k for k in _overlaps(a, b) if _word_bounded(a, b, k)), -1)
    return first + (b[n:] if n >= 0 else " " + b), max(n, 0)


def _refusal(p: Passage, side: str, other: str, places: Mapping[str, Place], pool: Mapping[str, Passage], sides: Mapping[str, frozenset[str]]) -> str | None:
    """Why ``other``, ``p``'s neighbour on ``side``, cannot join it (None: it may, room allowing)."""
    if p.spans is not None:
        return "its text was pruned or cut to fit: only a whole passage is joined"
    if side not in sides.get(p.id, frozenset()):
        return f"its best sentence does not touch the boundary with the passage {'after' if side == 'next' else 'before'} it"
    if other not in pool:
        return "not among the candidates, nor found where the adapter looks"
    there = places.get(other)
    if there is None:
        return "its place in a source is not known"
    if there.source != places[p.id].source:
        return f"from another source ({there.source!r}, not {places[p.id].source!r})"
    return None


def _joined(cur: Passage, at: Place, side: str, other: Passage, other_at: Place, tokens: Callable[[Sequence[Passage]], int]) -> tuple[Passage, int]:
    """``cur`` (at ``at``) with ``other`` joined on ``side``: (the one passage, characters shared)."""
    first, second = ((cur.text, at), (other.text, other_at)) if side == "next" else ((other.text, other_at), (cur.text, at))
    text, shared = seam(first[0], first[1], second[0], second[1])
    mine, theirs = cur.joined or (cur.id,), other.joined or (other.id,)
    parts = (*mine, *theirs) if side == "next" else (*theirs, *mine)
    return cur.with_(text=text, joined=parts, tokens=tokens([cur.with_(text=text)])), shared


def _neighbour_in(context: Sequence[Passage], i: int, other: str, pool: Mapping[str, Passage]) -> tuple[Passage, int | None, str | None]:
    """``other`` as the passage at ``i`` would absorb it: (its passage, its index in ``context``
    when it is kept there on its own, why it cannot be absorbed). A kept neighbour ranked lower is
    absorbed, its text moving up beside the passage it continues; one ranked higher stays where it
    is, since moving it down would put a passage the verifier ranked lower before it."""
    for j, c in enumerate(context):
        if c.id == other:
            if j < i:
                return c, None, "already in the context, ranked higher"
            return c, j, "already in the context, pruned or cut" if c.spans is not None else None
        if other in (c.joined or ()):
            return c, None, f"already in the context, in {c.id}"
    return pool[other], None, None


def join_neighbours(
    kept: Sequence[Passage],
    places: Mapping[str, Place],
    pool: Mapping[str, Passage],
    sides: Mapping[str, frozenset[str]],
    tokens: Callable[[Sequence[Passage]], int],
    t_max: int,
) -> PhaseOutput:
    """Phase 5, after packing (``MeVeConfig.neighbours``): each kept passage, in priority order,
    joined with its neighbour after it, then before it (``places``, linked), where its best
    sentence touches that boundary (``sides``: passage id -> :func:`facing`), the neighbour is in
    ``pool`` (the candidates and what the adapter fetched) or kept and ranked lower, in the same
    source, and the context with the join renders in at most ``t_max`` tokens (``tokens``: the
    passages' context, counted whole). The joined passage keeps the kept one's id, score and rank,
    with ``joined`` naming its parts in reading order; a kept neighbour it absorbs leaves its own
    place. Nothing else moves and nothing is dropped, so a join never displaces what the verifier
    ranked higher. ``info["joined"]``: passage id -> the joins made; ``info["not_joined"]``: each
    neighbour considered and not joined, with the reason; ``info["context_tokens"]``: the
    context's tokens after the joins."""
    context, total = list(kept), tokens(kept)
    joined: dict[str, list[dict[str, Any]]] = {}
    refused: list[dict[str, Any]] = []
    for p in kept:
        for side in SIDES if p.id in places and any(c.id == p.id for c in context) else ():
            other = getattr(places[p.id], side)
            if other is None:
                continue
            i = next(k for k, c in enumerate(context) if c.id == p.id)
            why = _refusal(p, side, other, places, pool, sides)
            if why is None:
                part, j, why = _neighbour_in(context, i, other, pool)
            if why is None:
                new, shared = _joined(context[i], places[p.id], side, part, places[other], tokens)
                trial = [new if k == i else c for k, c in enumerate(context) if k != j]
                n = tokens(trial)
                why = f"needs {n - total} more tokens, {t_max - total} left in t_max {t_max}" if n > t_max else None
                why = "adds no text" if j is None and len(new.text) == len(context[i].text) else why
            if why is not None:
                refused.append({"passage": p.id, "neighbour": other, "side": side, "reason": why})
                continue
            joined.setdefault(p.id, []).append({"neighbour": other, "side": side, "kept": j is not None, "shared_chars": shared, "tokens_added": n - total})
            context, total = trial, n
    return PhaseOutput(tuple(context), info={"joined": joined, "not_joined": refused, "context_tokens": total})
