"""Passage stores: the Protocol dense search goes through, and its Chroma implementation."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

import numpy as np

from meve.core.errors import InputError, StoreError
from meve.core.logs import log
from meve.core.records import Passage
from meve.retrieval.chroma import chroma_call, warn_if_untimed
from meve.retrieval.directory import directory_lock
from meve.retrieval.passage_windows import PassageWindows, text_digest

__all__ = ["WRITING", "ChromaStore", "Ingestion", "PassageStore", "log_unfinished", "plain_query", "refuse_changed", "stored_texts", "unfinished"]

WRITING = "meve:writing:"  # one collection-metadata key per ingestion under way (or that died unfinished)
_IDS_PER_GET = 1000  # ids per Chroma get: SQLite refuses statements with 32,767+ variables


@runtime_checkable
class PassageStore(Protocol):
    """Where passages and their embeddings live (dense search happens here)."""

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None: ...

    def query(self, vector: np.ndarray, k: int) -> list[Passage]: ...

    def get(self, ids: Sequence[str]) -> list[Passage]: ...

    def documents(self) -> tuple[list[str], list[str]]: ...

    def count(self) -> int: ...


def plain_query(store: PassageStore, vector: np.ndarray, k: int) -> list[Passage]:
    """The ``k`` nearest passages as a plain vector store ranks them (each by its own vector: a
    long one's first window), so a comparison with standard RAG never gains meve's window vectors."""
    return store.query_heads(vector, k) if isinstance(store, ChromaStore) else store.query(vector, k)


class ChromaStore:
    """Passages in one Chroma collection; cosine similarity computed from returned embeddings,
    so collections in any distance space work."""

    def __init__(self, collection: Any, *, dimension: int | None = None) -> None:
        self.collection = collection
        self.dimension = dimension
        #: Long passages' later windows (:mod:`meve.retrieval.passage_windows`), where meve keeps them.
        self.windows: PassageWindows | None = None
        warn_if_untimed(getattr(collection, "_client", None))
        stored = self.stored_dimension()
        if dimension is not None and stored is not None and stored != dimension:
            raise StoreError(
                f"collection {collection.name!r} holds {stored}-dimensional embeddings but the embedder makes {dimension}-dimensional ones; "
                "use the embedder the collection was built with, or another collection"
            )

    def _call(self, what: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return chroma_call(f"{what} in collection {self.collection.name!r}", fn, *args, **kwargs)

    def stored_dimension(self) -> int | None:
        if self._call("count passages", self.collection.count) == 0:
            return None
        peek = self._call("read a passage", self.collection.peek, limit=1)
        embs = peek.get("embeddings")
        if embs is None or len(embs) == 0:
            return None
        return len(embs[0])

    def count(self) -> int:
        return int(self._call("count passages", self.collection.count))

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], embeddings: np.ndarray) -> None:
        """Store the passages. An id already stored with the same text is skipped (a retry after a
        crash); one stored with another text is refused, naming it."""
        if self.dimension is not None and embeddings.shape[1] != self.dimension:
            raise StoreError(f"embeddings have dimension {embeddings.shape[1]}, the store expects {self.dimension}")
        # One hold for the check and the add: Chroma skips an id it already holds without an error,
        # which would lose this text if another process stored the id in between.
        with directory_lock(self.collection):
            stored = self.stored_texts(ids)
            refuse_changed(self.collection.name, ids, texts, stored)
            keep = [i for i, pid in enumerate(ids) if pid not in stored]
            if not keep:
                return
            kwargs: dict[str, Any] = {"ids": [ids[i] for i in keep], "documents": [texts[i] for i in keep]}
            kwargs["embeddings"] = np.asarray(embeddings, dtype=np.float32)[keep]
            if any(metadatas[i] is not None for i in keep):
                kwargs["metadatas"] = [metadatas[i] or None for i in keep]
            self._call(f"store {len(keep)} passage(s) (first id {kwargs['ids'][0]!r})", self.collection.add, **kwargs)

    def stored_texts(self, ids: Sequence[str]) -> dict[str, str]:
        """Id -> stored text of those of ``ids`` the collection holds."""
        out: dict[str, str] = {}
        for start in range(0, len(ids), _IDS_PER_GET):
            res = self._call("check ids", self.collection.get, ids=list(ids[start : start + _IDS_PER_GET]), include=["documents"])
            out.update(zip(res["ids"], (d or "" for d in (res.get("documents") or [None] * len(res["ids"]))), strict=True))
        return out

    def ids(self) -> list[str]:
        """Every stored id, in the order Chroma stored them (one call: paging by offset rescans the rows before each page)."""
        return list(self._call("list ids", self.collection.get, include=[])["ids"])

    def metadata(self) -> dict[str, Any]:
        """The collection's metadata as stored now (the collection object keeps what it was when opened)."""
        col = self.collection
        model = self._call("read the collection's metadata", col._client.get_collection, name=col.name, tenant=col.tenant, database=col.database)
        return dict(model.metadata or {})

    def record_ingestion(self, ingestion: Ingestion, writing: bool) -> None:
        """Start (``writing``) or end one ingestion's key in the collection's metadata, and set
        ``meve:complete`` to whether none is left: several writers each keep their own key, so one
        writer's finish never marks another's rows complete. Read and written under one hold of
        the directory's lock (the metadata is replaced whole)."""
        with directory_lock(self.collection):
            # Chroma refuses a metadata update that names the distance space; the space is kept anyway.
            meta = {k: v for k, v in self.metadata().items() if not k.startswith("hnsw:")}
            if writing:
                meta[ingestion.key] = ingestion.value
            else:
                meta.pop(ingestion.key, None)
            meta["meve:complete"] = not any(k.startswith(WRITING) for k in meta)
            self._call("record ingestion state", self.collection.modify, metadata=meta)

    def _passages(self, ids: list[str], docs: list[Any], metas: list[Any], embs: Any, query: np.ndarray | None) -> list[Passage]:
        out: list[Passage] = []
        for i, pid in enumerate(ids):
            emb = np.asarray(embs[i], dtype=np.float32) if embs is not None else None
            sim = None
            if query is not None and emb is not None:
                norm = float(np.linalg.norm(emb)) or 1.0
                sim = float(emb @ query) / norm
            out.append(Passage(id=pid, text=docs[i] or "", metadata=dict(metas[i] or {}), dense_score=sim, embedding=emb))
        return out

    def query(self, vector: np.ndarray, k: int) -> list[Passage]:
        """The ``k`` nearest passages, each scored by the best of its own vector and its later windows'."""
        passages = self.query_heads(vector, k)
        if self.windows is not None:
            passages = self._with_windows(passages, self.windows.best(vector, k), k)
        return passages

    def query_heads(self, vector: np.ndarray, k: int) -> list[Passage]:
        """The ``k`` nearest passages by their own vectors alone (a long one's first window): what a
        plain vector store's top-k returns, the baseline ``meve evaluate`` compares with."""
        # Chroma returns what it has when k exceeds the collection (tested), so no count() round trip per query.
        res = self._call(
            "search passages",
            self.collection.query,
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=k,
            include=["documents", "metadatas", "embeddings"],
        )
        if not res["ids"] or not res["ids"][0]:
            return []
        passages = self._passages(res["ids"][0], res["documents"][0], res["metadatas"][0], res["embeddings"][0], np.asarray(vector, dtype=np.float32))
        return sorted(passages, key=lambda p: -(p.dense_score or 0.0))

    def _with_windows(self, passages: list[Passage], best: dict[str, dict[str, float]], k: int) -> list[Passage]:
        """Each passage scored by the best of its own vector and its later windows' (those made
        from its current text, or written before windows named it), the passages found by a
        window alone read in; the ``k`` best."""
        have = {p.id for p in passages}
        found = passages + self.get([pid for pid in best if pid not in have])

        def window(p: Passage) -> float:
            kept = best.get(p.id, {})
            return max((v for made_from, v in kept.items() if made_from in ("", text_digest(p.text))), default=-1.0)

        scored = [p.with_(dense_score=max(p.dense_score if p.dense_score is not None else -1.0, window(p))) for p in found]
        return sorted(scored, key=lambda p: -(p.dense_score or 0.0))[:k]

    def get(self, ids: Sequence[str]) -> list[Passage]:
        if not ids:
            return []
        res = self._call("read passages", self.collection.get, ids=list(ids), include=["documents", "metadatas", "embeddings"])
        by_id = {p.id: p for p in self._passages(res["ids"], res["documents"], res["metadatas"], res["embeddings"], None)}
        return [by_id[i] for i in ids if i in by_id]

    def rows(self, offset: int = 0, include: Sequence[str] = ("documents",), page: int = 5000) -> list[tuple[str, str, dict[str, Any]]]:
        """(id, text, metadata) of every row from ``offset`` on, in the order Chroma stored them."""
        out: list[tuple[str, str, dict[str, Any]]] = []
        while True:
            res = self._call("read passages", self.collection.get, include=list(include), limit=page, offset=offset)
            if not res["ids"]:
                return out
            docs = res.get("documents") or [""] * len(res["ids"])
            metas = res.get("metadatas") or [None] * len(res["ids"])
            out.extend((i, d or "", dict(m or {})) for i, d, m in zip(res["ids"], docs, metas, strict=True))
            offset += len(res["ids"])

    def documents(self, page: int = 5000, offset: int = 0) -> tuple[list[str], list[str]]:
        """Every passage's id and text from ``offset`` on, in the order Chroma stored them."""
        rows = self.rows(offset, page=page)
        return [i for i, _, _ in rows], [t for _, t, _ in rows]

    def rows_after(self, known: int, known_ids: Collection[str], include: Sequence[str] = ("documents",)) -> list[tuple[str, str, dict[str, Any]]]:
        """The rows that other handles or processes (app replicas) stored and ``known_ids`` lacks:
        one ``count()``, and only on a difference the rows after the first ``known`` (Chroma keeps
        stored order), or every row if that does not add up (rows deleted meanwhile)."""
        total = self.count()
        if total <= known:
            return []
        new = [r for r in self.rows(known, include) if r[0] not in known_ids]
        if known + len(new) < total:
            new = [r for r in self.rows(0, include) if r[0] not in known_ids]
        return new


def stored_texts(store: PassageStore, ids: Sequence[str]) -> dict[str, str]:
    """Id -> stored text of those of ``ids`` that ``store`` holds (any PassageStore)."""
    if isinstance(store, ChromaStore):
        return store.stored_texts(ids)
    return {p.id: p.text for start in range(0, len(ids), _IDS_PER_GET) for p in store.get(ids[start : start + _IDS_PER_GET])}


def refuse_changed(collection: str, ids: Sequence[str], texts: Sequence[str], stored: Mapping[str, str]) -> None:
    """InputError naming the ids ``stored`` holds with a text other than the one given."""
    changed = sorted(pid for pid, text in zip(ids, texts, strict=True) if pid in stored and stored[pid] != text)
    if changed:
        raise InputError(
            f"ids already in collection {collection!r} with another text: {changed[:5]}; use new ids "
            "(re-adding an id with the text it holds is skipped, so a retry after a crash is safe)"
        )


class Ingestion:
    """One ``from_texts``/``add_texts`` call as the collection's metadata records it while it runs:
    the key is a digest of its ids (the same call retried has the same key, and its finish clears
    the mark a crashed try left), the value says who started it and when."""

    def __init__(self, ids: Sequence[str]) -> None:
        digest = hashlib.sha1("\x00".join(ids).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self.key = f"{WRITING}{digest}"
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.value = f"the ingestion of {len(ids)} passage(s) from id {ids[0]!r} by process {os.getpid()} on {socket.gethostname()} at {started}"


def unfinished(metadata: Mapping[str, Any] | None) -> list[str]:
    """What the collection's metadata says about ingestions that have not finished: one line each
    (a legacy ``meve:complete`` of False without keys is one line too)."""
    meta = dict(metadata or {})
    found = [str(v) for k, v in sorted(meta.items()) if k.startswith(WRITING)]
    if not found and meta.get("meve:complete") is False:
        found = ["an ingestion recorded before meve marked each one"]
    return found


def log_unfinished(name: str, metadata: Mapping[str, Any] | None) -> None:
    """A warning per unfinished ingestion of collection ``name`` (see :func:`unfinished`)."""
    for line in unfinished(metadata):
        log.warning(
            "collection %r is incomplete: %s has not finished (it is still running, or it crashed), so some passages may be missing; "
            "run the same call again (ids stored with the same text are skipped)",
            name,
            line,
        )
