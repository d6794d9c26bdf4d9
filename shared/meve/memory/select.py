"""Momentary Contexts' selection as pure functions: fuse the signals, then fill ``l_max`` by
priority (the most recent turns, kept roles, what the user said nearest the query, then
relevance, partner turns competing by their worth) and sort by time.

``MomentaryMemory.reconstruct`` calls these on live signals; the benchmarks call the same
functions on precomputed signals, so what they tune is what ships.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from meve.core.budget import Ledger, shrink_to_fit
from meve.core.config import MemoryConfig, validate_weights
from meve.core.errors import ConfigError
from meve.core.tokens import TokenCounter
from meve.memory.decide import PART_SHARE, ROLE_DISCOUNT, TURN_SHARE, decide_dates
from meve.memory.log import Snapshot
from meve.memory.records import Turn, TurnTrace
from meve.memory.render import SEPARATOR, date_prefix, render, render_turn, truncate_turn
from meve.retrieval.fusion import rrf, weighted_sum

__all__ = [
    "MIN_CUT",
    "Selection",
    "decide_dates",
    "fuse",
    "latest_turns",
    "rank",
    "select_turns",
    "sentence_scores",
    "signal_weights",
    "turn_traces",
    "weigh_roles",
]


#: The fewest tokens of a turn's text worth a cut line: fewer say less than their line's role,
#: marker and separator cost.
MIN_CUT = 16


def signal_weights(weights: Mapping[str, float], embedders: tuple[str, ...]) -> dict[str, float]:
    """Per-signal weights ("bm25", "dense:<embedder>") from the user's: "dense" is shared evenly
    among the embedders unless one is weighted by its own name."""
    raw = validate_weights(weights, embedders)
    per: dict[str, float] = {"bm25": raw.get("bm25", 0.0)}
    shared = raw.get("dense", 0.0) / len(embedders)
    for n in embedders:
        per[f"dense:{n}"] = raw.get(n, shared)
    if not sum(per.values()) > 0:
        raise ConfigError("weights", dict(weights), "at least one positive weight")
    return per


def fuse(signals: Mapping[str, Mapping[int, float]], weights: Mapping[str, float], fusion: str, rrf_k: int) -> dict[int, float]:
    """Positions -> fused score: the min-max weighted sum (eq. 12-13) or weighted RRF (eq. 14)."""
    if fusion == "weighted":
        return weighted_sum(signals, weights)
    rankings = {name: sorted(s, key=lambda i, s=s: (-s[i], i)) for name, s in signals.items()}  # type: ignore[misc]
    return rrf(rankings, weights, k=rrf_k)


def sentence_scores(hits: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """One vector score per turn from the searches of a query (``hits[0]``: the whole query's
    pool, position -> cosine; then one pool per sentence of a long query,
    :func:`meve.memory.decide.decide_parts`). One search: its cosines. Several: every turn any
    search found scores (1 - PART_SHARE) x the whole query's cosine + PART_SHARE x the best
    sentence's, where a search that did not return the turn counts its pool's lowest cosine (a
    bound from above: a search returns only its pool, and reading every turn's vector back from
    the store would cost more than the search)."""
    if not hits:
        raise ValueError("sentence_scores needs the whole query's hits at least")
    parts = [h for h in hits[1:] if h]  # a search that found nothing has no lowest cosine to lend
    if not parts or not hits[0]:
        return dict(hits[0])
    whole, floor = hits[0], min(hits[0].values())
    floors = [min(h.values()) for h in parts]
    found = sorted(set(whole).union(*parts))
    return {i: (1.0 - PART_SHARE) * whole.get(i, floor) + PART_SHARE * max(h.get(i, f) for h, f in zip(parts, floors, strict=True)) for i in found}


def weigh_roles(fused: Mapping[int, float], turns: Sequence[Turn], role: str | None) -> Mapping[int, float]:
    """The fused scores with every turn by another role than ``role`` (the one the query asks
    about, :func:`meve.memory.decide.decide_role`) counting :data:`ROLE_DISCOUNT`; ``fused`` itself
    for None (most queries: no copy)."""
    if role is None:
        return fused
    return {i: v if turns[i].role == role else v * ROLE_DISCOUNT for i, v in fused.items()}


def rank(fused: Mapping[int, float], keys: Sequence[tuple[float, str]]) -> list[int]:
    """Positions by fused score, best first; ties go to the newer turn."""
    ranked = sorted(fused, key=lambda i: keys[i], reverse=True)
    ranked.sort(key=lambda i: -fused[i])
    return ranked


@dataclass
class Selection:
    """What the fill chose: ``picked`` in priority order, and why each candidate is in or out
    (included, reason, tokens used)."""

    picked: dict[int, Turn] = field(default_factory=dict)
    reasons: dict[int, tuple[bool, str, int]] = field(default_factory=dict)
    turns: tuple[Turn, ...] = ()
    tokens: int = 0


class _Fill:
    """The greedy fill: a ledger over rendered lines. A dated line is charged its date (counted once
    per day and cached): an upper bound, since the rendering dates only a day's first line."""

    def __init__(self, snap: Snapshot, cfg: MemoryConfig, counter: TokenCounter, query: str) -> None:
        self.snap, self.cfg, self.counter, self.query = snap, cfg, counter, query
        self.sep = counter.count(SEPARATOR)
        self.ledger = Ledger(cfg.l_max, self.sep)
        self.sel = Selection()
        self._dated: dict[int, int] = {}

    def line(self, i: int) -> int:
        extra = 0
        if self.cfg.dates is True:
            day = int(self.snap.keys[i][0] // 86_400)
            extra = self._dated.get(day, -1)
            if extra < 0:
                extra = self._dated[day] = self.counter.count(date_prefix(self.snap.turns[i]))
        return self.snap.tokens[i] + extra

    def take(self, i: int, turn: Turn, tokens: int, reason: str) -> bool:
        taken = self.ledger.take(tokens)
        if taken is None:
            return False
        self.sel.picked[i] = turn
        self.sel.reasons[i] = (True, reason, taken)
        return True

    def refuse(self, i: int, reason: str) -> None:
        self.sel.reasons[i] = (False, reason, 0)

    def head(self, i: int) -> int:
        """The tokens of turn ``i``'s line without its text (role, and date when dated)."""
        return self.counter.count(render_turn(replace(self.snap.turns[i], text=""), dates=self.cfg.dates is True))

    def cut(self, i: int, text_room: int) -> tuple[Turn, int] | None:
        """Turn ``i`` cut to its part the query matches (:func:`truncate_turn`; its end when the
        query shares no word with it), marked, in at most ``text_room`` tokens of text, and its
        line's tokens; None when not even the marker fits."""
        turn = self.snap.turns[i]
        got = truncate_turn(self.counter, turn.text, text_room, self.query)
        if got is None:
            return None
        return replace(turn, text=got[0], metadata={**turn.metadata, "meve_truncated": True}), got[1] + self.head(i)


def _recent(fill: _Fill, recent: Sequence[int], cap: int | None) -> None:
    """The most recent turns, newest first; one that does not fit whole, or whose text is over
    ``cap`` tokens (a query of its own subject), is cut to its part the query matches
    (:func:`truncate_turn`), marked; its line's head (role, date) is not counted in ``cap``."""
    snap, cfg = fill.snap, fill.cfg
    for i in reversed(recent):
        turn, own = snap.turns[i], fill.line(i)
        head = fill.head(i)
        need = fill.ledger.cost(own)
        if (cap is None or own - head <= cap) and fill.take(i, turn, own, "most recent turn (always kept)"):
            continue
        room = fill.ledger.left if cap is None else min(fill.ledger.left, fill.ledger.cost(cap + head))
        cut = fill.cut(i, room - fill.ledger.cost(head))
        if cut is None:
            fill.refuse(i, f"recent turn of {need} tokens; only {fill.ledger.left} left, too little for a cut copy")
            continue
        short, line = cut
        cost = fill.ledger.cost(line)
        why = f"l_max {cfg.l_max}" if room == fill.ledger.left else f"its share of l_max ({cap} tokens of text)"
        if not fill.take(i, short, line, f"most recent turn, truncated to {cost} of {need} tokens to fit {why}"):
            raise RuntimeError(f"truncated recent turn of {line} tokens does not fit {fill.ledger.left} left")  # truncate_turn guarantees the fit


def latest_turns(snap: Snapshot, n: int, skip_roles: Collection[str], skipped: Collection[int]) -> list[int]:
    """The ``n`` most recent positions of ``snap`` (oldest first) whose role is not in
    ``skip_roles`` and which are not ``skipped`` (the current exchange an adapter sends verbatim:
    the anchor is the exchange before it)."""
    out: list[int] = []
    for i in reversed(snap.chrono):
        if len(out) == n:
            break
        if i < snap.n and i not in skipped and snap.turns[i].role not in skip_roles:
            out.append(i)
    return out[::-1]


def _pinned(fill: _Fill, pinned: Sequence[int]) -> None:
    for i in pinned:
        role = fill.snap.turns[i].role
        if not fill.take(i, fill.snap.turns[i], fill.line(i), f"role {role!r} is in keep_roles"):
            need = fill.ledger.cost(fill.line(i))
            fill.refuse(i, f"role {role!r} is in keep_roles, but it needs {need} tokens and {fill.ledger.left} are left of l_max {fill.cfg.l_max}")


def _stated(fill: _Fill, told: Sequence[tuple[int, float]], share: float) -> None:
    """What the user said that bears on the query (:func:`meve.memory.signals.stated`), nearest
    first, each whole, while together they hold at most ``share`` x ``l_max``: a request
    in other words than the preference it must honour ("Can you recommend a film?" after "I can't
    stand horror films") finds it by its vector where BM25 finds nothing, and no statement takes
    the room of everything else."""
    cap, used = int(share * fill.cfg.l_max), 0
    for i, cosine in told:
        if i in fill.sel.reasons:
            continue
        line, why = fill.line(i), f"the user's statement nearest the query (cosine {cosine:.2f}, at least follow_up_cosine {fill.cfg.follow_up_cosine:g})"
        # One over the share is not refused: it still competes by relevance.
        if used + line <= cap and fill.take(i, fill.snap.turns[i], line, why):
            used += line


def _relevant(fill: _Fill, chosen: Sequence[int], partner: Callable[[int], int | None], scores: Mapping[int, float]) -> None:
    """Turns by relevance, with partner turns competing as candidates of their own.

    A partner turn (the reply, or the question it answers) is worth its own score lifted toward its
    anchor's: ``partner_weight`` x the anchor's + (1 - ``partner_weight``) x its own, or its own
    alone if higher. So a reply the query also matches comes in right after its anchor, and one it
    does not match needs a strong anchor; either way it enters where that worth ranks, taking the
    budget only from turns worth less, never by forced adjacency. Scores are the fused scores
    scaled to the best one; ties keep relevance order, then the anchor before its partner."""
    snap, cfg = fill.snap, fill.cfg
    top = max((scores.get(i, 0.0) for i in chosen), default=0.0) or 1.0
    w = cfg.partner_weight
    # position -> (worth, relevance rank, is a partner; a partner's rank is its anchor's, chosen[rank - 1]):
    # ties go by rank, an anchor before its partner.
    cands: dict[int, tuple[float, int, bool]] = {}
    for rank_, i in enumerate(chosen, start=1):
        own = scores.get(i, 0.0) / top
        if i not in cands or cands[i][0] < own:
            cands[i] = (own, rank_, False)
        j = partner(i) if cfg.partner_turns else None
        if j is None or j >= snap.n:
            continue
        worth = w * own + (1.0 - w) * scores.get(j, 0.0) / top
        if worth > 0 and (j not in cands or cands[j][0] < worth):
            cands[j] = (worth, rank_, True)

    def why(i: int) -> str:
        worth, rank_, paired = cands[i]
        if paired:
            anchor, mine = scores.get(chosen[rank_ - 1], 0.0) / top, scores.get(i, 0.0) / top
            return f"partner turn of relevance rank {rank_} (worth {w} x {anchor:.3f} + {1.0 - w:g} x its own {mine:.3f} = {worth:.3f})"
        return f"relevance rank {rank_} (score {worth:.3f})" + (f" of top_k {cfg.top_k}" if cfg.top_k is not None else "")

    _take_in_order(fill, sorted(cands, key=lambda i: (-cands[i][0], cands[i][1], cands[i][2])), why)


def _take_in_order(fill: _Fill, order: Sequence[int], why: Callable[[int], str]) -> None:
    """Each of ``order`` not in already, where it fits the room left, else passed over
    (``why(i)``: the trace's reason for turn ``i``). With ``cap_turns``, a turn but the first of
    ``order`` whose line fits the room left and is over :data:`TURN_SHARE` of ``l_max`` comes in as
    its part the query matches, of that size (:func:`_share`), so one long turn at rank 2 cannot take
    the room of the shorter ones after it. The first of ``order``, the best, comes in whole; when it
    is in already (the latest exchange, a statement), every other turn is capped. One that does not
    fit whole is passed over, as without the cap (cutting it into the room left was measured, and
    cost six of seven sets: ``benchmarks/memory_share.py``)."""
    snap, cfg = fill.snap, fill.cfg
    share = int(TURN_SHARE * cfg.l_max) if cfg.cap_turns else None
    unnamed = (False, f"did not fit in what was left of l_max {cfg.l_max} (the first {_NAMED_MISSES} such turns are named)", 0)
    missed = 0
    for k, i in enumerate(order):
        if i in fill.sel.reasons:  # a recent or kept-role turn: in already, or refused with its own reason
            continue
        line = fill.line(i)
        fits = fill.ledger.cost(line) <= fill.ledger.left
        if fits and share is not None and k > 0 and line > share and _share(fill, i, share, why(i)):
            continue
        if not fits:
            missed += 1
            if missed <= _NAMED_MISSES:
                fill.refuse(i, f"{why(i)}: needs {fill.ledger.cost(line)} tokens, {fill.ledger.left} left of l_max {cfg.l_max}")
            else:  # a fill over a long conversation would otherwise spend most of its time on these strings
                fill.sel.reasons[i] = unnamed
            continue
        fill.take(i, snap.turns[i], line, why(i))


def _share(fill: _Fill, i: int, share: int, why: str) -> bool:
    """Turn ``i`` (its line over ``share`` tokens) taken as its best part whose line is at most
    ``share`` tokens. False, and nothing taken, when that part would hold under :data:`MIN_CUT`
    tokens of its text (an ``l_max`` under about 40): then the turn competes whole, as it would
    without the cap, since a cut that small says less than its line's role and marker cost."""
    text_room = share - fill.head(i)
    cut = fill.cut(i, text_room) if text_room >= MIN_CUT else None
    if cut is None:
        return False
    short, line = cut
    why = f"{why}, cut to its best part (a line of {line} of {fill.line(i)} tokens) to fit its share of l_max ({share} tokens a line)"
    return fill.take(i, short, line, why)


# Candidates refused for room that the trace explains one by one; the rest share one reason.
_NAMED_MISSES = 32


def select_turns(
    snap: Snapshot,
    cfg: MemoryConfig,
    counter: TokenCounter,
    *,
    recent: Sequence[int],
    pinned: Sequence[int],
    ranked: Sequence[int],
    partner: Callable[[int], int | None],
    scores: Mapping[int, float] | None = None,
    query: str = "",
    recent_cap: int | None = None,
    stated: Sequence[tuple[int, float]] = (),
    stated_share: float = TURN_SHARE,
) -> Selection:
    """Fill ``cfg.l_max`` by priority (``recent`` newest first, ``pinned``, ``stated`` (the user's
    statements nearest the query, within ``stated_share`` of it: :func:`_stated`), then ``ranked`` cut to
    ``cfg.top_k``, with partner turns competing by worth: see :func:`_relevant`; ``scores`` are the
    fused scores, by default falling with rank), then drop from the end until the rendered,
    chronological text fits (never a recent turn). Each turn costs its rendered line plus a
    separator once another line is in; a recent turn too long for the room left is cut to its part
    ``query`` matches, as is one over ``recent_cap`` tokens. ``cfg.dates`` must be decided for this query (True or False): the caller
    resolves "auto"."""
    if not isinstance(cfg.dates, bool):
        raise ValueError(f"select_turns needs dates decided for the query (True or False), got {cfg.dates!r}")
    fill = _Fill(snap, cfg, counter, query)
    _recent(fill, recent, recent_cap)
    _pinned(fill, pinned)
    cap = cfg.top_k if cfg.top_k is not None else len(ranked)
    if cfg.top_k is not None:  # top_k bounds every turn recalled for the query: a statement must rank within it
        within = set(ranked[:cap])
        stated = [s for s in stated if s[0] in within]
    _stated(fill, stated, stated_share)
    if scores is None:  # a plain ranking: worth falls with rank (1, 1/2, 1/3, ...)
        scores = {i: 1.0 / r for r, i in enumerate(ranked, start=1)}
    _relevant(fill, ranked[:cap], partner, scores)
    sel = fill.sel
    for rank_, i in enumerate(ranked[cap:], start=cap + 1):
        if i not in sel.picked:  # a partner turn may rank here and still be in
            fill.refuse(i, f"relevance rank {rank_} is outside top_k {cfg.top_k}")

    def rendered(idx: list[int]) -> str:
        return render(tuple(sel.picked[i] for i in sorted(idx, key=lambda i: snap.keys[i])), dates=cfg.dates is True)

    kept, over, _, sel.tokens = shrink_to_fit(list(sel.picked), rendered, counter, cfg.l_max, keep=frozenset(recent))
    for i, n in over:
        del sel.picked[i]
        fill.refuse(i, f"rendered context was {n} tokens > l_max {cfg.l_max}")
    sel.turns = tuple(sel.picked[i] for i in sorted(kept, key=lambda i: snap.keys[i]))
    return sel


def turn_traces(
    snap: Snapshot, sel: Selection, first: Collection[int], fused: Mapping[int, float], bm25: Mapping[int, float], dense: Mapping[str, Mapping[int, float]]
) -> tuple[TurnTrace, ...]:
    """Every candidate's trace row, the kept ones first (``first``: the recent and pinned turns,
    then by fused score, then time)."""
    order = sorted(sel.reasons, key=lambda i: (i not in sel.picked, -(fused.get(i) or 0.0) if i not in first else -1e9, snap.keys[i]))
    return tuple(
        TurnTrace(
            id=snap.turns[i].id,
            seq=snap.turns[i].seq,
            bm25=bm25.get(i),
            dense={k: v[i] for k, v in dense.items() if i in v},
            fused=fused.get(i),
            included=sel.reasons[i][0],
            reason=sel.reasons[i][1],
            tokens=sel.reasons[i][2],
            edited=edited.isoformat() if (edited := snap.turns[i].edited) is not None else None,
        )
        for i in order
    )
