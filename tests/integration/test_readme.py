"""README's Python blocks run exactly as written, and the extras install what they import.

Each block runs in its own namespace and its own empty working directory (in this process, so
MiniLM loads once). The only stand-ins a block may use are fake chat models named as such,
because no LLM runs offline.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def blocks() -> list[tuple[str, str]]:
    """(section heading, code) of every ```python block, in order."""
    out: list[tuple[str, str]] = []
    section = ""
    in_block: list[str] | None = None
    for line in README.read_text(encoding="utf-8").splitlines():
        if in_block is not None:
            if line.startswith("```"):
                out.append((section, "\n".join(in_block)))
                in_block = None
            else:
                in_block.append(line)
        elif line.startswith("## "):
            section = line[3:].strip()
        elif line.strip() == "```python":
            in_block = []
    return out


BLOCKS = blocks()


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"{i}-{s.split()[0].lower()}" for i, (s, _) in enumerate(BLOCKS)])
def test_readme_block_runs_as_written(index, minilm, tmp_path, monkeypatch, capsys):
    section, code = BLOCKS[index]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEVE_CHAT_MODEL", raising=False)
    exec(compile(code, f"README.md block {index} ({section})", "exec"), {"__name__": f"readme_block_{index}"})
    capsys.readouterr()


def _imports(code: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _closure(extras: set[str]) -> set[str]:
    """Distributions that ``pip install meve[extras]`` brings in (names normalised)."""
    from packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    seen: set[str] = set()
    todo: list[tuple[str, set[str]]] = [("meve", extras)]
    while todo:
        name, wanted = todo.pop()
        key = norm(name)
        if key in seen and not wanted:
            continue
        seen.add(key)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for raw in reqs:
            req = Requirement(raw)
            envs = [{"extra": e} for e in (wanted or {""})]
            if (req.marker is None or any(req.marker.evaluate(env) for env in envs)) and (norm(req.name) not in seen or req.extras):
                todo.append((req.name, set(req.extras)))
    return seen


EXTRA_FOR_SECTION = {"LangChain": {"langchain"}, "LlamaIndex": {"llamaindex"}}


@pytest.mark.parametrize("section", sorted({s for s, _ in BLOCKS}))
def test_the_extra_for_each_section_installs_what_its_blocks_import(section):
    extras = EXTRA_FOR_SECTION.get(section, set())
    closure = _closure(extras)
    providers = metadata.packages_distributions()
    missing = {}
    for sec, code in BLOCKS:
        if sec != section:
            continue
        for module in _imports(code):
            if module in sys.stdlib_module_names or module in ("meve", "langchain_meve", "llamaindex_meve"):
                continue
            dists = {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(module, [])}
            if not dists & closure:
                missing[module] = sorted(dists)
    assert not missing, f"README section {section!r} imports modules that `pip install meve[{','.join(sorted(extras))}]` does not install: {missing}"
