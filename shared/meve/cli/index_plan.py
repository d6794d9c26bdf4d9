"""What ``meve index`` changes in a collection: the files' chunks, their ids, and which chunks are
added, kept or deleted, including for a file whose folder moved since it was indexed."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from meve.core.errors import MeVeError

__all__ = ["Plan", "chunk_id", "chunks_of", "plan"]


def chunk_id(prefix: str, j: int, text: str, meta: dict[str, Any]) -> str:
    """``<prefix>#<j>@<digest>``: the digest covers the file's resolved path (in ``meta``), the
    record, the chunk's place and its text, so files of the same name in two folders never share
    an id, and a changed chunk gets a new id: ``--replace`` adds it before deleting the old one."""
    key = json.dumps([prefix, j, text, meta], sort_keys=True, ensure_ascii=False)
    return f"{prefix}#{j}@{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def chunks_of(records: list[tuple[str, str, dict[str, Any]]], chunk_tokens: int, counter: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, text, metadata) of every chunk of ``records``; an id that comes twice (a JSON file
    holding one record twice) is refused."""
    from meve.core.text import chunk_text

    out: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for prefix, text, meta in records:
        for j, chunk in enumerate(chunk_text(text, chunk_tokens, counter)):
            chunk_meta = {**meta, "chunk": j}
            pid = chunk_id(prefix, j, chunk, chunk_meta)
            if pid in out:
                raise MeVeError(f"chunk id {pid!r} comes twice from the given files; give each record its own 'id'")
            out[pid] = (pid, chunk, chunk_meta)
    return list(out.values())


@dataclass
class Plan:
    """``add``: positions in the chunks to embed and add; ``delete``: stored ids to delete after;
    ``moved``: stored id -> the new source of a chunk kept as it is from a file whose folder moved."""

    add: list[int]
    delete: list[str] = field(default_factory=list)
    moved: dict[str, str] = field(default_factory=dict)
    moved_from: dict[str, str] = field(default_factory=dict)  # old source -> new source


def plan(collection: Any, chunks: list[tuple[str, str, dict[str, Any]]], sources: list[str], replace: bool, name: str) -> Plan:
    """What ``meve index`` changes in an existing collection. A file's old chunks are those stored
    under its source (so a corpus indexed under the former ``<stem>#<j>`` ids is replaced the same
    way), or, for a file with none, under a source of the same file name that no longer exists
    and shares more than half of its chunks with it (its folder moved, :func:`_same_files`): those that are
    unchanged (same place, same text) keep their rows and take the new source, nothing embedded again. Refuses a file already indexed at its path unless
    ``replace``, a moved file whose text changed unless ``replace``, and an id another file holds."""
    from meve.retrieval.chroma import chroma_call

    def stored_under(where: list[str]) -> dict[str, tuple[str, int, str]]:
        got = chroma_call("read the indexed files' chunks", collection.get, where={"source": {"$in": where}}, include=["metadatas", "documents"])
        return {pid: (str(m["source"]), int(m.get("chunk", -1)), d) for pid, m, d in zip(got["ids"], got["metadatas"], got["documents"], strict=True)}

    here = stored_under(sources)
    candidates = _gone_namesakes(collection, [s for s in sources if s not in {v[0] for v in here.values()}])
    gone = stored_under(sorted({a for names in candidates.values() for a in names})) if candidates else {}
    moved_from = _same_files(candidates, gone, chunks)
    old = {**here, **{pid: row for pid, row in gone.items() if row[0] in moved_from}}
    if here and not replace:
        counts: dict[str, int] = {}
        for source, _, _ in here.values():
            counts[source] = counts.get(source, 0) + 1
        named = ", ".join(f"{s} ({n} chunks)" for s, n in sorted(counts.items()))
        raise MeVeError(
            f"already in collection {name!r}: {named}; to index changed files again add --replace "
            "(their new chunks are added first, then their old ones deleted)"
        )
    new_ids = [pid for pid, _, _ in chunks]
    elsewhere = [pid for pid in chroma_call("look up chunk ids", collection.get, ids=new_ids, include=[])["ids"] if pid not in old]
    if elsewhere:
        raise MeVeError(f"chunk id {elsewhere[0]!r} is already in collection {name!r} for another source; nothing was changed")
    by_place = {(moved_from.get(src, src), j, text): pid for pid, (src, j, text) in old.items()}
    keep: dict[int, str] = {}
    for i, (pid, text, meta) in enumerate(chunks):
        found = pid if pid in old else by_place.get((str(meta.get("source")), int(meta.get("chunk", -1)), text))
        if found is not None:
            keep[i] = found
    result = Plan(
        add=[i for i in range(len(chunks)) if i not in keep],
        delete=sorted(set(old) - set(keep.values())),
        moved={pid: str(chunks[i][2]["source"]) for i, pid in keep.items() if old[pid][0] in moved_from},
        moved_from=moved_from,
    )
    if moved_from and not replace and (result.add or result.delete):
        pairs = ", ".join(f"{a} -> {b}" for a, b in sorted(moved_from.items()))
        raise MeVeError(f"already in collection {name!r} from where its folder was ({pairs}), and its text changed; add --replace to index it again")
    return result


def _gone_namesakes(collection: Any, new: list[str], page: int = 1000) -> dict[str, list[str]]:
    """New source -> stored sources of the same file name at paths that no longer exist (its folder
    may have moved); one read of every row's metadata (in pages), only when some given file has no
    chunks at its own path."""
    from meve.retrieval.chroma import chroma_call

    if not new:
        return {}
    names: dict[str, list[str]] = {}
    for s in new:
        names.setdefault(os.path.basename(s), []).append(s)
    found: dict[str, set[str]] = {}
    offset = 0
    while True:
        got = chroma_call("read the indexed sources", collection.get, include=["metadatas"], limit=page, offset=offset)
        for meta in got["metadatas"]:
            source = str((meta or {}).get("source", ""))
            for target in names.get(os.path.basename(source), ()):
                if source != target and not os.path.exists(source):
                    found.setdefault(target, set()).add(source)
        if len(got["ids"]) < page:
            return {t: sorted(s) for t, s in found.items()}
        offset += page


def _same_files(candidates: dict[str, list[str]], gone: dict[str, tuple[str, int, str]], chunks: list[tuple[str, str, dict[str, Any]]]) -> dict[str, str]:
    """Stored source -> new source, for each pair that is one file whose folder moved: the same
    file name, and more than half of the stored file's chunks found unchanged (same place, same
    text) in the new one. A name alone proves nothing (two ``README.md`` of one tree, or a
    deleted ``page.md`` sharing a boilerplate chunk with another document), and a file taken as
    moved has its other chunks deleted by ``--replace``; pairs are matched one to one, most shared first."""
    stored: dict[str, set[tuple[int, str]]] = {}
    for src, j, text in gone.values():
        stored.setdefault(src, set()).add((j, text))
    fresh: dict[str, set[tuple[int, str]]] = {}
    for _, text, meta in chunks:
        fresh.setdefault(str(meta.get("source")), set()).add((int(meta.get("chunk", -1)), text))
    pairs = sorted(
        ((len(stored.get(a, set()) & fresh.get(b, set())), a, b) for b, olds in candidates.items() for a in olds),
        key=lambda t: (-t[0], t[1], t[2]),
    )
    matched: dict[str, str] = {}
    for shared, a, b in pairs:
        if 2 * shared > len(stored.get(a, ())) and a not in matched and b not in matched.values():
            matched[a] = b
    return matched
