"""How text becomes BM25 terms: lower-cased words less stopwords, optionally Snowball stems."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

__all__ = ["STOPWORDS", "bm25_tokenize", "stemmed_tokenize", "terms_held"]

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
    """Lower-cased words, stopwords removed."""
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
