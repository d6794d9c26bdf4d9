"""Every public adapter class rejects bad arguments when it is built, naming the value (no model loads)."""

from __future__ import annotations

import pytest

from meve import MeVeError


def _raises(build, text):
    # pydantic-based classes wrap meve's ValueError in a ValidationError, itself a ValueError.
    with pytest.raises(ValueError, match=text):
        build()


def test_llamaindex_postprocessors_validate_at_construction():
    from llamaindex_meve import MeVePostprocessor, NoveltySelector, RedundancyFilter, RelevanceVerifier, TokenBudget

    _raises(lambda: RelevanceVerifier(tau=2), r"tau=2(\.0)? is not allowed: expected a number in \[0.0, 1.0\]")
    _raises(lambda: RelevanceVerifier(min_keep=-1), r"min_keep=-1 is not allowed: expected an int >= 0")
    _raises(lambda: TokenBudget(t_max=-1), r"t_max=-1 is not allowed: expected an int >= 1")
    _raises(lambda: RedundancyFilter(theta=5), r"theta=5(\.0)? is not allowed: expected a number in \(0.0, 1.0\]")
    _raises(lambda: NoveltySelector(lam=1.5), r"lam=1.5 is not allowed")
    _raises(lambda: MeVePostprocessor(t_max=0), r"t_max=0 is not allowed")
    assert RelevanceVerifier(tau=0.3, min_keep=0).tau == 0.3


def test_llamaindex_phase_postprocessors_default_to_meves_config():
    # A pipeline composed of the single-phase postprocessors must run MeVe's chosen defaults,
    # not the paper's (tau 0.5, n_min 3) that MeVeConfig no longer ships.
    from llamaindex_meve import NoveltySelector, RedundancyFilter, RelevanceVerifier, TokenBudget
    from meve import MeVeConfig

    cfg = MeVeConfig()
    verifier = RelevanceVerifier()
    assert (verifier.tau, verifier.min_keep) == (cfg.tau, cfg.n_min)
    assert RedundancyFilter().theta == cfg.theta_redundancy
    novelty = NoveltySelector()
    assert (novelty.lam, novelty.theta) == (cfg.novelty_lambda, cfg.theta_redundancy)
    budget = TokenBudget()
    assert (budget.t_max, budget.separator) == (cfg.t_max, cfg.separator)


def test_llamaindex_memories_validate_at_construction():
    from llamaindex_meve import MomentaryChatMemory, MomentaryMemoryBlock

    _raises(lambda: MomentaryMemoryBlock(memory="not a memory"), "memory='not a memory' is not allowed")
    with pytest.raises(MeVeError, match="l_max=-5 is not allowed"):
        MomentaryChatMemory.from_defaults("s", l_max=-5)
    with pytest.raises(MeVeError, match="core='x' is not allowed"):
        MomentaryChatMemory("x")


def test_langchain_classes_validate_at_construction():
    from langchain_meve import MeVeCompressor, MeVeRetriever, MomentaryContextMiddleware

    with pytest.raises(MeVeError, match=r"k=0 is not allowed: expected None \(no cap\) or an int >= 1"):
        MeVeRetriever.from_texts(["never embedded"], k=0)
    _raises(lambda: MeVeRetriever(meve=None), "meve=None is not allowed")
    _raises(lambda: MeVeCompressor(tau=-1), r"tau=-1 is not allowed")
    with pytest.raises(MeVeError, match="l_max=0 is not allowed"):
        MomentaryContextMiddleware(l_max=0)
    with pytest.raises(MeVeError, match="memory='x' is not allowed"):
        MomentaryContextMiddleware(memory="x")
