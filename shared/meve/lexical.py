"""BM25 behind one interface.

Backends (all share :func:`bm25_tokenize`, so they see the same terms):

* ``"bm25s"`` — sparse-matrix BM25 (Lucene variant), the fast default for a
  static corpus; ``add`` re-indexes (O(corpus)).
* ``"rank-bm25"`` — the reference ``BM25Okapi``, kept for parity checks.
* ``"incremental"`` — meve's own Lucene-variant BM25 whose statistics update
  per document: ``add`` is O(tokens of the new document), a query is
  O(postings of its terms), vectorised. Chat memory uses it.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from meve.errors import ConfigError
from meve.models import verbose

if TYPE_CHECKING:
    from meve.store import ChromaStore

__all__ = [
    "BACKENDS",
    "DEFAULT_BM25",
    "BM25Backend",
    "Bm25sBackend",
    "IncrementalBM25",
    "LexicalIndex",
    "RankBM25Backend",
    "bm25_tokenize",
    "make_bm25",
    "stemmed_tokenize",
    "terms_held",
    "top_k",
]

BACKENDS: tuple[str, ...] = ("bm25s", "rank-bm25", "incremental")
# A live corpus gains passages between queries: bm25s re-indexes everything on the next query
# (2,964 ms at 100k passages, measured), the incremental index adds in place (0.79 ms add-then-query,
# 0.59 ms per query against bm25s's 0.36 ms). BENCHMARKS.md, "BM25 backends".
DEFAULT_BM25 = "incremental"

# A short English stopword list; queries are questions, so function words would dominate otherwise.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
_TOKEN = re.compile(r"\w+", re.UNICODE)


def bm25_tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


_stems: dict[str, str] = {}
_stem_lock = threading.Lock()
_stemmer = threading.local()


def stemmed_tokenize(text: str) -> list[str]:
    """:func:`bm25_tokenize`, then English Snowball stems (PyStemmer, C): "went"/"going" stay apart,
    "supportive"/"support" meet. Chosen for chat memory on LoCoMo dev conversations (BENCHMARKS.md)."""
    words = bm25_tokenize(text)
    todo = [w for w in dict.fromkeys(words) if w not in _stems]
    if todo:
        stemmer = getattr(_stemmer, "english", None)
        if stemmer is None:  # one per thread: a PyStemmer object is not thread-safe
            import Stemmer

            stemmer = _stemmer.english = Stemmer.Stemmer("english")
        stemmed = stemmer.stemWords(todo)
        with _stem_lock:
            _stems.update(zip(todo, stemmed, strict=True))
            if len(_stems) > 500_000:  # a bound for adversarial vocabularies; refilled on demand
                _stems.clear()
                _stems.update(zip(todo, stemmed, strict=True))
    return [_stems.get(w) or w for w in words]


_WORD_AT = re.compile(r"\w*", re.UNICODE)
# Snowball's irregular forms whose stem is not their first letters: "dying" -> "die".
_IRREGULAR = {"die": "dy", "lie": "ly", "tie": "ty"}


def terms_held(terms: Sequence[str], texts: Sequence[str]) -> list[frozenset[str]]:
    """For each text, which of ``terms`` (stems, as :func:`stemmed_tokenize` gives them) it holds.

    The same answer as stemming every word of every text, for a fraction of the cost (a query
    has a few terms, a candidate hundreds of words): only the words that begin with a term less
    its last letter are stemmed, and Snowball keeps that much of a word as its stem (y -> i and
    a dropped e change only the last letter); the three irregular forms that break this ("dying" ->
    "die", "lying", "tying") are searched for as well.
    """
    wanted = set(terms)
    prefixes = {t[:-1] if len(t) > 1 else t for t in wanted} | {_IRREGULAR[t] for t in wanted if t in _IRREGULAR}
    out = []
    for text in texts:
        low = text.lower()
        held: set[str] = set()
        for pre in prefixes:
            i = low.find(pre)
            while i != -1:
                if i == 0 or (not low[i - 1].isalnum() and low[i - 1] != "_"):
                    word = _WORD_AT.match(low, i).group()  # type: ignore[union-attr]  # \w* always matches
                    stem = _stems.get(word)
                    if stem is None:
                        stemmed = stemmed_tokenize(word)
                        stem = stemmed[0] if stemmed else ""
                    if stem in wanted:
                        held.add(stem)
                i = low.find(pre, i + 1)
        out.append(frozenset(held))
    return out


@runtime_checkable
class BM25Backend(Protocol):
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

    def __init__(self, dtype: type, capacity: int = 4) -> None:
        self.data: np.ndarray = np.empty(capacity, dtype=dtype)
        self.size = 0

    def append(self, value: float) -> None:
        if self.size == self.data.size:
            grown = np.empty(self.data.size * 2, dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size] = value
        self.size += 1

    def view(self) -> np.ndarray:
        return self.data[: self.size]


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
        # query reads three contiguous arrays instead of gathering lengths by document).
        self._postings: dict[str, tuple[_Growable, _Growable, _Growable]] = {}
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
                if posting is None:
                    posting = self._postings[tok] = (_Growable(np.int64), _Growable(np.float64), _Growable(np.float64))
                posting[0].append(doc)
                posting[1].append(tf)
                posting[2].append(len(tokens))

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
            docs, tfs, dls = posting[0].view(), posting[1].view(), posting[2].view()
            idf = math.log(1.0 + (n - docs.size + 0.5) / (docs.size + 0.5))
            norm = dls * (self.k1 * self.b / avgdl)
            norm += self.k1 * (1.0 - self.b)
            norm += tfs
            scores[docs] += idf * tfs / norm
        return scores

    def __len__(self) -> int:
        return self._lengths.size


def make_bm25(backend: str = DEFAULT_BM25, texts: Sequence[str] = ()) -> BM25Backend:
    """Build a BM25 backend by name: one of ``BACKENDS``."""
    if backend == "bm25s":
        return Bm25sBackend(texts)
    if backend == "rank-bm25":
        return RankBM25Backend(texts)
    if backend == "incremental":
        return IncrementalBM25(texts)
    raise ConfigError("bm25_backend", backend, "one of " + ", ".join(repr(b) for b in BACKENDS))


class LexicalIndex:
    """BM25 over the store's passages, addressed by passage id (thread-safe)."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], backend: str = DEFAULT_BM25) -> None:
        self.backend_name = backend
        self.ids: list[str] = list(ids)
        self._known = set(self.ids)
        self.backend: BM25Backend = make_bm25(backend, texts)
        self._lock = threading.Lock()

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        with self._lock:
            fresh = [(i, t) for i, t in zip(ids, texts, strict=True) if i not in self._known]
            self.ids.extend(i for i, _ in fresh)
            self._known.update(i for i, _ in fresh)
            self.backend.add([t for _, t in fresh])

    def __contains__(self, pid: object) -> bool:
        return pid in self._known

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        with self._lock:
            if not self.ids or k <= 0:
                return []
            return [(self.ids[i], s) for i, s in top_k(self.backend.get_scores(query), k)]

    def catch_up(self, store: ChromaStore) -> int:
        """Passages other handles or processes (app replicas) added to the collection since this
        index last looked: one ``count()``, and only on a difference the rows after the ones known
        (Chroma returns rows in the order it stored them; a full id scan if that does not add up).
        Returns how many were added."""
        known = len(self.ids)
        rows = store.rows_after(known, self._known)
        self.add([i for i, _, _ in rows], [t for _, t, _ in rows])
        return len(self.ids) - known
