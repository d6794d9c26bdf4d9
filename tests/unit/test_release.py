"""Releases a user can follow: one version, a CHANGELOG entry for it that names the stored formats
it writes, and an upgrade note for every format."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import tomllib

import meve
from meve.core.formats import FORMATS

ROOT = Path(__file__).resolve().parents[2]


def _releases() -> list[tuple[str, dict[str, int]]]:
    """(version, formats line) of each CHANGELOG release, newest first."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    out = []
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        version = block.split()[0]
        line = re.search(r"^Formats: (.+)$", block, flags=re.M)
        assert line is not None, f"CHANGELOG's {version} names no formats"
        out.append((version, {k: int(v) for k, v in (part.strip().split() for part in line.group(1).split(","))}))
    return out


def test_the_version_is_the_changelogs_newest_release_and_pyproject_reads_it_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in project["project"]["dynamic"] and project["tool"]["hatch"]["version"]["path"] == "shared/meve/__init__.py"
    assert _releases()[0][0] == meve.__version__


def test_the_newest_release_names_the_formats_this_code_writes_and_a_format_change_is_a_new_release():
    releases = _releases()
    assert releases[0][1] == dict(FORMATS)  # a format changed without a CHANGELOG entry saying so fails here
    versions = [v for v, _ in releases]
    assert len(set(versions)) == len(versions)
    for (newer, f_new), (older, f_old) in itertools.pairwise(releases):
        assert all(f_new[k] >= f_old.get(k, 0) for k in f_new), f"{newer} lowers a format of {older}"


def test_the_upgrade_note_covers_every_format():
    note = (ROOT / "docs" / "upgrade.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in note.splitlines() if line.startswith("| ") and line.count("|") >= 5}
    described = {
        "token_store": "token vectors",
        "bm25_snapshot": "BM25 snapshot",
        "memory_session": "chat session",
        "config_file": "config",
        "passage_windows": "window vectors",
        "token_cache": "token-vector cache",
    }
    assert set(described) == set(FORMATS)  # a new persisted format needs a row here and in the note
    for kind, words in described.items():
        row = next((line for name, line in rows.items() if words in name), None)
        assert row is not None and f"| {FORMATS[kind]} |" in row, f"docs/upgrade.md has no row for {kind} at format {FORMATS[kind]}"


def test_make_test_oldest_installs_the_floors_pyproject_declares():
    # Issue 78: the declared ranges are tested at their lowest (`make test-oldest`); its pins may not drift from them.
    import re

    from packaging.requirements import Requirement

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    floors: dict[str, str] = {}
    for raw in re.findall(r'"([A-Za-z0-9_.\-\[\]]+\s*>=[^"]+)"', pyproject):
        req = Requirement(raw)
        low = [s.version for s in req.specifier if s.operator == ">="]
        if low:
            floors[req.name.lower()] = max(
                floors.get(req.name.lower(), low[0]), low[0], key=lambda v: [int(x) for x in v.split(".")]
            )  # all extras: the highest
    pins = dict(line.split("==") for line in (ROOT / ".ci" / "oldest.txt").read_text().splitlines() if "==" in line and not line.startswith("#"))
    assert {"chromadb", "langchain-core", "llama-index-core", "sentence-transformers", "transformers"} <= set(pins)
    for name, version in pins.items():
        assert floors.get(name) is not None and Requirement(f"{name}>={floors[name]}").specifier.contains(version), name
        assert version.split(".")[:3] == floors[name].split(".")[:3] + ["0"] * (3 - len(floors[name].split("."))), (
            f"{name}: pinned {version}, floor {floors[name]}"
        )
