"""A passage longer than a model's window, as overlapping windows of word pieces.

A transformer reads at most its window (MiniLM: 256 word pieces, two of them special); what lies
past it was never scored before this module. Windows of ``size`` pieces overlap by ``overlap``
and start where a word starts (after whitespace), so a window's text, cut out of the passage,
tokenizes as the passage did (word-piece tokenizers split words alone). Each piece then takes its
vector from the window in which it sits most centrally (:func:`owners`), so it read as much of
the passage around it as one window allows. Cost: one model pass per window, about
``1 + (n - size) / (size - overlap)`` for ``n`` pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Pieces", "fits", "frame", "overlap_for", "owners", "pieces", "plan", "stitch", "text_pieces", "text_windows"]


def overlap_for(size: int) -> int:
    """The overlap of windows of ``size`` pieces: a quarter, so a piece at a window's cut still
    has an eighth of a window (about a sentence) of context on its near side."""
    return size // 4


def plan(starts: Sequence[bool] | np.ndarray, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) piece ranges covering all ``len(starts)`` pieces in windows of at most ``size``.

    ``starts[i]``: piece i may open a window (it starts a word). Each next window opens at the
    word start nearest below ``end - overlap`` (within ``overlap`` pieces; past that, at that
    piece: a word longer than that has no better cut); the last one ends at the passage's end
    and is moved back to a full window, so its pieces have as much context as the others."""
    n = len(starts)
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"windows need size >= 1 and 0 <= overlap < size, got size={size}, overlap={overlap}")
    if n <= size:
        return [(0, n)]
    out: list[tuple[int, int]] = []
    s = 0
    while s + size < n:
        out.append((s, s + size))
        ideal = s + size - overlap
        s = next((i for i in range(ideal, max(s, ideal - overlap), -1) if starts[i]), ideal)
    last = n - size
    last = next((i for i in range(last, min(n, last + overlap)) if starts[i]), last)
    out.append((max(last, out[-1][0] + 1), n))
    return out


def owners(windows: Sequence[tuple[int, int]], n: int) -> np.ndarray:
    """For each of ``n`` pieces, the index of the window it sits most centrally in (the most
    pieces between it and the nearer edge; the earlier window on a tie)."""
    idx = np.arange(n)
    best = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int64)
    for w, (s, e) in enumerate(windows):
        d = np.where((idx >= s) & (idx < e), np.minimum(idx - s, e - 1 - idx), -1)
        better = d > depth
        best[better], depth[better] = w, d[better]
    if (best < 0).any():
        raise ValueError(f"windows {list(windows)} leave pieces of {n} uncovered")
    return best


def stitch(windows: Sequence[tuple[int, int]], rows: Sequence[np.ndarray], n: int) -> np.ndarray:
    """One row per piece of a text of ``n`` pieces, each from the window it sits most centrally in;
    ``rows[w]`` holds window w's rows, one per piece of its range (checked: a window whose text
    tokenized to another count would shift every row after the difference)."""
    for (s, e), r in zip(windows, rows, strict=True):
        if len(r) != e - s:
            got = f"{len(r)} token vectors, not {e - s}"
            raise RuntimeError(f"a window of pieces {s}-{e} came back with {got}: the model's tokenizer read the window's text differently")
    own = owners(windows, n)
    out = np.empty((n, *rows[0].shape[1:]), dtype=rows[0].dtype)
    for w, (s, _) in enumerate(windows):
        at = np.flatnonzero(own == w)
        out[at] = rows[w][at - s]
    return out


class Pieces:
    """One text's word pieces: ids, character offsets in the text, and which start a word."""

    def __init__(self, ids: Sequence[int], offsets: Sequence[tuple[int, int]]) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        # A piece opens a word when whitespace (a gap in the offsets) comes before it.
        self.starts = np.ones(len(self.ids), dtype=bool)
        self.starts[1:] = self.offsets[1:, 0] > self.offsets[:-1, 1]

    def __len__(self) -> int:
        return len(self.ids)

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The characters of pieces [s, e)."""
        return int(self.offsets[s, 0]), int(self.offsets[e - 1, 1])


def text_pieces(tokenizer: Any, texts: Sequence[str]) -> list[Pieces]:
    """Each text's word pieces under ``tokenizer`` (a fast Hugging Face tokenizer), no special
    tokens added and none dropped, no truncation (what a model of unlimited length would read),
    in one tokenizer call."""
    if not texts:
        return []
    enc = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    return [Pieces(ids, offsets) for ids, offsets in zip(enc["input_ids"], enc["offset_mapping"], strict=True)]


def pieces(tokenizer: Any, text: str) -> Pieces:
    """One text's :func:`text_pieces`."""
    return text_pieces(tokenizer, [text])[0]


def fits(text: str, size: int) -> bool:
    """Whether ``text`` surely has at most ``size`` pieces, without tokenizing it: no tokenizer
    makes more pieces than UTF-8 bytes, plus one (a SentencePiece word marker)."""
    return len(text.encode("utf-8", "surrogatepass")) < size


def text_windows(tokenizer: Any, text: str, size: int) -> list[str]:
    """``text`` as window texts of at most ``size`` pieces (overlapping, cut at word starts);
    ``[text]`` when it fits, so a short text reads exactly as before."""
    if fits(text, size):
        return [text]
    p = pieces(tokenizer, text)
    if len(p) <= size:
        return [text]
    return [text[slice(*p.span(s, e))] for s, e in plan(p.starts, size, overlap_for(size))]


def frame(tokenizer: Any) -> tuple[int, int]:
    """How many special tokens ``tokenizer`` puts before and after one text ([CLS] x [SEP]: 1, 1)."""
    bare = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    framed = list(tokenizer("a")["input_ids"])
    before = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return before, len(framed) - before - len(bare)


def head(tokenizer: Any, text: str, size: int) -> tuple[str, int, int]:
    """What a reader of at most ``size`` pieces reads of ``text`` (a query): the text up to the last
    word that ends within its first ``size`` pieces (cut at a word, so it tokenizes to those pieces
    again), how many pieces ``text`` has, and how many the cut keeps; ``(text, n, n)`` when it fits."""
    if fits(text, size):
        return text, -1, -1  # surely fits: not tokenized (the counts are not needed)
    p = pieces(tokenizer, text)
    if len(p) <= size:
        return text, len(p), len(p)
    starts = np.flatnonzero(p.starts[1 : size + 1]) + 1  # word starts after the first piece, up to the one past the cut
    keep = int(starts[-1]) if len(starts) else size  # one word longer than ``size``: cut inside it
    return text[: int(p.offsets[keep - 1, 1])], len(p), keep
