"""Hierarchical retrieval (MindRef, arXiv 2402.17010): documents first, then the passage inside them.

Everything a query needs is computed at ingestion and kept in two Chroma collections:

* ``<name>-documents``: one row per document (its full text, its title, and the embedding of
  its title and lead, the "summary");
* ``<name>-windows``: every sentence window of about ``passage_tokens`` tokens, with its
  ``doc_id`` and character offsets ``start``/``end`` in metadata and its own embedding.

A query embeds once, then only looks things up. :meth:`Hierarchy.select` scores a pool of
documents by five signals (:data:`DOC_SIGNALS`) fused by a min-max weighted sum whose weights
were fitted on dev data; :meth:`Hierarchy.localise` ranks the chosen documents' windows by dense
and BM25 rank (RRF), and MeVe's phases 2-5 run on them unchanged. :meth:`Hierarchy.locate`
finds a quote's exact source with the suffix array of :mod:`meve.locate`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from meve.core.errors import ConfigError, InputError
from meve.core.records import Passage
from meve.core.tokens import TokenCounter
from meve.mindref.documents import (
    DOC_SIGNALS,
    Document,
    DocumentChoice,
    TitleIndex,
    check_doc_weights,
    fuse_documents,
    lead_text,
    sentence_windows,
    window_parts,
)
from meve.mindref.locate import ExactIndex, Span
from meve.retrieval.bm25 import IncrementalBM25, top_k
from meve.retrieval.chroma import check_embedder, chroma_call, similarities
from meve.retrieval.fusion import rrf
from meve.retrieval.store import ChromaStore, Ingestion
from meve.scoring.embedders import embedder_dimension
from meve.scoring.protocols import Embedder, Scorer

__all__ = ["Hierarchy", "Vectors"]

Vectors = Callable[[list[str]], np.ndarray]


class Hierarchy:
    """Documents and their sentence windows in two Chroma collections, with BM25 and a title index
    in memory (built from what the collections hold, so a persistent corpus reopens as it was).

    ``vectors`` embeds texts at ingestion: MeVe passes the forward pass that also caches the
    late-interaction verifier's token vectors, so verification needs no model run at query time.
    """

    def __init__(
        self,
        client: Any,
        name: str,
        embedder: Embedder,
        counter: TokenCounter,
        *,
        passage_tokens: int,
        summary_tokens: int = 64,
        weights: Mapping[str, float] | None = None,
        pool: int = 30,
    ) -> None:
        if isinstance(summary_tokens, bool) or not isinstance(summary_tokens, int) or summary_tokens < 1:
            raise ConfigError("summary_tokens", summary_tokens, "an int >= 1 (tokens of each document's lead embedded with its title)")
        if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= 10_000:
            raise ConfigError("doc_pool", pool, "an int in [1, 10000] (documents each signal contributes to the pool the weights rank)")
        self.embedder, self.counter = embedder, counter
        self.passage_tokens, self.summary_tokens = passage_tokens, summary_tokens
        self.weights = check_doc_weights(weights)
        self.pool = pool
        meta = {"hnsw:space": "cosine", "meve:embedder": embedder.name, "meve:passage_tokens": passage_tokens, "meve:summary_tokens": summary_tokens}
        self._docs, self._wins = (
            chroma_call(f"open collection {name}-{part}", client.get_or_create_collection, f"{name}-{part}", metadata=meta, embedding_function=None)
            for part in ("documents", "windows")
        )
        for col in (self._docs, self._wins):
            check_embedder(col, embedder)
            stored = {k: (col.metadata or {}).get(f"meve:{k}") for k in ("passage_tokens", "summary_tokens")}
            wanted = {"passage_tokens": passage_tokens, "summary_tokens": summary_tokens}
            for key, value in stored.items():
                if value is not None and value != wanted[key]:
                    raise ConfigError(key, wanted[key], f"{value}, the value collection {col.name!r} was built with (windows are made at ingestion)")
        dim = embedder_dimension(embedder)
        self._doc_store = ChromaStore(self._docs, dimension=dim)
        self._win_store = ChromaStore(self._wins, dimension=dim)
        self._lock = threading.Lock()
        self.ids: list[str] = []
        self.titles: list[str] = []
        self.texts: list[str] = []
        self._leads: list[str] = []
        self._position: dict[str, int] = {}
        self._doc_bm25 = IncrementalBM25()
        self._title_index = TitleIndex()
        self._window_ids: list[str] = []
        self._known_windows: set[str] = set()
        self._doc_windows: dict[str, list[int]] = {}
        self._documents_behind = False
        self._window_bm25 = IncrementalBM25()
        self._exact: ExactIndex | None = None
        self._load()

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def windows(self) -> int:
        """How many windows are stored."""
        return len(self._window_ids)

    def collection_names(self) -> tuple[str, str]:
        return self._docs.name, self._wins.name

    def _load(self) -> None:
        """Rebuild the in-memory indexes from the collections (a reopened persistent corpus)."""
        docs = [(i, str(meta.get("title", "")), text) for i, text, meta in self._doc_store.rows(include=["documents", "metadatas"])]
        self._remember_documents(docs, [self._lead(title, text) for _, title, text in docs])
        self._remember_windows([(wid, text) for wid, text, _ in self._win_store.rows()])
        self._documents_behind = self._windows_without_document()

    def _remember_documents(self, rows: Sequence[tuple[str, str, str]], leads: Sequence[str]) -> None:
        """(id, title, text) rows, with their leads as embedded (computed once, by the caller); ids
        already known are skipped (a catch-up may have read them before their own ``add`` got here)."""
        fresh = [(row, lead) for row, lead in zip(rows, leads, strict=True) if row[0] not in self._position]
        rows = [row for row, _ in fresh]
        for (doc_id, title, text), lead in fresh:
            self._position[doc_id] = len(self.ids)
            self._title_index.add(len(self.ids), title)
            self.ids.append(doc_id)
            self.titles.append(title)
            self.texts.append(text)
            self._leads.append(lead)
        self._doc_bm25.add([f"{title}: {text}" for _, title, text in rows])
        self._exact = None

    def _remember_windows(self, rows: Sequence[tuple[str, str]]) -> None:
        """(window id, text) rows: the id names the document, so nothing else is needed. Ids already
        known are skipped, as for documents."""
        rows = [(wid, text) for wid, text in rows if wid not in self._known_windows]
        for wid, _ in rows:
            self._doc_windows.setdefault(window_parts(wid)[0], []).append(len(self._window_ids))
            self._window_ids.append(wid)
            self._known_windows.add(wid)
        self._window_bm25.add([text for _, text in rows])

    def _windows_without_document(self) -> bool:
        """Whether a known window's document is not known yet (a replica stores windows first)."""
        return any(d not in self._position for d in self._doc_windows)

    def _lead(self, title: str, text: str) -> str:
        return lead_text(title, text, self.counter, self.summary_tokens)

    def catch_up(self) -> int:
        """Windows and documents that other handles or processes (app replicas) stored since this
        index last looked, so BM25, titles and localisation find them too. One ``count()`` of the
        windows per call; the documents are counted only when a known window's document is not
        known yet (a replica stores a document's windows before the document). On a difference,
        only the rows after the ones known are read (a full scan if that does not add up).
        Returns how many windows and documents were added."""
        with self._lock:
            known_windows, behind = len(self._window_ids), self._documents_behind
        windows = self._win_store.rows_after(known_windows, self._known_windows)
        added = 0
        if windows:
            with self._lock:
                before = len(self._window_ids)
                self._remember_windows([(wid, text) for wid, text, _ in windows])
                added += len(self._window_ids) - before
                behind = self._documents_behind = self._windows_without_document()
        if behind:
            docs = self._doc_store.rows_after(len(self.ids), self._position, include=["documents", "metadatas"])
            rows = [(i, str(meta.get("title", "")), text) for i, text, meta in docs]
            leads = [self._lead(title, text) for _, title, text in rows]
            with self._lock:
                before = len(self.ids)
                self._remember_documents(rows, leads)
                added += len(self.ids) - before
                self._documents_behind = self._windows_without_document()
        return added

    # -- ingestion ------------------------------------------------------------------------
    def add(self, documents: Sequence[Document], vectors: Vectors, *, show_progress: bool = False, batch_size: int = 256) -> None:
        """Window, embed and store ``documents``; ids already stored (by any handle) are refused."""
        from meve.core.progress import progress_bar

        clash = [d.id for d in documents if d.id in self._position]
        for start in range(0, len(documents), 1000):  # SQLite caps the variables of one statement
            chunk = [d.id for d in documents[start : start + 1000]]
            clash += chroma_call("check document ids", self._docs.get, ids=chunk, include=[])["ids"]
        if clash:
            raise InputError(f"documents already stored: {sorted(set(clash))[:5]}; use new ids")
        windows = [(d, a, b) for d in documents for a, b in sentence_windows(d.text, self.passage_tokens, self.counter)]
        bar = progress_bar(len(windows) + len(documents), desc="meve: embedding windows", unit="text", show=show_progress)
        ingestion = Ingestion([d.id for d in documents])
        self._doc_store.record_ingestion(ingestion, writing=True)  # ended when every document is stored: a crash leaves the mark
        try:
            for start in range(0, len(windows), batch_size):
                batch = windows[start : start + batch_size]
                texts = [d.text[a:b] for d, a, b in batch]
                ids = [f"{d.id}@{a}-{b}" for d, a, b in batch]
                metas: list[Mapping[str, Any] | None] = [{"doc_id": d.id, "title": d.title, "start": a, "end": b} for d, a, b in batch]
                self._win_store.add(ids, texts, metas, vectors(texts))
                with self._lock:
                    self._remember_windows(list(zip(ids, texts, strict=True)))
                bar.update(len(batch))
            for start in range(0, len(documents), batch_size):
                docs = documents[start : start + batch_size]
                leads = [self._lead(d.title, d.text) for d in docs]
                self._doc_store.add([d.id for d in docs], [d.text for d in docs], [{"title": d.title} for d in docs], vectors(leads))
                with self._lock:
                    self._remember_documents([(d.id, d.title, d.text) for d in docs], leads)
                bar.update(len(docs))
        finally:
            bar.close()
        self._doc_store.record_ingestion(ingestion, writing=False)

    # -- document stage -------------------------------------------------------------------
    def nearest_windows(self, query_vec: np.ndarray) -> dict[str, float]:
        """The query's ``3 * pool`` nearest windows (id -> cosine, best first): one unfiltered kNN
        that both stages read, the document stage for its best-window signal and localisation for
        the dense side (the chosen documents' windows among them)."""
        with self._lock:
            n_windows = len(self._window_ids)
        if n_windows == 0:
            return {}
        qv = np.asarray(query_vec, dtype=np.float32)
        # Ids and distances only: the document and offsets are in the id, and Chroma's metadata
        # read costs more than the kNN itself.
        hits = chroma_call("search windows", self._wins.query, query_embeddings=[qv], n_results=min(3 * self.pool, n_windows), include=["distances"])
        return similarities(hits)

    def signals(
        self,
        query: str,
        query_vec: np.ndarray,
        scorer: Scorer | None = None,
        *,
        names: Collection[str] = DOC_SIGNALS,
        nearest: Mapping[str, float] | None = None,
    ) -> dict[str, dict[int, float]]:
        """The signals in ``names`` for the pool of documents: the top ``pool`` by summary cosine,
        by best window and by BM25, and every document whose title the query mentions, each pool
        source only when its signal is asked for (all four when none is). The scorer, when
        given and named, scores the pooled documents' title and lead. ``nearest`` is
        :meth:`nearest_windows` when the caller already has it."""
        wanted = [s for s in ("title", "bm25", "summary", "window") if s in names] or ["title", "bm25", "summary", "window"]
        with self._lock:
            n = len(self.ids)
            bm25 = self._doc_bm25.get_scores(query) if "bm25" in wanted else np.zeros(0)
            mentioned = self._title_index.mentioned(query) if "title" in wanted else set()
        if n == 0:
            return {}
        qv = np.asarray(query_vec, dtype=np.float32)
        pool: set[int] = set(mentioned)
        if bm25.size:
            pool |= {i for i, _ in top_k(bm25, self.pool)}
        summary: dict[str, float] = {}
        if "summary" in wanted:
            found = chroma_call("search documents", self._docs.query, query_embeddings=[qv], n_results=min(self.pool, n), include=["distances"])
            summary = similarities(found)
            pool |= {self._position[d] for d in summary if d in self._position}
        best: dict[str, float] = {}
        if "window" in wanted:
            for wid, sim in (self.nearest_windows(qv) if nearest is None else nearest).items():
                doc = window_parts(wid)[0]
                best[doc] = max(best.get(doc, -1.0), sim)
            pool |= {self._position[d] for d in list(best)[: self.pool] if d in self._position}
        order = sorted(pool)
        out: dict[str, dict[int, float]] = {}
        if "title" in wanted:
            out["title"] = {i: float(i in mentioned) for i in order}
        if "bm25" in wanted:
            out["bm25"] = {i: float(bm25[i]) for i in order}
        if "summary" in wanted:
            missing = [self.ids[i] for i in order if self.ids[i] not in summary]
            if missing:
                got = chroma_call("read document summaries", self._docs.get, ids=missing, include=["embeddings"])
                summary.update({d: _cosine(np.asarray(v, dtype=np.float32), qv) for d, v in zip(got["ids"], got["embeddings"], strict=True)})
            out["summary"] = {i: summary.get(self.ids[i], 0.0) for i in order}
        if "window" in wanted:
            # A document with no window among the nearest has its best window below all of them:
            # the lowest seen is an upper bound, which keeps the signal's order.
            floor = min(best.values()) if best else 0.0
            out["window"] = {i: best.get(self.ids[i], floor) for i in order}
        if scorer is not None and "scorer" in names and order:
            scores = np.asarray(scorer.score(query, [self._leads[i] for i in order], query_vec=qv), dtype=np.float64)
            out["scorer"] = {i: float(s) for i, s in zip(order, scores, strict=True)}
        return out

    def select(
        self, query: str, query_vec: np.ndarray, k: int, scorer: Callable[[], Scorer], *, nearest: Mapping[str, float] | None = None
    ) -> list[DocumentChoice]:
        """The ``k`` best documents. Only the signals with a weight above 0 are computed (the
        scorer is not even asked for otherwise), so a zero weight saves its lookups."""
        names = [name for name, w in self.weights.items() if w > 0]
        signals = self.signals(query, query_vec, scorer() if "scorer" in names else None, names=names, nearest=nearest)
        chosen = fuse_documents(signals, self.weights, k)
        return [
            DocumentChoice(self.ids[i], self.titles[i], round(score, 4), {name: round(values[i], 4) for name, values in signals.items()}) for i, score in chosen
        ]

    # -- passage stage --------------------------------------------------------------------
    def localise(
        self, query: str, query_vec: np.ndarray, documents: Sequence[DocumentChoice], k: int, *, nearest: Mapping[str, float] | None = None
    ) -> list[Passage]:
        """The chosen documents' windows ranked by dense and BM25 rank (RRF), overlapping windows of
        one document collapsed to the better one; the best ``k`` as passages with character offsets.

        Dense side: the chosen documents' windows among the query's nearest windows
        (:meth:`nearest_windows`, shared with the document stage). BM25 side: the ``2k`` best of
        the chosen documents' windows, in memory. Only the ``k`` windows returned are read from
        Chroma, so a long document costs no more than a short one."""
        if not documents:
            return []
        chosen = {d.id for d in documents}
        depth = 2 * k  # room for the windows the overlap rule drops
        with self._lock:
            # In the documents' order, not the set's: BM25 ties then break the same way in every process.
            positions = np.array([p for d in documents for p in self._doc_windows.get(d.id, ())], dtype=np.int64)
            scores = self._window_bm25.get_scores(query)[positions] if positions.size else np.zeros(0)
            lexical = {self._window_ids[int(positions[j])]: float(scores[j]) for j in np.argsort(-scores, kind="stable")[:depth] if scores[j] > 0}
        if not positions.size:
            return []
        near = self.nearest_windows(query_vec) if nearest is None else nearest
        dense_order = [w for w in near if window_parts(w)[0] in chosen][:depth]
        fused = rrf({"dense": dense_order, "bm25": list(lexical)})
        taken: dict[str, list[tuple[int, int]]] = {}
        picked: list[str] = []
        for wid in sorted(fused, key=lambda w: (-fused[w], w)):
            doc, a, b = window_parts(wid)
            if any(a < y and x < b for x, y in taken.get(doc, [])):
                continue  # overlaps a better window of the same document
            taken.setdefault(doc, []).append((a, b))
            picked.append(wid)
            if len(picked) >= k:
                break
        got = chroma_call("read windows", self._wins.get, ids=picked, include=["documents", "metadatas", "embeddings"])
        rows = {w: (t, m, e) for w, t, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True)}
        qv = np.asarray(query_vec, dtype=np.float32)
        doc_score = {d.id: d.score for d in documents}
        out: list[Passage] = []
        for wid in picked:
            if wid not in rows:
                continue  # deleted from the collection by another handle since it was indexed
            text, stored, vec = rows[wid]
            meta = dict(stored or {})
            meta["doc_score"] = doc_score.get(str(meta.get("doc_id", "")), 0.0)
            embedding = np.asarray(vec, dtype=np.float32)
            out.append(
                Passage(
                    id=wid,
                    text=text or "",
                    metadata=meta,
                    source="retrieved",
                    dense_score=near[wid] if wid in near else _cosine(embedding, qv),
                    bm25_score=lexical.get(wid),
                    embedding=embedding,
                )
            )
        return out

    def search(self, query: str, k: int) -> list[Passage]:
        """BM25 over every window of every document (MeVe's fallback)."""
        with self._lock:
            hits = [(self._window_ids[i], s) for i, s in top_k(self._window_bm25.get_scores(query), k)]
        if not hits:
            return []
        got = chroma_call("read windows", self._wins.get, ids=[w for w, _ in hits], include=["documents", "metadatas", "embeddings"])
        rows = {w: (t, m, e) for w, t, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True)}
        return [
            Passage(id=w, text=text or "", metadata=dict(meta or {}), source="retrieved", bm25_score=s, embedding=np.asarray(vec, dtype=np.float32))
            for w, s in hits
            if w in rows
            for text, meta, vec in [rows[w]]
        ]

    def locate(self, quote: str, *, limit: int | None = None) -> list[Span]:
        """Every exact occurrence of ``quote`` in the documents (a suffix array, built on first use)."""
        with self._lock:
            if self._exact is None:
                self._exact = ExactIndex(list(zip(self.ids, self.texts, strict=True)))
            exact = self._exact
        return exact.locate(quote, limit=limit)


def _cosine(vec: np.ndarray, query: np.ndarray) -> float:
    return float(vec @ query) / (float(np.linalg.norm(vec)) or 1.0)
