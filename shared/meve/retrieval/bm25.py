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
    k = min(k, scores.size)
    idx = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    idx = idx[np.lexsort((idx, -scores[idx]))]
    return [(int(i), float(scores[i])) for i in idx if scores[i] > 0]


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

    @classmethod
    def posting(cls, loaded: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> _Growable:
        """A term's postings (document, frequency, document length), starting from a loaded snapshot's arrays."""
        if loaded is None:
            return cls(POSTING)
        g = cls(POSTING, max(4, loaded[0].size * 2))
        view = g.data[: loaded[0].size]
        view["doc"], view["tf"], view["dl"] = loaded
        g.size = loaded[0].size
        return g


POSTING = np.dtype([("doc", np.int32), ("tf", np.float32), ("dl", np.float32)])


def _fields(posting: _Growable | tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A term's documents, frequencies and document lengths, however it is held."""
    if isinstance(posting, tuple):
        return posting
    view = posting.view()
    return view["doc"], view["tf"], view["dl"]


class IncrementalBM25:
    """Lucene-variant BM25 with per-document updates.

    score = sum_t idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl)) with
    idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5)): bm25s's default ("lucene",
    which drops the constant (k1 + 1) factor), so the two agree (tested).
    Postings are growable numpy arrays: ``add`` is amortised O(distinct terms of
    the document) and a query is O(postings of its terms), with no conversion.
    """

    name = "incremental"

    def __init__(self, texts: Sequence[str] = (), *, k1: float = 1.5, b: float = 0.75, tokenize: Callable[[str], list[str]] | None = None) -> None:
        self.k1, self.b = k1, b
        self.tokenize = tokenize if tokenize is not None else bm25_tokenize
        # Per term: documents, term frequencies and the documents' lengths (kept beside the postings so a
        # query reads them in one pass instead of gathering lengths by document). One structured array
        # per term (4 bytes a field: frequencies and lengths are counts, exact in float32 below 2**24;
        # scoring runs in float64): a corpus has ~8 new terms per passage, mostly rare, and three
        # arrays per term cost ~3 KB per passage more in Python objects. A snapshot loaded from disk
        # keeps its three memory-mapped arrays per term until the term gains a document.
        self._postings: dict[str, _Growable | tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
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
                posting = self._postings.get(tok)
                if not isinstance(posting, _Growable):
                    posting = self._postings[tok] = _Growable.posting(posting)
                posting.append((doc, tf, len(tokens)))

    def get_scores(self, query: str) -> np.ndarray:
        n = self._lengths.size
        scores = np.zeros(n, dtype=np.float64)
        if n == 0:
            return scores
        avgdl = self._total / n if self._total else 1.0
        for term in dict.fromkeys(self.tokenize(query)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            docs, tfs, dls = _fields(posting)
            # np.float64 scalars, so float32 postings are scored in float64 (a Python float would not promote them).
            idf = np.float64(math.log(1.0 + (n - docs.size + 0.5) / (docs.size + 0.5)))
            norm = dls * np.float64(self.k1 * self.b / avgdl)
            norm += self.k1 * (1.0 - self.b)
            norm += tfs
            scores[docs] += idf * tfs / norm
        return scores

    def __len__(self) -> int:
        return self._lengths.size

    def arrays(self) -> tuple[list[str], dict[str, np.ndarray]]:
        """The index as flat arrays (terms, and their postings laid end to end), for saving."""
        terms = list(self._postings)
        sizes = np.fromiter((_fields(self._postings[t])[0].size for t in terms), dtype=np.int64, count=len(terms))
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])

        def flat(i: int, dtype: type) -> np.ndarray:
            return np.concatenate([_fields(self._postings[t])[i] for t in terms]).astype(dtype, copy=False) if terms else np.zeros(0, dtype)

        arrays = {"indptr": indptr, "docs": flat(0, np.int32), "tfs": flat(1, np.float32), "dls": flat(2, np.float32), "lengths": self._lengths.view()}
        return terms, arrays

    @classmethod
    def from_arrays(cls, terms: Sequence[str], arrays: dict[str, np.ndarray], *, k1: float = 1.5, b: float = 0.75) -> IncrementalBM25:
        """The index :meth:`arrays` described; postings are views of the arrays (memory-mapped ones
        stay on disk until read), copied only when a term gains a document."""
        index = cls(k1=k1, b=b)
        indptr = arrays["indptr"]
        for i, term in enumerate(terms):
            a, z = int(indptr[i]), int(indptr[i + 1])
            index._postings[term] = (arrays["docs"][a:z], arrays["tfs"][a:z], arrays["dls"][a:z])
        index._lengths = _Growable.over(arrays["lengths"])
        index._total = int(np.asarray(arrays["lengths"]).sum())
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
