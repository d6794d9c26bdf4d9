"""Score fusion: min-max weighted sum (Momentary Contexts eq. 12-13) and weighted RRF (eq. 14)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def minmax(scores: Mapping[K, float]) -> dict[K, float]:
    """Scale to [0, 1]. A constant list maps to 1.0 when positive (all equally good), else 0.0."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi == lo:
        return {k: (1.0 if hi > 0 else 0.0) for k in scores}
    span = hi - lo
    return {k: (v - lo) / span for k, v in scores.items()}


def weighted_sum(signals: Mapping[str, Mapping[K, float]], weights: Mapping[str, float]) -> dict[K, float]:
    """sum_j w_j * minmax(signal_j)(d); a candidate missing from a signal gets 0 for it."""
    keys: dict[K, None] = {}
    for scores in signals.values():
        keys.update(dict.fromkeys(scores))
    fused = dict.fromkeys(keys, 0.0)
    for name, scores in signals.items():
        w = weights.get(name, 0.0)
        if w == 0.0:
            continue
        for k, v in minmax(scores).items():
            fused[k] += w * v
    return fused


def rrf(rankings: Mapping[str, Sequence[K]], weights: Mapping[str, float] | None = None, k: int = 60) -> dict[K, float]:
    """Weighted reciprocal rank fusion: sum_j w_j / (k + rank_j(d)), ranks from 1.

    Unlike LlamaIndex's QueryFusionRetriever in RRF mode, the weights are honoured.
    """
    fused: dict[K, float] = {}
    for name, ranked in rankings.items():
        w = 1.0 if weights is None else weights.get(name, 0.0)
        if w == 0.0:
            continue
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + w / (k + rank)
    return fused
