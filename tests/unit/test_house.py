"""The house rules of the core (docs/architecture.md), checked on the source: each one fails when
a change breaks it (the last test injects a violation of each to prove it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "shared" / "meve"
ADAPTERS = (ROOT / "langchain_meve", ROOT / "llamaindex_meve")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module, package: str) -> set[str]:
    """Modules imported at import time (``if TYPE_CHECKING:`` blocks and function bodies excluded)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == package or m.startswith(package + ".")}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports at import time."""
    modules = {_module_name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = _runtime_imports(ast.parse(path.read_text()), root.name)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            # A package's __init__ importing its own modules is how packages work, not a circle.
            if node == dep.rsplit(".", 1)[0]:
                continue
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name:lines`` of every function or method longer than ``limit`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                out.append(f"{node.name}:{lines}")
    return out


def undocumented(source: str) -> list[str]:
    """Public top-level functions and classes without a docstring."""
    tree = ast.parse(source)
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not n.name.startswith("_") and ast.get_docstring(n) is None
    ]


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def test_the_core_has_no_import_circle():
    assert find_cycle(import_graph(CORE)) is None


@pytest.mark.parametrize("path", _sources(CORE, *ADAPTERS), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_functions_stay_small_and_public_definitions_say_what_they_are(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.name} has {len(source.splitlines())} lines"
    assert long_functions(source) == []
    assert undocumented(source) == []


@pytest.mark.parametrize("package", ADAPTERS, ids=lambda p: p.name)
def test_adapters_reach_the_core_only_through_meve_and_meve_integration(package):
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "meve":
                assert node.module in ("meve", "meve.integration"), f"{path.name} imports {node.module}"
            elif isinstance(node, ast.Import):
                assert not [a.name for a in node.names if a.name.split(".")[0] == "meve"], f"{path.name} imports meve modules directly"


def test_each_rule_catches_a_violation():
    circle = {"meve.a": {"meve.b"}, "meve.b": {"meve.c"}, "meve.c": {"meve.a"}}
    assert find_cycle(circle) == ["meve.a", "meve.b", "meve.c", "meve.a"]
    assert find_cycle({"meve.a": {"meve.b"}, "meve.b": set()}) is None
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert long_functions(f"def f():\n{body}\n") == [f"f:{MAX_FUNCTION_LINES + 1}"]
    assert undocumented("def shown():\n    pass\n\ndef _hidden():\n    pass\n") == ["shown"]


def _all_imports(path: Path) -> set[str]:
    """Every meve module ``path`` imports, at import time or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("meve.")}


def test_the_pipeline_and_the_layers_below_never_import_evaluation_or_the_cli_even_inside_a_function():
    # Issue 65: MeVe.tune imported meve.evaluate.tune inside the method, and meve.evaluate patched a live
    # MeVe's private query encoder: a circle the import-time graph above could not see.
    below = [p for p in CORE.rglob("*.py") if p.relative_to(CORE).parts[0] in ("core", "scoring", "retrieval", "mindref", "pipeline", "memory")]
    offending = {str(p.relative_to(CORE)): sorted(m for m in _all_imports(p) if m.startswith(("meve.evaluate", "meve.cli"))) for p in below}
    assert not {k: v for k, v in offending.items() if v}
    private = [str(p.relative_to(CORE)) for p in (CORE / "evaluate").rglob("*.py") if "._embed_query" in p.read_text() or "._query_encoder" in p.read_text()]
    assert not private  # evaluation uses MeVe.query_vector / run(query_vector=...), never the pipeline's private parts


def private_uses(source: str, name: str) -> list[str]:
    """``name._x`` for every private attribute ``source`` reads or calls on the variable ``name``."""
    found = (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name)
    return sorted({f"{name}.{n.attr}" for n in found if n.attr.startswith("_")})


def test_the_ingest_step_reaches_meve_through_its_public_methods_only():
    # Issue 78: pipeline/ingest.py called MeVe's _shared_pass and _snapshots; MeVe's documented
    # methods (passage_vectors, window_vectors, save_lexical) are the one way in.
    assert private_uses((CORE / "pipeline" / "ingest.py").read_text(), "meve") == []
    assert private_uses("def f(meve):\n    meve._snapshots.save(meve.lexical)\n", "meve") == ["meve._snapshots"]
