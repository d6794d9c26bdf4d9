"""BM25 kernels behind one Protocol, all over :func:`~meve.retrieval.terms.bm25_tokenize`'s terms.

* ``"bm25s"`` — sparse-matrix BM25 (Lucene variant), fast for a static corpus; ``add``
  re-indexes (O(corpus)).
* ``"rank-bm25"`` — the reference ``BM25Okapi``, kept for parity checks.
* ``"incremental"`` — meve's own Lucene-variant BM25 whose statistics update per document:
  ``add`` is O(tokens of the new document), a query is O(postings of its terms), vectorised.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meve.core.errors import ConfigError
from meve.core.logs import verbose
from meve.retrieval.terms import bm25_tokenize

__all__ = ["BACKENDS", "DEFAULT_BM25", "BM25Backend", "Bm25sBackend", "IncrementalBM25", "RankBM25Backend", "make_bm25", "top_k"]

BACKENDS: tuple[str, ...] = ("bm25s", "rank-bm25", "incremental")
# A live corpus gains passages between queries: bm25s re-indexes everything on the next query
# (2,964 ms at 100k passages, measured), the incremental index adds in place (0.79 ms add-then-query,
# 0.59 ms per query against bm25s's 0.36 ms). BENCHMARKS.md, "BM25 backends".
DEFAULT_BM25 = "incremental"


@runtime_checkable
class BM25Backend(Protocol):
    """A BM25 index: add texts, score a query against every text so far."""

    name: str

    def add(self, texts: Sequence[str]) -> None: ...

    def get_scores(self, query: str) -> np.ndarray: ...

    def __len__(self) -> int: ...


def top_k(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices of the k best positive scores, best first (ties by index, for determinism)."""
    if k <= 0 or scores.size == 0:
        return []
    idx = _at_least_kth(scores, k)
    idx = idx[np.lexsort((idx, -scores[idx]))][:k]
    return [(int(i), float(scores[i])) for i in idx if scores[i] > 0]


_SAMPLE = 4096


def _at_least_kth(scores: np.ndarray, k: int) -> np.ndarray:
    """Every index whose score is at least the k-th best positive score (a superset of the top k,
    ties at the boundary included), found without selecting over the whole array.

    An argpartition over 100k BM25 scores, most of them zero, takes ~0.7 ms. Instead: the k-th
    best score of an evenly strided sample is a lower bound of the k-th best overall (the sample's
    k values are in the array), so ``scores >= bound`` holds the whole top k and, for a sample of
    4,096, about k * n / 4,096 other indices. Exact whatever the order of the scores; a sample
    with fewer than k positive scores falls back to every positive one. The sample's zeros are
    left out before selecting: numpy's partition slows ~8x on an array mostly of equal values."""
    n = scores.size
    if n <= _SAMPLE:
        return np.flatnonzero(scores > 0)
    sample = scores[:: n // _SAMPLE]
    positive = sample[sample > 0]
    if positive.size < k:
        return np.flatnonzero(scores > 0)
    bound = np.partition(positive, positive.size - k)[positive.size - k]
    return np.flatnonzero(scores >= bound)


class _StaticBackend:
    """Shared by the backends that index a fixed corpus: ``add`` appends tokens and drops the
    built model, which the next query rebuilds (O(corpus))."""

    name = "static"

    def __init__(self, texts: Sequence[str] = ()) -> None:
        self._tokens: list[list[str]] = []
        self._model: object | None = None
        self.add(texts)

    def add(self, texts: Sequence[str]) -> None:
        self._tokens.extend(bm25_tokenize(t) for t in texts)
        self._model = None

    def _corpus(self) -> list[list[str]]:
        # Both libraries reject an empty document; a placeholder token keeps it indexable.
        return [toks or ["\x00"] for toks in self._tokens]

    def __len__(self) -> int:
        return len(self._tokens)


class Bm25sBackend(_StaticBackend):
    """bm25s (sparse matrices, Lucene variant): fast on a static corpus; ``add`` re-indexes."""

    name = "bm25s"

    def __init__(self, texts: Sequence[str] = (), *, k1: float = 1.5, b: float = 0.75, method: str = "lucene") -> None:
        self.k1, self.b, self.method = k1, b, method
        super().__init__(texts)

    def get_scores(self, query: str) -> np.ndarray:
        if not self._tokens:
            return np.zeros(0, dtype=np.float64)
        if self._model is None:
            import bm25s

            # bm25s sets its own logger to DEBUG at import, so any root handler (e.g. logging.basicConfig)
            # would print "Building index from tokens" on every rebuild.
            logging.getLogger("bm25s").setLevel(logging.DEBUG if verbose() else logging.WARNING)
            model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            model.index(self._corpus(), show_progress=False)
            self._model = model
        model = self._model
        terms = [t for t in bm25_tokenize(query) if t in model.vocab_dict]  # type: ignore[union-attr,attr-defined]
        if not terms:
            return np.zeros(len(self._tokens), dtype=np.float64)
        return np.asarray(model.get_scores(terms), dtype=np.float64)  # type: ignore[union-attr,attr-defined]


class RankBM25Backend(_StaticBackend):
    """rank-bm25's reference BM25Okapi, kept for parity checks."""

    name = "rank-bm25"

    def __init__(self, texts: Sequence[str] = (), *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        super().__init__(texts)

    def get_scores(self, query: str) -> np.ndarray:
        if not self._tokens:
            return np.zeros(0, dtype=np.float64)
        if self._model is None:
            from rank_bm25 import BM25Okapi

            self._model = BM25Okapi(self._corpus(), k1=self.k1, b=self.b)
        return np.asarray(self._model.get_scores(bm25_tokenize(query)), dtype=np.float64)  # type: ignore[union-attr,attr-defined]


class _Growable:
    """An append-only numpy array with amortised O(1) appends (capacity doubles)."""

    __slots__ = ("data", "size")

    def __init__(self, dtype: type | np.dtype[Any], capacity: int = 4) -> None:
        self.data: np.ndarray = np.empty(capacity, dtype=dtype)
        self.size = 0

    @classmethod
    def over(cls, data: np.ndarray) -> _Growable:
        """Full over ``data`` (a read-only view is fine: the first append copies it)."""
        g = cls(data.dtype.type, 0)
        g.data, g.size = data, data.size
        return g

    def append(self, value: Any) -> None:
        if self.size == self.data.size:
            grown = np.empty(max(4, self.data.size * 2), dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size] = value
        self.size += 1

    def view(self) -> np.ndarray:
        return self.data[: self.size]


POSTING = np.dtype([("doc", np.int32), ("tf", np.float32), ("dl", np.float32)])
# The tail is merged into the compacted postings once it holds this many postings and at least a
# quarter as many as they do: a bounded tail, and merges whose cost is amortised O(1) a posting.
_COMPACT_MIN = 1_000_000


class IncrementalBM25:
    """Lucene-variant BM25 with per-document updates.

    score = sum_t idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl)) with
    idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5)): bm25s's default ("lucene",
    which drops the constant (k1 + 1) factor), so the two agree (tested).

    Postings live in two places. The compacted ones are flat arrays (documents, frequencies and
    document lengths, 4 bytes a field: frequencies and lengths are counts, exact in float32 below
    2**24, and scoring runs in float64; lengths sit beside the postings so a query reads them in
    one pass; a term's postings are one row, ``indptr`` gives its bounds),
    exactly the arrays a snapshot saves, so a loaded snapshot is used memory-mapped as it is. New
    documents go to a tail of growable arrays per term (``add`` is amortised O(distinct terms of
    the document)), merged into the flat arrays when it grows (see ``_COMPACT_MIN``).
    A term in the flat part costs one dict entry, where a loaded snapshot used to make three array
    views per term (at 100k passages: 0.37 s and 71 MB to load, now 0.03 s and 18 MB). A query is
    O(postings of its terms), vectorised. A replica that merges pulls the memory-mapped postings
    into its own memory; it merges only after gaining a quarter of its snapshot's postings.
    """

    name = "incremental"

    def __init__(self, texts: Sequence[str] = (), *, k1: float = 1.5, b: float = 0.75, tokenize: Callable[[str], list[str]] | None = None) -> None:
        self.k1, self.b = k1, b
        self.tokenize = tokenize if tokenize is not None else bm25_tokenize
        self._slot: dict[str, int] = {}
        self._indptr: np.ndarray = np.zeros(1, dtype=np.int64)
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.float32))
        self._tail: dict[str, _Growable] = {}
        self._tail_postings = 0
        self._lengths = _Growable(np.float64)
        self._total = 0
        self.add(texts)

    def add(self, texts: Sequence[str]) -> None:
        for text in texts:
            doc = self._lengths.size
            tokens = self.tokenize(text)
            self._lengths.append(len(tokens))
            self._total += len(tokens)
            counts: dict[str, int] = {}
            for tok in tokens:
                counts[tok] = counts.get(tok, 0) + 1
            for tok, tf in counts.items():
                posting = self._tail.get(tok)
                if posting is None:
                    posting = self._tail[tok] = _Growable(POSTING)
                posting.append((doc, tf, len(tokens)))
            self._tail_postings += len(counts)
        if self._tail_postings >= max(_COMPACT_MIN, self._flat[0].size // 4):
            self._compact()

    def _postings(self, term: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The term's postings as (documents, frequencies, lengths) parts: flat, then tail."""
        parts = []
        row = self._slot.get(term)
        if row is not None:
            a, z = int(self._indptr[row]), int(self._indptr[row + 1])
            parts.append((self._flat[0][a:z], self._flat[1][a:z], self._flat[2][a:z]))
        tail = self._tail.get(term)
        if tail is not None:
            view = tail.view()
            parts.append((view["doc"], view["tf"], view["dl"]))
        return parts

    def get_scores(self, query: str) -> np.ndarray:
        n = self._lengths.size
        scores = np.zeros(n, dtype=np.float64)
        if n == 0:
            return scores
        avgdl = self._total / n if self._total else 1.0
        for term in dict.fromkeys(self.tokenize(query)):
            parts = self._postings(term)
            if not parts:
                continue
            df = sum(docs.size for docs, _, _ in parts)
            # np.float64 scalars, so float32 postings are scored in float64 (a Python float would not promote them).
            idf = np.float64(math.log(1.0 + (n - df + 0.5) / (df + 0.5)))
            for docs, tfs, dls in parts:
                norm = dls * np.float64(self.k1 * self.b / avgdl)
                norm += self.k1 * (1.0 - self.b)
                norm += tfs
                scores[docs] += idf * tfs / norm
        return scores

    def __len__(self) -> int:
        return self._lengths.size

    def _compact(self) -> None:
        """Merge the tail into the flat arrays (when it has grown: see ``_COMPACT_MIN``)."""
        if self._tail:
            self._slot, self._indptr, self._flat = self._merged()
            self._tail, self._tail_postings = {}, 0

    def _merged(self) -> tuple[dict[str, int], np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The flat arrays with the tail merged in, the index left as it is: a term's tail goes at
        the end of its row (documents stay ascending: the tail holds only later ones), a new
        term's becomes a new row. np.insert needs memory for the result and the tail only, not an
        index over every posting."""
        if not self._tail:
            return self._slot, self._indptr, self._flat
        rows = self._indptr.size - 1
        slot = dict(self._slot)
        for t in self._tail:
            slot.setdefault(t, len(slot))
        by_row = sorted((slot[t], g) for t, g in self._tail.items())
        counts = np.fromiter((g.size for _, g in by_row), dtype=np.int64, count=len(by_row))
        where = np.fromiter((r for r, _ in by_row), dtype=np.int64, count=len(by_row))
        sizes = np.zeros(len(slot), dtype=np.int64)
        sizes[:rows] = np.diff(self._indptr)
        np.add.at(sizes, where, counts)
        indptr = np.zeros(len(slot) + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        docs, tfs, dls = (np.concatenate([g.view()[field] for _, g in by_row]) for field in ("doc", "tf", "dl"))
        if rows == 0:  # nothing merged yet (every save of a small corpus): the tail in row order is all
            return slot, indptr, (docs, tfs, dls)
        # Before the next row's first posting, or after everything for a new term.
        at = np.repeat(self._indptr[np.minimum(where + 1, rows)], counts)
        docs, tfs, dls = (np.insert(old, at, new) for old, new in zip(self._flat, (docs, tfs, dls), strict=True))
        return slot, indptr, (docs, tfs, dls)

    def arrays(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """The index as flat arrays (terms, and their postings laid end to end), for saving. The
        index itself is not merged: merging on every save (every batch of a small corpus) left
        ``MeVe.from_texts`` ~3 MB per 1k passages more resident memory (BENCHMARKS.md, "Scale")."""
        slot, indptr, (docs, tfs, dls) = self._merged()
        return list(slot), {"indptr": indptr, "docs": docs, "tfs": tfs, "dls": dls, "lengths": self._lengths.view()}

    @classmethod
    def from_arrays(cls, terms: Sequence[str], arrays: dict[str, np.ndarray], *, k1: float = 1.5, b: float = 0.75) -> IncrementalBM25:
        """The index :meth:`arrays` described, over the arrays as given (memory-mapped ones stay on
        disk until read)."""
        index = cls(k1=k1, b=b)
        # Plain views of the (memory-mapped) arrays: a np.memmap slice costs a subclass hook per
        # arithmetic step, ~0.1 ms a query over 100k passages; the views map the same pages.
        index._indptr = np.asarray(arrays["indptr"])
        index._flat = (np.asarray(arrays["docs"]), np.asarray(arrays["tfs"]), np.asarray(arrays["dls"]))
        index._slot = {t: i for i, t in enumerate(terms)}
        index._lengths = _Growable.over(np.asarray(arrays["lengths"]))
        index._total = int(index._lengths.view().sum())
        return index


def make_bm25(backend: str = DEFAULT_BM25, texts: Sequence[str] = ()) -> BM25Backend:
    """Build a BM25 backend by name: one of ``BACKENDS``."""
    if backend == "bm25s":
        return Bm25sBackend(texts)
    if backend == "rank-bm25":
        return RankBM25Backend(texts)
    if backend == "incremental":
        return IncrementalBM25(texts)
    raise ConfigError("bm25_backend", backend, "one of " + ", ".join(repr(b) for b in BACKENDS))
