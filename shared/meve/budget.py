"""The one rule both context builders end with: the budget holds on the rendered text.

Greedy packing adds up per-item token counts; a rendered context (passages joined by a
separator, or ``[date] role: text`` lines) can tokenise longer than that sum. Both MeVe
contexts (:func:`meve.context.pack_context`) and chat-memory contexts (``MomentaryMemory``)
finish with :func:`shrink_to_fit`, so what is counted is exactly what is rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from meve.tokens import TokenCounter

__all__ = ["shrink_to_fit"]

K = TypeVar("K", bound=Hashable)


def shrink_to_fit(
    priority: Sequence[K], render: Callable[[list[K]], str], counter: TokenCounter, limit: int, keep: frozenset[K] | set[K] = frozenset()
) -> tuple[list[K], list[tuple[K, int]], str, int]:
    """Drop items from the end of ``priority`` (never one in ``keep``) until ``render(kept)`` is at
    most ``limit`` tokens. Returns (kept, in priority order; [(dropped, rendered tokens when it was
    dropped)]; the rendered text; its tokens)."""
    kept = list(priority)
    text = render(kept)
    total = counter.count(text)
    dropped: list[tuple[K, int]] = []
    while total > limit:
        last = next((k for k in reversed(kept) if k not in keep), None)
        if last is None:
            break
        kept.remove(last)
        dropped.append((last, total))
        text = render(kept)
        total = counter.count(text)
    return kept, dropped, text, total
