"""The document stage's parts: documents, their sentence windows, title matching and signal fusion."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from meve.core.errors import ConfigError, InputError
from meve.core.text import sentence_spans
from meve.core.tokens import TokenCounter, count_many
from meve.retrieval.fusion import weighted_sum
from meve.retrieval.terms import STOPWORDS

__all__ = [
    "DEFAULT_DOC_WEIGHTS",
    "DOC_SIGNALS",
    "Document",
    "DocumentChoice",
    "TitleIndex",
    "check_doc_weights",
    "documents_from",
    "fuse_documents",
    "lead_text",
    "sentence_windows",
    "title_key",
    "window_parts",
]

# What the document stage knows about a document, each a score per pooled document:
#   title: 1 if the query mentions the document's title (word for word), else 0;
#   bm25: BM25 of the query over the document's title and full text;
#   summary: cosine of the query to the embedding of the title and lead;
#   window: the best cosine of the query to one of the document's windows;
#   scorer: the MeVe scorer's score of the title and lead.
DOC_SIGNALS: tuple[str, ...] = ("title", "bm25", "summary", "window", "scorer")
# Fitted on dev questions only (BENCHMARKS.md, "Hierarchical retrieval"; benchmarks/hierarchical.py).
DEFAULT_DOC_WEIGHTS: Mapping[str, float] = MappingProxyType({"title": 0.5, "bm25": 1.0, "summary": 0.0, "window": 0.25, "scorer": 0.25})


@dataclass(frozen=True)
class Document:
    """A whole document: no pre-chunking needed."""

    id: str
    title: str
    text: str


def sentence_windows(text: str, passage_tokens: int, counter: TokenCounter, stride: int = 1) -> list[tuple[int, int]]:
    """Windows of consecutive sentences of at most ~passage_tokens tokens, one starting at every ``stride``-th sentence."""
    spans = sentence_spans(text)
    if not spans:
        return []
    lengths = count_many(counter, [text[a:b] for a, b in spans])
    out = []
    for i in range(0, len(spans), stride):
        used, j = 0, i
        # The sum of the sentences' counts is a quick bound; the joined text (with the spaces
        # between sentences) is counted exactly before a sentence is added.
        while j < len(spans) and (j == i or (used + lengths[j] <= passage_tokens and counter.count(text[spans[i][0] : spans[j][1]]) <= passage_tokens)):
            used += lengths[j]
            j += 1
        out.append((spans[i][0], spans[j - 1][1]))
        if j == len(spans):
            break
    return out


def documents_from(documents: Iterable[Any]) -> list[Document]:
    """Validated :class:`Document` records from tuples, dicts or Documents."""
    out: list[Document] = []
    for i, d in enumerate(documents):
        if isinstance(d, Document):
            out.append(d)
        elif isinstance(d, Mapping) and {"id", "title", "text"} <= set(d):
            out.append(Document(str(d["id"]), str(d["title"]), str(d["text"])))
        elif isinstance(d, tuple | list) and len(d) == 3 and all(isinstance(x, str) for x in d):
            out.append(Document(*d))
        else:
            raise InputError(f"documents[{i}]={d!r:.80} must be (doc_id, title, text), a dict with id/title/text, or meve.mindref.documents.Document")
        if not out[-1].text.strip():
            raise InputError(f"document {out[-1].id!r} has no text")
    ids = [d.id for d in out]
    if len(set(ids)) != len(ids):
        raise InputError(f"duplicate document ids: {sorted({i for i in ids if ids.count(i) > 1})[:5]}")
    return out


def check_doc_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """Weights of the document signals: names from :data:`DOC_SIGNALS`, finite numbers >= 0, one > 0."""
    if weights is None:
        return dict(DEFAULT_DOC_WEIGHTS)
    if not isinstance(weights, Mapping):
        raise ConfigError("doc_weights", weights, "a dict of signal name -> weight, names from " + ", ".join(DOC_SIGNALS))
    out: dict[str, float] = {}
    for name, w in weights.items():
        if name not in DOC_SIGNALS:
            raise ConfigError("doc_weights", dict(weights), "signal names from " + ", ".join(repr(n) for n in DOC_SIGNALS) + f" (got {name!r})")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise ConfigError("doc_weights", dict(weights), f"finite weights >= 0 (got {name!r}: {w!r})")
        out[name] = float(w)
    if not any(out.values()):
        raise ConfigError("doc_weights", dict(weights), "at least one weight > 0")
    return out


_WORD = re.compile(r"\w+", re.UNICODE)
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


def title_key(title: str) -> tuple[str, ...]:
    """The words a query must contain, in this order, to mention ``title``: lower-cased, with a
    trailing disambiguation such as "Mercury (planet)" dropped. Empty (never matched) when every
    word is a stopword, so a title like "The Who" is not found in every question that says "who"."""
    words = tuple(_WORD.findall(_QUALIFIER.sub("", title).lower()))
    return words if any(w not in STOPWORDS for w in words) else ()


class TitleIndex:
    """Titles mentioned in a query: the query's word n-grams looked up in a dict, so the cost
    grows with the query's length, not with the number of documents."""

    def __init__(self) -> None:
        self._docs: dict[tuple[str, ...], list[int]] = {}
        self._longest = 0

    def add(self, position: int, title: str) -> None:
        key = title_key(title)
        if key:
            self._docs.setdefault(key, []).append(position)
            self._longest = max(self._longest, len(key))

    def mentioned(self, query: str) -> set[int]:
        words = _WORD.findall(query.lower())
        found: set[int] = set()
        for i in range(len(words)):
            for n in range(1, min(self._longest, len(words) - i) + 1):
                found.update(self._docs.get(tuple(words[i : i + n]), ()))
        return found


@dataclass(frozen=True)
class DocumentChoice:
    """A document the document stage chose: its fused score and the raw signals behind it."""

    id: str
    title: str
    score: float
    signals: Mapping[str, float] = field(default_factory=dict)


def fuse_documents(signals: Mapping[str, Mapping[int, float]], weights: Mapping[str, float], k: int) -> list[tuple[int, float]]:
    """The ``k`` best pooled documents by the min-max weighted sum of their signals (ties by position)."""
    fused = weighted_sum(signals, weights)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def lead_text(title: str, text: str, counter: TokenCounter, summary_tokens: int) -> str:
    """A document's summary as embedded and verified: its title and its first ``summary_tokens`` tokens."""
    return f"{title}: {counter.truncate(text, summary_tokens)}"


def window_parts(window_id: str) -> tuple[str, int, int]:
    """(doc_id, start, end) of a window id, which ingestion writes as ``doc_id@start-end``."""
    doc, _, span = window_id.rpartition("@")
    start, _, end = span.partition("-")
    return doc, int(start), int(end)
