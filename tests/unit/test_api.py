import subprocess
import sys

import pytest

import meve


def test_public_api_is_pinned():
    # One name per concept, at most 20 (issue 36): anything else lives in a sub-package.
    assert sorted(meve.__all__) == sorted(
        [
            "ConfigError",
            "ContextResult",
            "CrossEncoderScorer",
            "Embedder",
            "InputError",
            "LateInteractionScorer",
            "MeVe",
            "MeVeConfig",
            "MeVeError",
            "MemoryConfig",
            "MemoryContext",
            "MomentaryMemory",
            "Passage",
            "PhaseRecord",
            "Scorer",
            "SentenceTransformerEmbedder",
            "StoreError",
            "TokenCounter",
            "Turn",
            "get_token_counter",
        ]
    )
    assert len(meve.__all__) <= 20
    for name in meve.__all__:
        assert hasattr(meve, name), name


def test_the_evaluate_api_is_pinned():
    import meve.evaluate

    assert sorted(meve.evaluate.__all__) == ["Question", "Report", "TuneResult", "evaluate", "evaluate_memory", "load_questions", "tune"]
    for name in meve.evaluate.__all__:
        assert hasattr(meve.evaluate, name), name
    assert not hasattr(meve.MeVe, "tune") and callable(meve.MeVe.query_vector)  # tune is evaluation's, not the pipeline's


def test_errors_are_value_errors():
    assert issubclass(meve.MeVeError, ValueError)
    for cls in (meve.ConfigError, meve.InputError, meve.StoreError):
        assert issubclass(cls, meve.MeVeError)


HEAVY = ("torch", "sentence_transformers", "transformers", "chromadb", "tiktoken", "bm25s")


@pytest.mark.parametrize("module", ["meve", "langchain_meve", "llamaindex_meve", "meve.cli", "meve.evaluate"])
def test_importing_a_package_loads_no_heavy_dependency(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "", f"import {module} loaded {out.stdout.strip()}"


def test_one_class_per_name_across_packages():
    import langchain_meve
    import llamaindex_meve

    owners: dict[str, list[str]] = {}
    for pkg in (meve, langchain_meve, llamaindex_meve):
        for name in pkg.__all__:
            owners.setdefault(name, []).append(pkg.__name__)
    shared = {name: pkgs for name, pkgs in owners.items() if len(pkgs) > 1}
    # MeVeRetriever is one concept per framework and must subclass each framework's own base class;
    # every other name means one thing only.
    assert shared == {"MeVeRetriever": ["langchain_meve", "llamaindex_meve"]}


# The only core modules an adapter may import from, each with its own __all__ (docs/architecture.md).
PUBLIC_MODULES = ("meve", "meve.integration")


def _meve_imports(package: str) -> list[tuple[str, str, str]]:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / package
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "meve":
                found += [(path.name, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(path.name, alias.name, "*") for alias in node.names if alias.name.split(".")[0] == "meve"]
    return found


@pytest.mark.parametrize("package", ["langchain_meve", "llamaindex_meve"])
def test_adapters_import_only_public_core_names(package):
    import importlib

    imports = _meve_imports(package)
    assert imports, f"{package} imports nothing from meve?"
    for filename, module, name in imports:
        assert module in PUBLIC_MODULES, f"{package}/{filename} imports from {module}, which is not a public core module"
        assert name in importlib.import_module(module).__all__, f"{package}/{filename} imports {module}.{name}, which is not in its __all__"
