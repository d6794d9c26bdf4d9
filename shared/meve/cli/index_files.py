"""What ``meve index`` reads: the files named on the command line, and the files inside the
folders named there (walked recursively, chosen by ``--include`` / ``--exclude``), each read
into (id prefix, text, metadata) records. A file that cannot be read is reported, not fatal
(:mod:`meve.cli.index_report`)."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meve.core.errors import MeVeError

__all__ = ["DEFAULT_INCLUDE", "READABLE", "Found", "find_files", "read_records"]

READABLE = (".txt", ".md", ".markdown", ".rst", ".json", ".jsonl")
DEFAULT_INCLUDE = tuple(f"*{suffix}" for suffix in READABLE)
Record = tuple[str, str, dict[str, Any]]


@dataclass
class Found:
    """The files to read, in order, each with whether it was named on the command line; what was
    skipped before reading (a folder that cannot be listed), and the files a folder held that
    match no ``--include`` pattern (counted, with a few names: a folder of images is not a list
    of errors)."""

    files: list[tuple[Path, bool]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    """Whether ``rel`` (a path relative to the folder walked, with '/') matches a pattern: one
    without '/' matches the last name, one with '/' the whole relative path; case-insensitive."""
    name = rel.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatchcase(rel.lower() if "/" in p else name, p.lower()) for p in patterns)


def _walk(root: Path, include: Sequence[str], exclude: Sequence[str], skip: Path | None, found: Found) -> list[Path]:
    """The files under ``root`` that ``include`` picks and ``exclude`` leaves, sorted; hidden files and
    folders (a name starting with '.') and the folder ``skip`` (the Chroma directory) are not entered."""
    out: list[Path] = []

    def unreadable(exc: OSError) -> None:
        where = str(exc.filename or root)
        found.skipped.append((where, f"{where}: folder cannot be read ({exc.strerror or exc})"))

    for top, dirs, files in os.walk(root, onerror=unreadable):
        here = Path(top)
        rel_top = here.relative_to(root).as_posix()
        prefix = "" if rel_top == "." else rel_top + "/"
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _matches(prefix + d, exclude) and (skip is None or (here / d).resolve() != skip))
        for name in sorted(files):
            rel = prefix + name
            if name.startswith(".") or _matches(rel, exclude):
                continue
            if _matches(rel, include):
                out.append(here / name)
            else:
                found.unmatched.append(str(here / name))
    return out


def find_files(names: Sequence[str], include: Sequence[str], exclude: Sequence[str], db: str | None = None) -> Found:
    """The files ``meve index`` reads for the paths given: a folder is walked recursively
    (:func:`_walk`), anything else is a file to read as named (a missing one is reported when read).
    A file named twice is refused; one named and also found in a folder, or found in two folders
    given, is read once."""
    found = Found()
    skip = Path(db).expanduser().resolve() if db else None
    seen: dict[str, int] = {}
    named: dict[str, str] = {}
    for name in names:
        path = Path(name)
        explicit = not path.is_dir()
        if explicit:
            key = str(path.resolve())
            if key in named:
                raise MeVeError(f"{name}: given more than once (as {named[key]}); give each file once")
            named[key] = name
        for f in [path] if explicit else _walk(path, include, exclude, skip, found):
            key = str(f.resolve())
            if key in seen:
                at = seen[key]
                found.files[at] = (found.files[at][0], found.files[at][1] or explicit)
                continue
            seen[key] = len(found.files)
            found.files.append((f, explicit))
    return found


def read_records(path: Path) -> list[Record]:
    """(id prefix, text, metadata) records from a txt/md/json/jsonl file; the metadata's ``source``
    is the resolved path, which ``--replace`` deletes by. MeVeError naming the file and why it
    cannot be read."""
    suffix = path.suffix.lower()
    if not path.exists():
        raise MeVeError(f"{path}: no such file or folder; check the path")
    if not path.is_file():
        raise MeVeError(f"{path}: not a regular file; give text files or folders")
    if suffix not in READABLE:
        raise MeVeError(f"{path}: unsupported file type {suffix!r}; allowed: {', '.join(READABLE)}")
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MeVeError(f"{path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}); convert it to UTF-8 text first") from exc
    except OSError as exc:
        raise MeVeError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if "\x00" in raw:  # valid UTF-8 can still be a binary file (NUL bytes): its "text" would be indexed as noise
        raise MeVeError(f"{path}: holds NUL bytes (character {raw.index(chr(0))}), so it is not a text file")
    source = str(path.resolve())
    if suffix in (".json", ".jsonl"):
        return _json_records(path, raw, suffix, source)
    return [(path.name, raw, {"source": source})]


def _json_records(path: Path, raw: str, suffix: str, source: str) -> list[Record]:
    try:
        items = [json.loads(line) for line in raw.splitlines() if line.strip()] if suffix == ".jsonl" else json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MeVeError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    if isinstance(items, dict):
        items = items.get("passages") or items.get("documents") or [items]
    if not isinstance(items, list):
        raise MeVeError(f"{path}: holds a JSON {type(items).__name__}; expected a list of passages, or an object with 'passages' or 'documents'")
    out: list[Record] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append((f"{path.name}:{i}", item, {"source": source}))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            meta: dict[str, Any] = {k: v for k, v in item.items() if k != "text" and isinstance(v, str | int | float | bool)}
            meta["source"] = source
            out.append((str(item.get("id", f"{path.name}:{i}")), item["text"], meta))
        else:
            raise MeVeError(f"{path}: item {i} is neither a str nor an object with a 'text' field")
    return out


@dataclass
class Read:
    """What the files gave: their chunks (id, text, metadata), the sources of the files read
    (resolved paths: what ``--replace`` and a moved folder are matched by), the files skipped
    (path, why), and which of those were named on the command line and could not be read."""

    chunks: list[Record] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def read_all(found: Found, chunk_tokens: int, counter: Any, *, show_progress: bool) -> Read:
    """Read and chunk every file of ``found``; one that cannot be read, holds no text, or whose
    chunk ids another file's chunks already have is skipped with the reason, and the rest are read."""
    from meve.core.progress import progress_bar

    out = Read(skipped=list(found.skipped))
    ids: set[str] = set()
    with progress_bar(len(found.files), desc="meve: reading", unit="file", show=show_progress and len(found.files) > 1) as bar:
        for path, explicit in found.files:
            chunks, why = _chunks(path, chunk_tokens, counter, ids)
            bar.update(1)
            if why is not None:
                out.skipped.append((str(path), why))
                out.failed += [str(path)] if explicit and chunks is None else []
                continue
            ids.update(pid for pid, _, _ in chunks or ())
            out.chunks.extend(chunks or ())
            out.sources.append(str(path.resolve()))
    return out


def _chunks(path: Path, chunk_tokens: int, counter: Any, ids: set[str]) -> tuple[list[Record] | None, str | None]:
    """``path``'s chunks, or why it is skipped: chunks None when it failed (it cannot be read, or
    an earlier file has one of its chunk ids), [] when it was read and holds no text."""
    from meve.cli.index_plan import chunks_of

    try:
        chunks = chunks_of(read_records(path), chunk_tokens, counter)
    except MeVeError as exc:
        return None, str(exc)
    clash = next((pid for pid, _, _ in chunks if pid in ids), None)
    if clash is not None:
        return None, f"{path}: chunk id {clash!r} comes from an earlier file too; give each record its own 'id'"
    if not chunks:  # read, but nothing to index: listed, and not a failure
        return [], f"{path}: no text (an empty file, or records with empty text)"
    return chunks, None
