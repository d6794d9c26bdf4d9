"""Putting passages into a MeVe's corpus: their vectors (and a long passage's later windows), the
store, BM25, and the mark in the collection that says an ingestion is under way.

Order, for a crash at any point: an ingestion's mark is set before its first batch and cleared
after its last; within a batch, windows are written before the passages they belong to (upserted,
so a retry writes the same rows), so a stored passage always has its windows. The MeVe is reached
through its documented members only (:meth:`~meve.pipeline.meve.MeVe.passage_vectors`,
:meth:`~meve.pipeline.meve.MeVe.window_vectors`, :meth:`~meve.pipeline.meve.MeVe.save_lexical`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from meve.core.heap import trim
from meve.core.languages import warn_if_unreadable
from meve.core.logs import log
from meve.core.progress import progress_bar
from meve.core.tokens import count_many, stamp, stamp_key
from meve.retrieval.passage_windows import PassageWindows
from meve.retrieval.store import ChromaStore, Ingestion, refuse_changed, stored_texts

if TYPE_CHECKING:
    from meve.pipeline.meve import MeVe

__all__ = ["add_windows", "ingest", "open_windows"]


def open_windows(store: ChromaStore, *, create: bool) -> None:
    """Give ``store`` the windows collection beside it (made when ``create`` and the collection is
    empty). A collection meve built before it kept windows has none (and gets none here, or its
    older passages would pass for having theirs): a warning says what its long passages lose and
    the call that makes them."""
    store.windows = PassageWindows.open(store.collection, create=create and store.count() == 0)
    if store.windows is None and "meve:embedder" in store.metadata():
        log.warning(
            "meve: collection %r has no window vectors (built by a meve before 0.4.0): a passage longer than the embedder's window "
            "is found by its first window and by BM25 only; MeVe.add_windows(), or `meve index --replace` on its files, makes them",
            store.collection.name,
        )


def ingest(meve: MeVe, texts: list[str], ids: list[str], metas: list[dict[str, Any] | None], *, show_progress: bool, batch_size: int) -> None:
    """Embed and store passages in batches (see the module docstring for the order)."""
    store = meve.store
    assert store is not None, "ingestion needs a passage store"
    ingestion = Ingestion(ids)
    warn_if_unreadable(f"the {len(texts)} passage(s) being indexed", texts, meve.embedder.name)
    done = _retried(meve, texts, ids)
    rows = [i for i, pid in enumerate(ids) if pid not in done]
    texts, ids, metas = [texts[i] for i in rows], [ids[i] for i in rows], [metas[i] for i in rows]
    bar = progress_bar(len(texts), desc="meve: embedding", unit="passage", show=show_progress)
    kept = store.windows if isinstance(store, ChromaStore) else None
    _record(meve, ingestion, writing=True)  # ended only when every batch is stored: a crash leaves the mark
    try:
        key = stamp_key(meve.token_counter)
        for start in range(0, len(texts), batch_size):
            sl = slice(start, start + batch_size)
            vecs, wins = meve.passage_vectors(texts[sl], windows=kept is not None)
            batch = metas[sl]
            if key is not None:
                counts = count_many(meve.token_counter, texts[sl])
                batch = [{**(m or {}), key: stamp(t, n)} for m, t, n in zip(batch, texts[sl], counts, strict=True)]
            if kept is not None and wins is not None:
                kept.add(ids[sl], wins, texts[sl])
            store.add(ids[sl], texts[sl], batch, vecs)
            meve.lexical.add(ids[sl], texts[sl])
            trim()  # the batch's activations are freed; give their pages back (meve.core.heap)
            bar.update(len(texts[sl]))
    finally:
        bar.close()
    _record(meve, ingestion, writing=False)
    meve.save_lexical()


def add_windows(meve: MeVe, *, show_progress: bool = False, batch_size: int = 256) -> int:
    """Make the windows of every stored passage that has none (a collection built before meve kept
    them); returns how many windows were written. Passages that fit one window have none, and
    are read again (tokenized only) on a later call."""
    store = meve.store
    if not isinstance(store, ChromaStore):
        raise TypeError("add_windows needs a MeVe over a Chroma collection (from_texts or from_chroma); a LangChain vector store keeps no windows")
    kept = store.windows or PassageWindows.open(store.collection, create=True)
    assert kept is not None  # made when asked
    store.windows = kept
    have = kept.covered()
    todo = [(pid, text) for pid, text, _ in store.rows() if pid not in have]
    written = 0
    with progress_bar(len(todo), desc="meve: windows", unit="passage", show=show_progress) as bar:
        for start in range(0, len(todo), batch_size):
            part = todo[start : start + batch_size]
            wins = meve.window_vectors([t for _, t in part])
            if wins is None:
                raise TypeError(f"embedder {meve.embedder.name!r} cannot make window vectors (meve's sentence-transformers embedder can)")
            written += kept.add([pid for pid, _ in part], wins, [t for _, t in part])
            bar.update(len(part))
    return written


def _retried(meve: MeVe, texts: Sequence[str], ids: Sequence[str]) -> set[str]:
    """The ids the store already holds with these texts (a retry: nothing to embed); refuses
    ids it holds with another text before anything is embedded. BM25 learns the stored ones
    (a crash can come after Chroma stored a batch and before BM25 saw it)."""
    assert meve.store is not None
    stored = stored_texts(meve.store, ids)
    refuse_changed(getattr(getattr(meve.store, "collection", None), "name", "the store"), ids, texts, stored)
    meve.lexical.add(list(stored), list(stored.values()))
    return set(stored)


def _record(meve: MeVe, ingestion: Ingestion, *, writing: bool) -> None:
    if isinstance(meve.store, ChromaStore):  # a LangChain VectorStore keeps no collection metadata
        meve.store.record_ingestion(ingestion, writing)
