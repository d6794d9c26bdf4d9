import subprocess
import sys

import pytest

import meve


def test_public_api_is_pinned():
    assert sorted(meve.__all__) == sorted(
        [
            "BiEncoderScorer",
            "CachedEmbedder",
            "ConfigError",
            "ContextResult",
            "CrossEncoderScorer",
            "Dropped",
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
            "RelevanceScorer",
            "SentenceTransformerEmbedder",
            "StoreError",
            "TokenCounter",
            "Turn",
            "default_embedder",
            "default_scorer",
            "get_token_counter",
            "make_scorer",
        ]
    )
    for name in meve.__all__:
        assert hasattr(meve, name), name


def test_errors_are_value_errors():
    assert issubclass(meve.MeVeError, ValueError)
    for cls in (meve.ConfigError, meve.InputError, meve.StoreError):
        assert issubclass(cls, meve.MeVeError)


HEAVY = ("torch", "sentence_transformers", "transformers", "chromadb", "tiktoken", "bm25s")


@pytest.mark.parametrize("module", ["meve", "langchain_meve", "llamaindex_meve", "meve.cli"])
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
