"""A long passage's later windows, so dense search finds it by all its text.

Why: a bi-encoder reads a passage's first window (MiniLM: 256 word pieces), so a 1,024-token
node's dense vector says nothing of its last three quarters. Measured on the dev splits of the
long-chunk variants, dense top-20 found a gold chunk for 1.00 of WikiQA questions whose evidence
sits in a chunk's first 240 pieces and 0.21-0.41 deeper (docs/concepts/phases.md). The
verifier's forward pass already reads such a passage window by window (its token vectors), and
each window's sentence vector comes from that pass at no cost; they are kept here, one row per
window after the first, in a Chroma collection beside the passages' (``<name>.windows``), and a
passage's dense score is its best over its own vector and its windows'.

The collection carries ``meve:format`` (:data:`meve.core.formats.FORMATS`, ``passage_windows``)
and the embedder's name. A collection built before it existed has none: it opens with a warning
and :meth:`meve.MeVe.add_windows` makes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from meve.core.formats import FORMATS, found_format
from meve.retrieval.chroma import chroma_call, sibling_collection

__all__ = ["PassageWindows", "windows_name"]

FORMAT = FORMATS["passage_windows"]
_SUFFIX = ".windows"
_OWNER = "meve:passage"


def windows_name(name: str) -> str:
    """The windows collection's name for passages collection ``name`` (within Chroma's 512 characters)."""
    if len(name) + len(_SUFFIX) <= 512:
        return name + _SUFFIX
    return f"{name[:494]}.{hashlib.sha1(name.encode()).hexdigest()[:8]}{_SUFFIX}"


class PassageWindows:
    """The later windows of the passages of one collection (a Chroma collection of their vectors)."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        meta = dict(collection.metadata or {})
        found_format("passage_windows", meta.get("meve:format"), where=f"collection {collection.name!r}")

    @classmethod
    def open(cls, passages: Any, *, create: bool) -> PassageWindows | None:
        """The windows beside Chroma collection ``passages``; made when ``create``, else None where
        there are none (a collection built before meve kept windows, or by another tool)."""
        meta = {"hnsw:space": "cosine", "meve:format": FORMAT, **{k: v for k, v in (passages.metadata or {}).items() if k == "meve:embedder"}}
        found = sibling_collection(passages, windows_name(passages.name), metadata=meta, create=create)
        return cls(found) if found is not None else None

    @property
    def name(self) -> str:
        return str(self.collection.name)

    def add(self, ids: Sequence[str], windows: Sequence[np.ndarray]) -> int:
        """Keep each passage's later windows (rows of unit vectors; none for a passage that fits
        one window). Upserted under ids made of the passage's and the window's number, so a retry
        after a crash writes the same rows again. Returns how many were written."""
        rows = [(f"{pid}::window{j + 1}", pid, v) for pid, w in zip(ids, windows, strict=True) for j, v in enumerate(np.asarray(w, dtype=np.float32))]
        for start in range(0, len(rows), 4096):
            part = rows[start : start + 4096]
            chroma_call(
                f"store {len(part)} window(s) in collection {self.name!r}",
                self.collection.upsert,
                ids=[r[0] for r in part],
                embeddings=np.stack([r[2] for r in part]),
                metadatas=[{_OWNER: r[1]} for r in part],
            )
        return len(rows)

    def best(self, vector: np.ndarray, k: int) -> dict[str, float]:
        """Passage id -> cosine of its best window among the ``k`` windows nearest ``vector``."""
        query = [np.asarray(vector, dtype=np.float32)]
        res = chroma_call(
            f"search windows in collection {self.name!r}", self.collection.query, query_embeddings=query, n_results=k, include=["metadatas", "distances"]
        )
        out: dict[str, float] = {}
        for meta, dist in zip((res.get("metadatas") or [[]])[0], (res.get("distances") or [[]])[0], strict=True):
            pid = str((meta or {}).get(_OWNER))
            out[pid] = max(out.get(pid, -1.0), 1.0 - float(dist))  # cosine space: distance = 1 - cosine
        return out

    def covered(self) -> set[str]:
        """The passages that have windows here."""
        out: set[str] = set()
        offset = 0
        while True:  # in pages: a corpus of long passages has several windows each
            res = chroma_call(f"list windows in collection {self.name!r}", self.collection.get, include=["metadatas"], limit=5000, offset=offset)
            out.update(str((m or {}).get(_OWNER)) for m in res.get("metadatas") or [])
            if len(res["ids"]) < 5000:
                return out
            offset += 5000
