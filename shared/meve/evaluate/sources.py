"""The passages of an index a user already has, for ``meve evaluate`` and ``meve tune`` (issue 77 #3).

meve's figures over its own ~105-token chunks say little of an app whose index holds LlamaIndex's
1,024-token nodes or LangChain's 1,000-character chunks: top-k is efficient over small chunks and
wasteful over large ones. These read the app's own chunks, unchanged, so the evaluation runs meve
and top-k over exactly what the app retrieves from: a LlamaIndex persist dir (its docstore), or a
Chroma collection written by langchain-chroma or llama-index-vector-stores-chroma (its documents).
The chunks are embedded again with meve's model for the run: the app's vectors may come from any
model, and both arms (meve and top-k) must rank with the same one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from meve.core.errors import InputError, StoreError

__all__ = ["FOREIGN_NOTE", "chroma_passages", "llamaindex_passages", "made_by_meve"]

FOREIGN_NOTE = (
    "passages: the index's own chunks ({source}), unchanged; meve and every top-k curve rank them with meve's "
    "embedding model (all-MiniLM-L6-v2), embedded again for this run, not with the vectors the app stored"
)


def made_by_meve(collection: Any) -> bool:
    """Whether meve wrote ``collection`` (it records its embedder in the collection's metadata)."""
    return "meve:embedder" in (collection.metadata or {})


def chroma_passages(collection: Any) -> dict[str, str]:
    """A Chroma collection's ids -> stored texts (langchain-chroma's and llama-index-vector-stores-chroma's
    keep each chunk's text as the document). A collection with rows but no text is refused: there is
    nothing to evaluate over."""
    from meve.retrieval.chroma import chroma_call

    got = chroma_call("read the collection's documents", collection.get, include=["documents"])
    pairs = {str(i): d for i, d in zip(got["ids"], got.get("documents") or [], strict=False) if isinstance(d, str) and d.strip()}
    if not pairs:
        raise StoreError(f"collection {collection.name!r} holds {len(got['ids'])} rows and no stored text to evaluate over")
    return pairs


def llamaindex_passages(persist_dir: str | os.PathLike[str]) -> dict[str, str]:
    """A LlamaIndex persist dir's nodes (its docstore): node id -> the node's text. An index whose
    vector store keeps the text (a Chroma store, say) leaves its docstore empty: evaluate that
    collection instead (``--db``)."""
    path = Path(persist_dir).expanduser()
    if not (path / "docstore.json").is_file():
        raise InputError(f"--llamaindex {persist_dir}: no docstore.json there; expected the folder given to storage_context.persist(persist_dir=...)")
    try:
        from llama_index.core import StorageContext
    except ImportError as exc:
        raise InputError('--llamaindex needs llama-index-core: pip install "meve[llamaindex]"') from exc
    docstore = StorageContext.from_defaults(persist_dir=str(path)).docstore
    pairs = {node_id: node.get_content() for node_id, node in docstore.docs.items()}
    pairs = {k: v for k, v in pairs.items() if v.strip()}
    if not pairs:
        raise InputError(
            f"--llamaindex {persist_dir}: its docstore holds no node text (a vector store that keeps the text, such as Chroma, "
            "leaves it empty): pass that Chroma directory with --db and --collection instead"
        )
    return pairs
