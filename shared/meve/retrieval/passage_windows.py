"""A long passage's later windows, so dense search finds it by all its text.

Why: a bi-encoder reads a passage's first window (MiniLM: 256 word pieces), so a 1,024-token
node's dense vector says nothing of its last three quarters. Measured on the dev splits of the
long-chunk variants, dense top-20 found a gold chunk for 1.00 of WikiQA questions whose evidence
sits in a chunk's first 240 pieces and 0.21-0.41 deeper (docs/concepts/phases.md). The
verifier's forward pass already reads such a passage window by window (its token vectors), and
each window's sentence vector comes from that pass at no cost; they are kept here, one row per
window after the first, in a Chroma collection beside the passages' (``<name>.windows``), and a
passage's dense score is its best over its own vector and its windows'.

The collection carries ``meve:format`` (:data:`meve.core.formats.FORMATS`, ``passage_windows``),
the embedder's name and the id of the passages' collection it serves; each window row names its
passage and a digest of the passage's text. So windows never speak for what they were not made
from (issue 78 #3): a window whose digest is not its passage's current text is ignored, ``meve
index --replace`` deletes the windows of the chunks it deletes, and the windows of a deleted
collection are dropped when one of the same name is built (their collection id differs). Rows and
collections written before these marks (meve 0.4.0-0.6.0) are read as before. A collection built
before windows existed has none: it opens with a warning and :meth:`meve.MeVe.add_windows` makes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from meve.core.formats import FORMATS, found_format
from meve.core.logs import log
from meve.retrieval.chroma import chroma_call, delete_sibling, sibling_collection

__all__ = ["PassageWindows", "text_digest", "windows_name"]

FORMAT = FORMATS["passage_windows"]
_SUFFIX = ".windows"
_OWNER = "meve:passage"
_TEXT = "meve:text"
_SERVES = "meve:passages"


def text_digest(text: str) -> str:
    """What a window row records of its passage's text (sha1, 16 hex digits)."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


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
        there are none (a collection built before meve kept windows, or by another tool). Windows
        that serve a deleted collection of the same name are dropped (remade when ``create``)."""
        serves = str(passages.id)
        meta = {"hnsw:space": "cosine", "meve:format": FORMAT, _SERVES: serves, **{k: v for k, v in (passages.metadata or {}).items() if k == "meve:embedder"}}
        name = windows_name(passages.name)
        found = sibling_collection(passages, name, metadata=meta, create=False)
        if found is not None and (found.metadata or {}).get(_SERVES, serves) != serves:
            log.info("meve: the window vectors in %r served a deleted collection of the same name; dropping them", name)
            delete_sibling(passages, name)
            found = None
        if found is None and create:
            found = sibling_collection(passages, name, metadata=meta, create=True)
        return cls(found) if found is not None else None

    @property
    def name(self) -> str:
        return str(self.collection.name)

    def add(self, ids: Sequence[str], windows: Sequence[np.ndarray], texts: Sequence[str]) -> int:
        """Keep each passage's later windows (rows of unit vectors; none for a passage that fits
        one window), each naming its passage and the digest of the passage's ``texts``. Upserted
        under ids made of the passage's and the window's number, so a retry after a crash writes
        the same rows again. Returns how many were written."""
        rows = [
            (f"{pid}::window{j + 1}", {_OWNER: pid, _TEXT: text_digest(text)}, v)
            for pid, w, text in zip(ids, windows, texts, strict=True)
            for j, v in enumerate(np.asarray(w, dtype=np.float32))
        ]
        for start in range(0, len(rows), 4096):
            part = rows[start : start + 4096]
            chroma_call(
                f"store {len(part)} window(s) in collection {self.name!r}",
                self.collection.upsert,
                ids=[r[0] for r in part],
                embeddings=np.stack([r[2] for r in part]),
                metadatas=[r[1] for r in part],
            )
        return len(rows)

    def best(self, vector: np.ndarray, k: int) -> dict[str, dict[str, float]]:
        """Passage id -> {digest of the text the window was made from ("" for a row written before
        digests): cosine of its best window} among the ``k`` windows nearest ``vector``."""
        query = [np.asarray(vector, dtype=np.float32)]
        res = chroma_call(
            f"search windows in collection {self.name!r}", self.collection.query, query_embeddings=query, n_results=k, include=["metadatas", "distances"]
        )
        out: dict[str, dict[str, float]] = {}
        for meta, dist in zip((res.get("metadatas") or [[]])[0], (res.get("distances") or [[]])[0], strict=True):
            by_text = out.setdefault(str((meta or {}).get(_OWNER)), {})
            made_from = str((meta or {}).get(_TEXT, ""))
            by_text[made_from] = max(by_text.get(made_from, -1.0), 1.0 - float(dist))  # cosine space: distance = 1 - cosine
        return out

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the windows of passages ``ids`` (deleted from the passages' collection)."""
        for start in range(0, len(ids), 1000):
            part = list(ids[start : start + 1000])
            chroma_call(f"delete windows in collection {self.name!r}", self.collection.delete, where={_OWNER: {"$in": part}})

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
