"""What a MeVe derives from its collection, kept beside it so that a restart (a new replica)
neither re-reads every passage nor re-encodes one: the BM25 index (a snapshot, caught up with the
rows added after it) and the verifier's compressed token vectors (:mod:`meve.scoring.token_store`).

Where: ``index_dir`` when given; for a persistent Chroma client ``<its directory>/meve/<collection>``;
nowhere for an in-memory or HTTP client unless ``index_dir`` is given (a server's disk is not this
process's, so ask for a local folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from meve.core.errors import ConfigError, StoreError
from meve.core.formats import FormatError
from meve.core.heap import trim
from meve.core.logs import log
from meve.retrieval.lexical import Lexical, LexicalIndex
from meve.retrieval.store import ChromaStore

__all__ = ["Snapshots", "check_index_dir", "index_dir_for", "open_lexical"]


def check_index_dir(index_dir: object) -> Path | None:
    """``index_dir`` as a Path (None stays None), or ConfigError naming it; checked before any model loads."""
    if index_dir is None:
        return None
    if isinstance(index_dir, bool) or not isinstance(index_dir, str | os.PathLike) or not str(index_dir).strip():
        raise ConfigError("index_dir", index_dir, "a folder path (str or PathLike), or None for the default beside a persistent collection")
    return Path(index_dir)


def index_dir_for(collection: Any, index_dir: Path | None) -> Path | None:
    """The folder for ``collection``'s derived indexes (see the module docstring), or None."""
    if index_dir is not None:
        return index_dir
    settings = getattr(getattr(collection, "_client", None), "get_settings", None)
    try:
        s = settings() if callable(settings) else None
    except Exception:  # an HTTP client that cannot reach its server answers nothing useful here
        s = None
    if s is None or not getattr(s, "is_persistent", False) or getattr(s, "chroma_api_impl", "").endswith("FastAPI"):
        return None
    return Path(s.persist_directory) / "meve" / collection.name


def open_lexical(store: ChromaStore, directory: Path | None, backend: str) -> tuple[LexicalIndex, Snapshots]:
    """The BM25 index over ``store``: the last snapshot under ``directory`` corrected to the
    collection's ids (the rows added since are indexed; rows deleted since make it rebuild), else
    built from every row (and saved). A snapshot that cannot be read is rebuilt, with a warning.
    Rows that another writer deletes while this index is open are not seen (as for any open replica)."""
    snaps = Snapshots(directory / "bm25" if directory is not None and backend == "incremental" else None)
    lexical = _loaded(snaps.path)
    if lexical is not None:
        snaps.rows = len(lexical)
        lexical = _corrected(lexical, store, snaps.path)
    if lexical is None:
        snaps.rows = 0  # rebuilt: the next save_if_due replaces the snapshot
        ids, texts = store.documents() if store.count() else ([], [])
        lexical = LexicalIndex(ids, texts, backend)
    snaps.save_if_due(lexical)
    return lexical, snaps


def _loaded(path: Path | None) -> LexicalIndex | None:
    """The snapshot at ``path``; None when there is none, or (with a warning) when it cannot be read."""
    if path is None:
        return None
    try:
        return LexicalIndex.load(path)
    except FormatError:
        raise  # a newer meve's snapshot: rebuilding would delete it under that meve
    except StoreError as exc:
        log.warning("meve: %s; rebuilding it from the collection", str(exc).split("; delete")[0])
        return None


def _corrected(lexical: LexicalIndex, store: ChromaStore, path: Path | None) -> LexicalIndex | None:
    """``lexical`` (a loaded snapshot) with the rows the collection gained since, or None when it
    lost some (the snapshot would still find them: rebuild). One read of every id, then the texts
    of the new ones only."""
    stored = store.ids()
    have = set(stored)
    gone = sum(1 for pid in lexical.ids if pid not in have)
    if gone:
        log.info("meve: %d row(s) of the BM25 snapshot in %s are no longer in the collection; rebuilding it", gone, path)
        return None
    texts = store.stored_texts([pid for pid in stored if pid not in lexical])
    new = [pid for pid in stored if pid in texts]  # in stored order; a row deleted meanwhile is left out
    lexical.add(new, [texts[pid] for pid in new])
    log.info("meve: BM25 snapshot of %d rows loaded from %s, %d added since", len(lexical) - len(new), path, len(new))
    return lexical


class Snapshots:
    """When to write the BM25 snapshot: after the index grew by 5% (at least one row) since the
    last one, so ingesting n passages in any number of calls writes O(log n) snapshots, and a
    replica starting in between catches up on at most 5% of the rows."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rows = 0

    def save_if_due(self, lexical: Lexical) -> bool:
        n = len(lexical)
        if not isinstance(lexical, LexicalIndex) or self.path is None or n == 0 or n - self.rows < max(1, self.rows // 20):
            return False
        lexical.save(self.path)
        # The save's merged arrays and JSON are freed now, but glibc keeps their pages: they were
        # ~4 MB per 1k passages of from_texts's resident growth (BENCHMARKS.md, "Scale").
        trim()
        self.rows = n
        return True
