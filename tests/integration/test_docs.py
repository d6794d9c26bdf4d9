"""Every code block in README.md and docs/ runs as written, and its output is what the page says.

A ```python block must be followed by a ```text block: the block runs in its own namespace and
its own empty working directory (in this process, so MiniLM loads once) and what it prints must
equal that text. A ```console block's ``$ meve ...`` lines run in one fresh directory, each
followed by the lines it must print. ```bash blocks are set-up commands (make, pip) and are not
run here. The only stand-ins a block may use are fake chat models named as such (no LLM runs
offline). The extras the install page names must install what the blocks import.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: str
    index: int
    lang: str
    code: str
    expected: str | None


def blocks(path: Path) -> list[Block]:
    """The page's python and console blocks, each with the text block after it (if any)."""
    fences: list[tuple[str, str]] = []
    lang, lines = "", None
    for line in path.read_text(encoding="utf-8").splitlines():
        if lines is None and line.startswith("```"):
            lang, lines = line[3:].strip(), []
        elif lines is not None and line.startswith("```"):
            fences.append((lang, "\n".join(lines)))
            lines = None
        elif lines is not None:
            lines.append(line)
    out = []
    for i, (lang, code) in enumerate(fences):
        if lang in ("python", "console"):
            after = fences[i + 1] if i + 1 < len(fences) and fences[i + 1][0] == "text" else None
            out.append(Block(str(path.relative_to(ROOT)), i, lang, code, after[1] if after else None))
    return out


BLOCKS = [b for page in PAGES for b in blocks(page)]


# LlamaIndex before 0.14.5 prints this line (to stdout, beside its DEBUG log) for each store
# load_index_from_storage reads: its own output, not meve's, and not on the pages.
_LLAMAINDEX_LOADING = re.compile(r"Loading llama_index\.core\.storage\.kvstore\.simple_kvstore from .+\.")


def _clean(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if not _LLAMAINDEX_LOADING.fullmatch(line.rstrip()))


def test_the_pages_have_blocks_and_every_python_block_shows_its_output():
    assert len([b for b in BLOCKS if b.page == "README.md"]) >= 4
    missing = [f"{b.page} block {b.index}" for b in BLOCKS if b.lang == "python" and b.expected is None]
    assert not missing, f"python blocks without a ```text output block after them: {missing}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=lambda b: f"{b.page}#{b.index}")
def test_python_block_prints_what_the_page_says(block, minilm, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEVE_CHAT_MODEL", raising=False)
    exec(compile(block.code, f"{block.page} block {block.index}", "exec"), {"__name__": f"docs_block_{block.index}"})
    assert _clean(capsys.readouterr().out) == _clean(block.expected or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a block must clean up after itself (use a temporary directory)"


def _console(code: str) -> list[tuple[list[str], str]]:
    steps: list[tuple[list[str], list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            steps.append((shlex.split(line[2:]), []))
        elif steps:
            steps[-1][1].append(line)
    return [(cmd, "\n".join(out)) for cmd, out in steps]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "console"], ids=lambda b: f"{b.page}#{b.index}")
def test_console_block_prints_what_the_page_says(block, tmp_path):
    exe = Path(sys.executable).parent
    for cmd, expected in _console(block.code):
        assert cmd[0] in ("meve", "cat", "printf"), cmd
        argv = [str(exe / "meve"), *cmd[1:]] if cmd[0] == "meve" else cmd
        out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        got = out.stdout + out.stderr
        assert _clean(got) == _clean(expected), f"$ {shlex.join(cmd)}"


def _imports(code: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(extras: set[str]) -> set[str]:
    """Distributions that ``pip install meve[extras]`` brings in (names normalised)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo: list[tuple[str, set[str]]] = [("meve", extras)]
    while todo:
        name, wanted = todo.pop()
        if _norm(name) in seen and not wanted:
            continue
        seen.add(_norm(name))
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for raw in reqs:
            req = Requirement(raw)
            envs = [{"extra": e} for e in (wanted or {""})]
            if (req.marker is None or any(req.marker.evaluate(env) for env in envs)) and (_norm(req.name) not in seen or req.extras):
                todo.append((req.name, set(req.extras)))
    return seen


def extra_for(modules: set[str]) -> set[str]:
    """The extra the install page names for a block's imports."""
    if modules & {"langgraph"} or "langchain" in modules:
        return {"langchain-agents"}
    if modules & {"langchain_core", "langchain_meve", "langchain_classic", "langchain_text_splitters"}:
        return {"langchain"}
    if modules & {"llama_index", "llamaindex_meve"}:
        return {"llamaindex"}
    return set()


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "python"], ids=lambda b: f"{b.page}#{b.index}")
def test_the_extra_for_a_block_installs_what_it_imports(block):
    modules = _imports(block.code)
    extras = extra_for(modules)
    closure = _closure(extras)
    providers = metadata.packages_distributions()
    missing = {}
    for module in modules:
        if module in sys.stdlib_module_names or module in ("meve", "langchain_meve", "llamaindex_meve"):
            continue
        dists = {_norm(d) for d in providers.get(module, [])}
        if not dists & closure:
            missing[module] = sorted(dists)
    assert not missing, f"{block.page} block {block.index}: `pip install -e .[{','.join(sorted(extras))}]` does not install {missing}"
