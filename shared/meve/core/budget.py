"""The budget both context builders share: one greedy ledger, one rule on the rendered text.

MeVe contexts (:func:`meve.phases.pack_budget`, then :func:`meve.context.pack_context`) and
chat-memory contexts (``MomentaryMemory``) account for items the same way, with a
:class:`Ledger`: an item costs its tokens plus one separator once another item is in. Greedy
sums can still differ from the rendered context (passages joined by a separator, or
``[date] role: text`` lines tokenise across their joins), so both finish with
:func:`shrink_to_fit`: what is counted is exactly what is rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from meve.core.tokens import TokenCounter

__all__ = ["Ledger", "shrink_to_fit"]

K = TypeVar("K", bound=Hashable)


@dataclass
class Ledger:
    """Greedy token accounting: each item taken costs its tokens plus ``separator`` tokens once
    another item is in; nothing is taken past ``limit``."""

    limit: int
    separator: int
    used: int = 0
    items: int = 0

    @property
    def left(self) -> int:
        return self.limit - self.used

    def cost(self, tokens: int) -> int:
        """What taking an item of ``tokens`` tokens would cost now."""
        return tokens + (self.separator if self.items else 0)

    @property
    def room(self) -> int:
        """The most tokens an item taken now may have (the separator before it paid)."""
        return self.left - (self.separator if self.items else 0)

    def take(self, tokens: int) -> int | None:
        """Take the item if it fits: its cost, or None (and nothing changes) when it does not."""
        cost = self.cost(tokens)
        if cost > self.left:
            return None
        self.used += cost
        self.items += 1
        return cost


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
