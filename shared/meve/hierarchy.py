"""Hierarchical retrieval (MindRef, arXiv 2402.17010): documents first, then the passage inside them.

* :class:`DocumentIndex` picks documents by title (BM25) and a per-document summary
  embedding (dense), fused by min-max weighted sum: no pre-chunking.
* :func:`best_passages` scores sentence windows of about ``passage_tokens`` tokens
  inside the chosen documents and returns them with character offsets.
* :class:`Hierarchy` holds all of it for ``MeVe.from_documents``: every window embedded once at
  build time, and BM25 over the windows for the fallback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from meve.chunking import sentence_spans
from meve.errors import InputError
from meve.fusion import weighted_sum
from meve.lexical import DEFAULT_BM25, IncrementalBM25, LexicalIndex
from meve.models import Embedder
from meve.records import Passage
from meve.tokens import TokenCounter, count_many

__all__ = ["Document", "DocumentIndex", "Hierarchy", "best_passages", "documents_from", "sentence_windows"]


@dataclass(frozen=True)
class Document:
    """A whole document: no pre-chunking needed."""

    id: str
    title: str
    text: str


class DocumentIndex:
    """Document stage: BM25 over titles fused with cosine to a summary embedding (title + opening)."""

    def __init__(
        self, documents: Sequence[Document], embedder: Embedder, *, counter: TokenCounter, summary_tokens: int = 64, weights: dict[str, float] | None = None
    ) -> None:
        if not documents:
            raise InputError("documents is empty: give at least one (title, text) document")
        self.documents = list(documents)
        self.embedder = embedder
        self.weights = weights if weights is not None else {"title": 0.4, "summary": 0.6}
        self._titles = IncrementalBM25([d.title for d in self.documents])
        summaries = [f"{d.title}: {counter.truncate(d.text, summary_tokens)}" for d in self.documents]
        self._summary_vecs = np.asarray(embedder.encode(summaries), dtype=np.float32)

    def select(self, query: str, query_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        bm25 = self._titles.get_scores(query)
        cos = self._summary_vecs @ query_vec
        signals = {"title": {i: float(s) for i, s in enumerate(bm25) if s > 0}, "summary": {i: float(s) for i, s in enumerate(cos)}}
        fused = weighted_sum(signals, self.weights)
        return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


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


Windows = Callable[[Document], tuple[Sequence[tuple[int, int]], np.ndarray]]


def best_passages(query_vec: np.ndarray, documents: Sequence[tuple[Document, float]], windows: Windows, *, k: int = 10) -> list[Passage]:
    """Passage stage: score every sentence window of the chosen documents; the best ``k``
    (overlapping windows of one document collapsed to the best).

    ``windows(doc)`` gives a document's window spans and their embeddings, computed at index
    time, so a query costs one matrix product per chosen document and no model call.
    """
    cands: list[tuple[Document, float, int, int]] = []
    blocks: list[np.ndarray] = []
    for doc, doc_score in documents:
        spans, vecs = windows(doc)
        cands.extend((doc, doc_score, a, b) for a, b in spans)
        blocks.append(np.asarray(vecs, dtype=np.float32))
    if not cands:
        return []
    vecs = np.concatenate(blocks)
    sims = vecs @ query_vec
    order = np.argsort(-sims, kind="stable")
    chosen: list[Passage] = []
    taken: dict[str, list[tuple[int, int]]] = {}
    for i in order:
        doc, doc_score, a, b = cands[int(i)]
        if any(a < y and x < b for x, y in taken.get(doc.id, [])):
            continue  # overlaps a better window of the same document
        taken.setdefault(doc.id, []).append((a, b))
        chosen.append(
            Passage(
                id=f"{doc.id}@{a}-{b}",
                text=doc.text[a:b],
                metadata={"doc_id": doc.id, "title": doc.title, "start": a, "end": b, "doc_score": doc_score},
                source="retrieved",
                dense_score=float(sims[i]),
                embedding=vecs[int(i)],
            )
        )
        if len(chosen) >= k:
            break
    return chosen


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
            raise InputError(f"documents[{i}]={d!r:.80} must be (doc_id, title, text), a dict with id/title/text, or meve.hierarchy.Document")
        if not out[-1].text.strip():
            raise InputError(f"document {out[-1].id!r} has no text")
    ids = [d.id for d in out]
    if len(set(ids)) != len(ids):
        raise InputError(f"duplicate document ids: {sorted({i for i in ids if ids.count(i) > 1})[:5]}")
    return out


class Hierarchy:
    """Everything hierarchical retrieval needs: the document index, every document's sentence
    windows with their embeddings (computed at build time), and BM25 over the windows."""

    def __init__(
        self, documents: list[Document], embedder: Embedder, counter: TokenCounter, passage_tokens: int, summary_tokens: int, *, show_progress: bool = False
    ) -> None:
        from tqdm.auto import tqdm

        self.documents = documents
        self.embedder = embedder
        self.counter = counter
        self.index = DocumentIndex(documents, embedder, counter=counter, summary_tokens=summary_tokens)
        self.windows: list[tuple[Document, int, int]] = [(d, a, b) for d in documents for a, b in sentence_windows(d.text, passage_tokens, counter, stride=2)]
        self.lexical = LexicalIndex([f"{d.id}@{a}-{b}" for d, a, b in self.windows], [_window_text(d, a, b) for d, a, b in self.windows], DEFAULT_BM25)
        self._by_id = {f"{d.id}@{a}-{b}": (d, a, b) for d, a, b in self.windows}
        self._lock = threading.Lock()
        self._windows: dict[tuple[int, str], tuple[list[tuple[int, int]], np.ndarray]] = {}
        spans = {d.id: sentence_windows(d.text, passage_tokens, counter) for d in documents}
        flat = [(d, a, b) for d in documents for a, b in spans[d.id]]
        blocks: list[np.ndarray] = []
        bar = tqdm(total=len(flat), desc="meve: embedding windows", unit="window", disable=not show_progress)
        try:
            for start in range(0, len(flat), 256):  # batches, so the bar moves
                batch = flat[start : start + 256]
                blocks.append(np.asarray(embedder.encode([_window_text(*w) for w in batch]), dtype=np.float32))
                bar.update(len(batch))
        finally:
            bar.close()
        vecs = np.concatenate(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)
        at = 0
        for d in documents:
            n = len(spans[d.id])
            self._windows[(passage_tokens, d.id)] = (spans[d.id], vecs[at : at + n])
            at += n

    def windows_of(self, doc: Document, passage_tokens: int) -> tuple[list[tuple[int, int]], np.ndarray]:
        """A document's windows and embeddings; a per-call ``passage_tokens`` other than the built
        one is embedded on first use and kept."""
        key = (passage_tokens, doc.id)
        with self._lock:
            hit = self._windows.get(key)
        if hit is not None:
            return hit
        spans = sentence_windows(doc.text, passage_tokens, self.counter)
        vecs = np.asarray(self.embedder.encode([_window_text(doc, a, b) for a, b in spans]), dtype=np.float32)
        with self._lock:
            self._windows[key] = (spans, vecs)
        return spans, vecs

    def search(self, query: str, k: int) -> list[Passage]:
        hits = self.lexical.search(query, k)
        if not hits:
            return []
        rows = [self._by_id[pid] for pid, _ in hits]
        vecs = self.embedder.encode([_window_text(d, a, b) for d, a, b in rows])
        return [
            Passage(
                id=pid,
                text=d.text[a:b],
                metadata={"doc_id": d.id, "title": d.title, "start": a, "end": b},
                source="retrieved",
                bm25_score=s,
                embedding=vecs[j],
            )
            for j, ((pid, s), (d, a, b)) in enumerate(zip(hits, rows, strict=True))
        ]


def _window_text(doc: Document, start: int, end: int) -> str:
    """What is embedded and BM25-indexed for a window: the title gives the passage its subject."""
    return f"{doc.title}: {doc.text[start:end]}"
