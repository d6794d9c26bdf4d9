"""LlamaIndex node postprocessors: each MeVe phase alone, and all of them in one.

They never mutate the input nodes: kept nodes are shallow copies whose metadata
gains ``meve_*`` keys (hidden from the LLM and the embedder via the excluded-keys lists).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import ConfigDict, Field, PrivateAttr

from meve import ConfigError, InputError, MeVeConfig
from meve.context import embed_passages, local_lexical, pack_context, select_context, verify_query
from meve.models import Embedder, LazyModels, RelevanceScorer
from meve.phases import drop_redundant, novelty_select
from meve.records import Passage, check_query
from meve.tokens import TokenCounter, count_many, get_token_counter

# Each phase's defaults are MeVe's, so a pipeline composed of these behaves like MeVePostprocessor().
_DEFAULTS = MeVeConfig()
MEVE_KEYS = ("meve_score", "meve_source", "meve_verified", "meve_note", "meve_tokens", "meve_spans")


def annotate(nws: NodeWithScore, score: float | None, *, pruned: Passage | None = None, **meta: Any) -> NodeWithScore:
    """A new NodeWithScore over a shallow copy of the node with meve metadata (input untouched).
    ``pruned``: a passage whose sentences were pruned; the copy gets its text and ``meve_spans``."""
    node = nws.node.model_copy()
    if pruned is not None and pruned.spans is not None:
        node.set_content(pruned.text)
        meta["meve_spans"] = [list(span) for span in pruned.spans]
    node.metadata = {**nws.node.metadata, **{k: v for k, v in meta.items() if v is not None}}
    hidden = [k for k in meta if k not in node.excluded_llm_metadata_keys]
    node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, *hidden]
    node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, *[k for k in meta if k not in node.excluded_embed_metadata_keys]]
    return NodeWithScore(node=node, score=score)


def _number(name: str, value: Any, low: float, high: float, *, low_open: bool = False) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and (low < value if low_open else low <= value) and value <= high
    if not ok:
        raise ConfigError(name, value, f"a number in {'(' if low_open else '['}{low}, {high}]")


def _count(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(name, value, f"an int >= {low}")


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise InputError("this postprocessor needs the query: call postprocess_nodes(nodes, query_str=...) or use it in a query engine")
    return check_query(query_bundle.query_str)


class _MeVeNodeProcessor(BaseNodePostprocessor):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedder: Any = Field(default=None, description="a meve Embedder; default all-MiniLM-L6-v2")
    scorer: Any = Field(default=None, description="a meve RelevanceScorer or a name: 'late-interaction' (default), 'cosine', or a cross-encoder name/path")
    token_counter: Any = Field(default=None, description="anything meve.get_token_counter accepts")
    _models: LazyModels = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._models = LazyModels(self.embedder, self.scorer)

    def _embed(self) -> Embedder:
        return self._models.embedder

    def _score(self) -> RelevanceScorer:
        return self._models.scorer

    def _counter(self) -> TokenCounter:
        return get_token_counter(self.token_counter)

    def _passages(self, nodes: Sequence[NodeWithScore], query: str) -> tuple[Any, tuple[Passage, ...]]:
        return embed_passages(query, [n.node.get_content() for n in nodes], self._embed(), [n.score for n in nodes])

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)


class RelevanceVerifier(_MeVeNodeProcessor):
    """Keeps nodes whose verifier score is >= tau, and with ``coverage`` the nodes that hold query
    terms the kept ones lack (MeVeConfig.coverage) and score >= ``coverage_floor``; if fewer than
    ``min_keep`` are kept, the best of the rest are kept too. Nodes kept but not verified say so:
    ``meve_verified=False`` with a ``meve_note``."""

    tau: float = _DEFAULTS.tau
    coverage: float = _DEFAULTS.coverage
    coverage_floor: float = _DEFAULTS.coverage_floor
    min_keep: int = _DEFAULTS.n_min

    def model_post_init(self, context: Any, /) -> None:
        _number("tau", self.tau, 0.0, 1.0)
        _number("coverage", self.coverage, 0.0, 1.0)
        _number("coverage_floor", self.coverage_floor, 0.0, 1.0)
        _count("min_keep", self.min_keep, 0)

    @classmethod
    def class_name(cls) -> str:
        return "MeVeRelevanceVerifier"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        texts = [n.node.get_content() for n in nodes]
        scores = [float(s) for s in self._score().score(query, texts)]
        passages = tuple(Passage(id=str(i), text=t) for i, t in enumerate(texts))
        out = verify_query(query, passages, scores, self.tau, coverage=self.coverage, coverage_floor=self.coverage_floor)
        covered = out.info.get("covered", {})
        result = [annotate(nodes[int(p.id)], p.score, meve_score=p.score, **_verified_or_covered(covered.get(p.id))) for p in out.kept]
        if len(result) < self.min_keep:
            rest = sorted(out.dropped, key=lambda d: -(d.score or 0.0))[: self.min_keep - len(result)]
            note = f"kept to reach min_keep={self.min_keep}: only {len(out.kept)} kept by tau={self.tau} and coverage={self.coverage}"
            result += [annotate(nodes[int(d.id)], d.score, meve_score=d.score, meve_verified=False, meve_note=note) for d in rest]
        return result


def _verified_or_covered(covered: dict[str, Any] | None) -> dict[str, Any]:
    """A kept node's flags: verified, or kept by query coverage with the terms it added."""
    if covered is None:
        return {"meve_verified": True}
    return {"meve_verified": False, "meve_note": f"kept for query coverage: adds {', '.join(covered['terms'])}"}


class RedundancyFilter(_MeVeNodeProcessor):
    """Drops near-duplicates (cosine > theta), always keeping the higher-ranked node of a pair."""

    theta: float = _DEFAULTS.theta_redundancy

    def model_post_init(self, context: Any, /) -> None:
        _number("theta", self.theta, 0.0, 1.0, low_open=True)

    @classmethod
    def class_name(cls) -> str:
        return "MeVeRedundancyFilter"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if not nodes:
            return []
        texts = [n.node.get_content() for n in nodes]
        vecs = self._embed().encode(texts)
        out = drop_redundant(tuple(Passage(id=str(i), text=t, embedding=vecs[i]) for i, t in enumerate(texts)), self.theta)
        return [annotate(nodes[int(p.id)], nodes[int(p.id)].score) for p in out.kept]


class NoveltySelector(_MeVeNodeProcessor):
    """SARA-style greedy selection: relevance traded against similarity to what is already selected."""

    lam: float = _DEFAULTS.novelty_lambda
    theta: float = _DEFAULTS.theta_redundancy

    def model_post_init(self, context: Any, /) -> None:
        _number("lam", self.lam, 0.0, 1.0)
        _number("theta", self.theta, 0.0, 1.0, low_open=True)

    @classmethod
    def class_name(cls) -> str:
        return "MeVeNoveltySelector"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        _, passages = self._passages(nodes, query)
        out = novelty_select(passages, self.lam, self.theta)
        return [annotate(nodes[int(p.id)], nodes[int(p.id)].score) for p in out.kept]


class TokenBudget(_MeVeNodeProcessor):
    """Greedy packing of nodes, in the given order, into ``t_max`` tokens (meve's token counter)."""

    t_max: int = _DEFAULTS.t_max
    separator: str = _DEFAULTS.separator

    def model_post_init(self, context: Any, /) -> None:
        _count("t_max", self.t_max, 1)
        if not isinstance(self.separator, str):
            raise ConfigError("separator", self.separator, "a str")

    @classmethod
    def class_name(cls) -> str:
        return "MeVeTokenBudget"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        counter = self._counter()
        texts = [n.node.get_content() for n in nodes]
        passages = tuple(Passage(id=str(i), text=t) for i, t in enumerate(texts))
        out, _, _ = pack_context(passages, count_many(counter, texts), counter, self.t_max, self.separator)
        return [annotate(nodes[int(p.id)], nodes[int(p.id)].score, meve_tokens=p.tokens) for p in out.kept]


class MeVePostprocessor(_MeVeNodeProcessor):
    """All MeVe phases after retrieval: verify → fallback (BM25 over the given nodes, then their
    order) → prioritise → budget. Any MeVeConfig field can be given directly or via ``config``."""

    config: MeVeConfig = Field(default_factory=MeVeConfig)

    def __init__(self, **data: Any) -> None:
        overrides = {k: data.pop(k) for k in list(data) if k in MeVeConfig.__dataclass_fields__}
        if overrides:
            data["config"] = data.get("config", MeVeConfig()).replace(**overrides)
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "MeVePostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        if not nodes:
            return []
        qvec, passages = self._passages(nodes, query)
        result = select_context(
            query,
            passages,
            self.config,
            verifier=lambda: self._models.verifier,
            embedder=self._embed(),
            token_counter=self._counter(),
            query_vec=qvec,
            lexical=local_lexical(passages),
        )
        return [annotate(nodes[int(p.id)], p.score, pruned=p, meve_score=p.score, meve_source=p.source, meve_tokens=p.tokens) for p in result.documents]
