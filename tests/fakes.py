"""Fakes for the fast unit tests, named as fakes: they stand in for models only.

FakeEmbedder hashes words into a fixed-size bag-of-words vector (deterministic,
cosine ~ word overlap). FakeScorer scores a pair by the share of query words
present in the passage. Neither means anything beyond that.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    def __init__(self, dimension: int = 64, name: str = "fake-bow") -> None:
        self.dimension = dimension
        self.name = name
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)
                out[i, h % self.dimension] += 1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else out[i]
            if not norm:
                out[i, 0] = 1.0
        return out


class FakeScorer:
    name = "fake-overlap"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray:
        self.calls.append(len(passages))
        q = set(_WORD.findall(query.lower()))
        return np.array([len(q & set(_WORD.findall(p.lower()))) / max(1, len(q)) for p in passages], dtype=np.float64)


async def run_while_ticking(awaitable):
    """Await ``awaitable`` while a task counts event-loop turns; returns (result, ticks).

    ticks > 0 means the loop kept running, i.e. the awaited work did not block it.
    """
    import asyncio

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        result = await awaitable
    finally:
        task.cancel()
    return result, ticks
