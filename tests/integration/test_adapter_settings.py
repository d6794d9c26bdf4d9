"""Every public component of both adapters takes every MeVeConfig field by its name, checked by
MeVeConfig's own validation before any model loads (issue 77 #5): LlamaIndex's
``MeVeRetriever(index, t_max=0)`` raised LlamaIndex's TypeError, and the single-phase
postprocessors and LangChain's ``MeVeRetriever(meve=...)`` dropped unknown keywords silently."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from meve import ConfigError, MeVe, MeVeConfig

pytestmark = pytest.mark.integration

#: A valid value other than the default for every MeVeConfig field.
OTHER: dict[str, Any] = {
    "k_init": 7,
    "candidates": "dense",
    "retrieval": "hierarchical",
    "k_docs": 3,
    "passage_tokens": 90,
    "tau": 0.35,
    "cut": "gap",
    "cut_ratio": 0.6,
    "coverage": 0.2,
    "coverage_floor": 0.1,
    "n_min": 2,
    "fallback_k": 4,
    "fallback_tau": 0.2,
    "fallback_min_bm25": 0.5,
    "min_keep": 2,
    "theta_redundancy": 0.9,
    "prioritisation": "novelty",
    "novelty_lambda": 0.6,
    "prune": "embedder",
    "prune_ratio": 0.4,
    "prune_gate": 0.3,
    "t_max": 300,
    "separator": "\n---\n",
    "max_passages": 4,
    "neighbours": False,
    "verify": False,
    "fallback": False,
}
TEXTS = ["Karl Drais built a running machine in 1817.", "Sourdough needs wild yeast to rise."]


def test_the_table_covers_every_field():
    assert set(OTHER) == set(MeVeConfig.__dataclass_fields__)
    assert all(OTHER[f] != getattr(MeVeConfig(), f) for f in OTHER)


@pytest.fixture(scope="module")
def core(minilm):
    with MeVe.from_texts(TEXTS, embedder=minilm) as m:
        yield m


def _li_index(minilm):
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from llamaindex_meve import MeVeEmbedding

    return VectorStoreIndex([TextNode(text=t) for t in TEXTS], embed_model=MeVeEmbedding(minilm))


def _lc_store(minilm):
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_meve import MeVeEmbeddings

    store = InMemoryVectorStore(embedding=MeVeEmbeddings(minilm))
    store.add_texts(TEXTS)
    return store


def _builders(minilm, core) -> dict[str, tuple[Any, Any]]:
    """Component name -> (build(**settings), the config it then runs with)."""
    from langchain_core.documents import Document
    from llama_index.core import Document as LIDocument

    import langchain_meve as lc
    import llamaindex_meve as li

    def phase(cls):
        return lambda **kw: cls(embedder=minilm, **kw), lambda c: c._config()

    return {
        "lc.MeVeCompressor": (lambda **kw: lc.MeVeCompressor(embedder=minilm, **kw), lambda c: c.config),
        "lc.MeVeRetriever(meve=)": (lambda **kw: lc.MeVeRetriever(meve=core, **kw), lambda r: r.config),
        "lc.MeVeRetriever.from_texts": (lambda **kw: lc.MeVeRetriever.from_texts(TEXTS, embedder=minilm, **kw), lambda r: r.meve.config),
        "lc.MeVeRetriever.from_documents": (
            lambda **kw: lc.MeVeRetriever.from_documents([Document(page_content=t) for t in TEXTS], embedder=minilm, **kw),
            lambda r: r.meve.config,
        ),
        "lc.MeVeRetriever.from_vectorstore": (lambda **kw: lc.MeVeRetriever.from_vectorstore(_lc_store(minilm), **kw), lambda r: r.meve.config),
        "li.MeVeRetriever(index)": (lambda **kw: li.MeVeRetriever(_li_index(minilm), **kw), lambda r: r.config),
        "li.MeVeRetriever(core=)": (lambda **kw: li.MeVeRetriever(core=core, **kw), lambda r: r.config),
        "li.MeVeRetriever.from_documents": (
            lambda **kw: li.MeVeRetriever.from_documents([LIDocument(text=t) for t in TEXTS], embedder=minilm, **kw),
            lambda r: r.config,
        ),
        "li.MeVePostprocessor": phase(li.MeVePostprocessor),
        "li.RelevanceVerifier": phase(li.RelevanceVerifier),
        "li.RedundancyFilter": phase(li.RedundancyFilter),
        "li.NoveltySelector": phase(li.NoveltySelector),
        "li.TokenBudget": phase(li.TokenBudget),
    }


#: What a single-phase postprocessor always runs with (another value is refused).
FIXED = {
    "li.RelevanceVerifier": {"fallback": False, "prune": "none"},
    "li.RedundancyFilter": {"verify": False, "prioritisation": "redundancy"},
    "li.NoveltySelector": {"verify": False, "prioritisation": "novelty"},
    "li.TokenBudget": {"verify": False, "prioritisation": "none", "prune": "none"},
}
COMPONENTS = [
    "lc.MeVeCompressor",
    "lc.MeVeRetriever(meve=)",
    "lc.MeVeRetriever.from_texts",
    "lc.MeVeRetriever.from_documents",
    "lc.MeVeRetriever.from_vectorstore",
    "li.MeVeRetriever(index)",
    "li.MeVeRetriever(core=)",
    "li.MeVeRetriever.from_documents",
    "li.MeVePostprocessor",
    "li.RelevanceVerifier",
    "li.RedundancyFilter",
    "li.NoveltySelector",
    "li.TokenBudget",
]


@pytest.mark.parametrize("name", COMPONENTS)
def test_every_config_field_is_a_keyword_of_every_component(name, minilm, core):
    build, config_of = _builders(minilm, core)[name]
    wanted = {**OTHER, **FIXED.get(name, {})}
    if name.endswith("from_documents"):
        wanted["retrieval"] = "hierarchical"  # whole documents are searched hierarchically whatever is asked
    got = config_of(build(**wanted)).to_dict()
    assert {f: got[f] for f in wanted} == wanted
    assert core.config == MeVeConfig()  # a component wrapping a MeVe never changes the MeVe's own settings
    over = config_of(build(config=MeVeConfig(tau=0.5, t_max=100), t_max=200))  # a keyword over config=
    assert (over.tau, over.t_max) == (0.5, 200)


SCRIPT = """
import sys
from meve import ConfigError
import langchain_meve as lc, llamaindex_meve as li
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex

index = VectorStoreIndex([], embed_model=li.MeVeEmbedding())
MODELS = ("torch", "sentence_transformers", "transformers")
# What the frameworks import themselves (llama-index-core 0.14.1 brings torch and transformers): not meve's doing.
print("BEFORE", sorted(m for m in MODELS if m in sys.modules))
builds = {
    "lc.MeVeCompressor": lambda **kw: lc.MeVeCompressor(**kw),
    "lc.MeVeRetriever.from_texts": lambda **kw: lc.MeVeRetriever.from_texts(["never embedded"], **kw),
    "lc.MeVeRetriever.from_documents": lambda **kw: lc.MeVeRetriever.from_documents([], **kw),
    "lc.MeVeRetriever.from_vectorstore": lambda **kw: lc.MeVeRetriever.from_vectorstore(InMemoryVectorStore(embedding=lc.MeVeEmbeddings()), **kw),
    "li.MeVeRetriever(index)": lambda **kw: li.MeVeRetriever(index, **kw),
    "li.MeVeRetriever.from_documents": lambda **kw: li.MeVeRetriever.from_documents([], **kw),
    **{f"li.{n}": getattr(li, n) for n in ("MeVePostprocessor", "RelevanceVerifier", "RedundancyFilter", "NoveltySelector", "TokenBudget")},
}
for name, build in builds.items():
    for kw, text in (({"t_max": 0}, "t_max=0 is not allowed: expected an int >= 1"), ({"tua": 0.3}, "did you mean 'tau'?")):
        try:
            build(**kw)
        except ConfigError as exc:
            assert text in str(exc), (name, str(exc))
        else:
            raise AssertionError(f"{name} accepted {kw}")
print("LOADED", sorted(m for m in MODELS if m in sys.modules))
"""


def test_a_wrong_value_is_meves_error_naming_the_field_before_any_model_loads():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.startswith(("BEFORE ", "LOADED ")))
    assert lines["LOADED"] == lines["BEFORE"] and "sentence_transformers" not in lines["LOADED"], out.stdout


@pytest.mark.parametrize("name", ["lc.MeVeRetriever(meve=)", "li.MeVeRetriever(core=)"])
def test_a_wrapped_meve_is_refused_a_wrong_value_too(name, minilm, core):
    build, _ = _builders(minilm, core)[name]
    with pytest.raises(ConfigError, match="t_max=0 is not allowed: expected an int >= 1"):
        build(t_max=0)
    with pytest.raises(ConfigError, match="did you mean 'tau'"):
        build(tua=0.3)


def test_one_setting_under_two_names_and_a_phase_its_postprocessor_cannot_run_are_refused():
    import llamaindex_meve as li

    with pytest.raises(ConfigError, match=r"theta_redundancy=0\.8 is not allowed: expected 0\.9, the value given as theta"):
        li.RedundancyFilter(theta=0.9, theta_redundancy=0.8)
    with pytest.raises(ConfigError, match=r"verify=True is not allowed: expected False: TokenBudget always runs with it"):
        li.TokenBudget(verify=True)
    assert li.RedundancyFilter(theta_redundancy=0.9).theta == 0.9  # the config's name for its own field
