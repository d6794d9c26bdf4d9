"""A BM25 index addressed by passage id, its snapshot on disk, and lexical search over a given
candidate list."""

from __future__ import annotations

import fcntl
import json
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from meve.core.durable import write_atomically
from meve.core.errors import ConfigError, StoreError
from meve.core.formats import FORMATS, FormatError, found_format
from meve.core.records import Passage
from meve.retrieval.bm25 import DEFAULT_BM25, BM25Backend, IncrementalBM25, make_bm25, top_k

if TYPE_CHECKING:
    from meve.retrieval.store import ChromaStore

__all__ = ["Lexical", "LexicalIndex", "LexicalSearch", "local_lexical"]

#: (query, k) -> the k best passages by BM25, each with its ``bm25_score``.
LexicalSearch = Callable[[str, int], list[Passage]]


@runtime_checkable
class Lexical(Protocol):
    """What a MeVe asks of its lexical side (BM25 hits by passage id). :class:`LexicalIndex` is
    meve's in-process one; a search engine that ranks by BM25 (OpenSearch or Elasticsearch with a
    ``match`` query, Vespa, Tantivy) serves the same calls when one machine's index is not enough:
    ``add`` indexes (or does nothing when the engine is fed by its own pipeline), ``catch_up`` is
    a no-op there (every replica queries the same engine), ``search`` returns its hits."""

    def add(self, ids: Sequence[str], texts: Sequence[str]) -> None: ...

    def search(self, query: str, k: int) -> list[tuple[str, float]]: ...

    def catch_up(self, store: ChromaStore) -> int: ...

    def __contains__(self, pid: object) -> bool: ...

    def __len__(self) -> int: ...


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

    def __len__(self) -> int:
        return len(self.ids)

    def save(self, directory: str | Path) -> Path:
        """Write a snapshot of the index under ``directory`` and return its folder. The snapshot is
        written whole into a new folder, flushed to disk, and then named in ``CURRENT`` (written
        and renamed the same way), so a crash leaves the last snapshot or this one, never half of
        one. Savers take turns under the folder's lock, so whatever else is there is left by one
        that was killed: it is removed, and so is the previous snapshot once this one is named."""
        if not isinstance(self.backend, IncrementalBM25):
            raise ConfigError("bm25_backend", self.backend_name, "'incremental' (the only backend whose index can be saved)")
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        with self._lock:
            terms, arrays = self.backend.arrays()
            ids = list(self.ids)
        with _locked(root, fcntl.LOCK_EX):
            previous = _current(root)
            for stray in (p for p in root.iterdir() if p.name not in ("lock", "CURRENT", previous)):
                shutil.rmtree(stray) if stray.is_dir() else stray.unlink()
            folder = root / f"snapshot-{len(ids)}-{uuid.uuid4().hex[:8]}"
            folder.mkdir()
            for name, arr in arrays.items():
                write_atomically(folder / f"{name}.npy", partial(np.save, arr=arr))
            write_atomically(folder / "terms.json", json.dumps(terms).encode("utf-8"))
            write_atomically(folder / "ids.json", json.dumps(ids).encode("utf-8"))
            write_atomically(folder / "format.json", json.dumps({"format": FORMATS["bm25_snapshot"]}).encode("utf-8"))
            write_atomically(root / "CURRENT", folder.name.encode("utf-8"))
            if previous:
                shutil.rmtree(root / previous, ignore_errors=True)
        return folder

    @classmethod
    def load(cls, directory: str | Path) -> LexicalIndex | None:
        """The snapshot :meth:`save` last completed under ``directory`` (memory-mapped), or None if
        there is none yet; StoreError if it cannot be read or does not add up, FormatError if a
        newer meve wrote it (``format.json``; a snapshot without one predates the marker and is
        format 1, the same layout)."""
        current = Path(directory) / "CURRENT"
        if not current.exists():
            return None
        try:
            # Shared lock: a saver cannot remove the snapshot while it is opened (a mapped file
            # outlives its deletion, so reading it after the lock is safe).
            with _locked(Path(directory), fcntl.LOCK_SH):
                folder = Path(directory) / current.read_text(encoding="utf-8").strip()
                marker = folder / "format.json"
                said = json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else {}
                if not isinstance(said, dict):
                    raise ValueError(f"{str(marker)!r} holds {type(said).__name__}, not a JSON object")
                found_format("bm25_snapshot", said.get("format"), where=f"the BM25 snapshot in {str(directory)!r}")  # the one check
                arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ("indptr", "docs", "tfs", "dls", "lengths")}
                terms = json.loads((folder / "terms.json").read_text(encoding="utf-8"))
                ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
            _check_snapshot(folder, terms, ids, arrays)
        except FormatError:
            raise
        except (OSError, ValueError, EOFError) as exc:  # EOFError: np.load of an emptied file
            where = str(directory)
            raise StoreError(f"the BM25 snapshot in {where!r} cannot be read ({exc}); delete {where!r} and it is rebuilt from the collection") from exc
        index = cls([], [], "incremental")
        index.backend = IncrementalBM25.from_arrays(terms, arrays)
        index.ids, index._known = ids, set(ids)
        return index

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


def _current(root: Path) -> str | None:
    """The snapshot folder ``CURRENT`` names, if it names one that exists."""
    try:
        name = (root / "CURRENT").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name if name and "/" not in name and (root / name).is_dir() else None


def _check_snapshot(folder: Path, terms: object, ids: object, arrays: dict[str, np.ndarray]) -> None:
    """ValueError unless the snapshot's parts fit together (parts from different saves, or cut
    short, can read without error and would score the wrong documents)."""
    docs, indptr, lengths = arrays["docs"], arrays["indptr"], arrays["lengths"]
    if not isinstance(terms, list) or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{folder.name}: terms.json and ids.json must hold lists")
    parts_agree = arrays["tfs"].shape == docs.shape == arrays["dls"].shape and indptr.shape == (len(terms) + 1,) and lengths.shape == (len(ids),)
    # Shapes and the last offset only: reading every posting here would page the whole file in at each open.
    if not parts_agree or (len(indptr) and int(indptr[-1]) != len(docs)):
        raise ValueError(f"{folder.name}: its arrays, terms and ids do not describe one index")


@contextmanager
def _locked(root: Path, mode: int) -> Iterator[None]:
    with open(root / "lock", "a+b") as fh:
        fcntl.flock(fh, mode)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def local_lexical(passages: Sequence[Passage]) -> LexicalSearch:
    """Fallback source over a given candidate list: BM25 hits first, then the rest in input order
    (top-N). The index is built on the first search: most queries verify enough and never search."""
    built: list[IncrementalBM25] = []

    def search(query: str, k: int) -> list[Passage]:
        if not built:
            built.append(IncrementalBM25([p.text for p in passages]))
        scores = built[0].get_scores(query)
        order = [i for i, _ in top_k(scores, len(passages))]
        ranked = set(order)
        order += [i for i in range(len(passages)) if i not in ranked]
        return [passages[i].with_(bm25_score=float(scores[i])) for i in order[:k]]

    return search
