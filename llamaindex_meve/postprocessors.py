"""LlamaIndex node postprocessors: each MeVe phase alone, and all of them in one.

Each runs :func:`meve.integration.run_on_texts` (all phases, or one alone) over each node as the
LLM is sent it (:func:`llm_text`: the text with its LLM-visible metadata) and converts the
result back: kept nodes are shallow copies whose metadata gains ``meve_*`` keys, hidden from the
LLM and the embedder via the excluded-keys lists. The input nodes are never mutated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo
from pydantic import ConfigDict, Field, PrivateAttr

from llamaindex_meve.events import check_on_empty, dispatcher, emit, empty_nodes
from meve import ContextResult, InputError, MeVeConfig, Passage
from meve.integration import Models, Place, config_from, passage_metadata, run_on_texts

# Each phase's defaults are MeVe's, so a pipeline composed of these behaves like MeVePostprocessor().
_DEFAULTS = MeVeConfig()


def llm_text(node: BaseNode) -> str:
    """The node as LlamaIndex's response synthesizers send it to the LLM: its text with the
    metadata not in ``excluded_llm_metadata_keys`` (e.g. ``file_path: ...``). meve scores, prunes
    and counts this text, so ``t_max`` bounds what the LLM is sent."""
    return node.get_content(metadata_mode=MetadataMode.LLM)


def node_place(node: BaseNode, ids: Mapping[str, str] | None = None) -> Place | None:
    """Where ``node`` sits in its document, by LlamaIndex's own relationships: its SOURCE, the
    nodes before and after it (PREVIOUS/NEXT; with ``ids``, each by the id meve runs it under, one
    not there left out), its offset in the document (``start_char_idx``) and, as its head, the
    metadata lines :func:`llm_text` puts before its text. None when its text is not at the end of
    what the LLM is sent (a custom template), so meve cannot tell where the document's text lies."""
    full, own = llm_text(node), node.get_content(metadata_mode=MetadataMode.NONE)
    if not own or not full.endswith(own):
        return None

    def linked(kind: NodeRelationship) -> str | None:
        info = node.relationships.get(kind)
        return info.node_id if isinstance(info, RelatedNodeInfo) else None

    def neighbour(kind: NodeRelationship) -> str | None:
        nid = linked(kind)
        return nid if ids is None or nid is None else ids.get(nid)

    prev, after = neighbour(NodeRelationship.PREVIOUS), neighbour(NodeRelationship.NEXT)
    return Place(linked(NodeRelationship.SOURCE) or "", getattr(node, "start_char_idx", None), prev, after, len(full) - len(own))


def _with(keys: list[str], more: Any) -> list[str]:
    return [*keys, *[k for k in more if k not in keys]]


def annotate(nws: NodeWithScore, meta: dict[str, Any], score: float | None, pruned: Passage | None = None) -> NodeWithScore:
    """A new NodeWithScore over a shallow copy of the node with meve metadata (input untouched).
    ``pruned``: a passage whose sentences were pruned (or that was cut, or joined with its
    neighbours); the copy gets its text. That text was made from :func:`llm_text` (metadata lines
    included where meve kept them), so the copy's own metadata is hidden from the LLM: it is sent
    that text alone, as meve counted it."""
    node = nws.node.model_copy()
    hidden = list(meta)
    if pruned is not None and (pruned.spans is not None or pruned.joined is not None):
        node.set_content(pruned.text)
        hidden += list(nws.node.metadata)
    node.metadata = {**nws.node.metadata, **meta}
    node.excluded_llm_metadata_keys = _with(node.excluded_llm_metadata_keys, hidden)
    node.excluded_embed_metadata_keys = _with(node.excluded_embed_metadata_keys, meta)
    return NodeWithScore(node=node, score=score)


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise InputError("this postprocessor needs the query: call postprocess_nodes(nodes, query_str=...) or use it in a query engine")
    return query_bundle.query_str


@dataclass(frozen=True)
class _Spec:
    """What a postprocessor runs: its phases, its own fields as MeVeConfig fields (its name -> the
    config's), fixed settings, whether nodes keep the retriever's score, whether it reads a query."""

    phases: tuple[str, ...]
    fields: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    keep_score: bool = False
    needs_query: bool = True


class _MeVeNodeProcessor(BaseNodePostprocessor):
    """What every meve postprocessor shares: models, and what it runs (:class:`_Spec`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedder: Any = Field(default=None, description="a meve Embedder; default all-MiniLM-L6-v2")
    scorer: Any = Field(default=None, description="a meve Scorer or a name: 'late-interaction' (default), 'cosine', or a cross-encoder name/path")
    token_counter: Any = Field(default=None, description="anything meve.get_token_counter accepts")
    on_empty: str = Field(
        default="nothing",
        description="when nothing is kept: 'nothing' (no node: LlamaIndex's own empty response) or 'note' (one node saying why, for the LLM)",
    )
    config: MeVeConfig = Field(
        default_factory=MeVeConfig,
        description="every MeVeConfig setting (a MeVeConfig, a dict of its fields or a JSON file of them); any field can also be given by name",
    )
    _models: Models = PrivateAttr()
    _spec: ClassVar[_Spec] = _Spec(phases=())

    def __init__(self, **data: Any) -> None:
        """Any MeVeConfig field by its name (``t_max=256``) or in ``config=``; the phase's own
        fields (``theta``, ``lam``) are names for theirs. Checked here, before any model loads."""
        spec, fields = self._spec, type(self).model_fields
        base = data.pop("config", None)
        if base is None:  # the phase's own defaults (RelevanceVerifier's min_keep=1) over MeVeConfig's
            base = MeVeConfig().replace(**{f: fields[name].default for name, f in spec.fields.items()})
        others = [n for n in fields if n not in spec.fields and n != "config"]
        config = config_from(data, base, owner=type(self).__name__, others=others, aliases=spec.fields, fixed=spec.fixed)
        data.update({name: getattr(config, f) for name, f in spec.fields.items()}, config=config)
        super().__init__(**data)
        self._models = Models(self.embedder, self.scorer)

    def model_post_init(self, context: Any, /) -> None:
        check_on_empty(self.on_empty)

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__ if cls.__name__.startswith("MeVe") else f"MeVe{cls.__name__}"

    def _config(self) -> MeVeConfig:
        """The config a run uses: ``config`` with the phase's own fields as they are now (they may be set after construction)."""
        spec = self._spec
        own = {name: getattr(self, name) for name in spec.fields}
        return config_from(own, self.config, owner=type(self).__name__, aliases=spec.fields, fixed=spec.fixed)

    @dispatcher.span  # type: ignore[misc]
    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        given = query_bundle.query_str if query_bundle is not None and query_bundle.query_str.strip() else None
        query = _query(query_bundle) if self._spec.needs_query else (given or "(no query: this phase does not read one)")
        if not nodes:
            return []
        texts = [llm_text(n.node) for n in nodes]
        scores = [n.score for n in nodes]
        config = self._config()
        index = {n.node.node_id: str(i) for i, n in enumerate(nodes)}  # a neighbour joins only from among the nodes given
        places = [node_place(n.node, index) for n in nodes] if config.neighbours else None
        result = run_on_texts(
            query, texts, config, self._models, scores=scores, token_counter=self.token_counter, phases=self._spec.phases, on_phase=emit, places=places
        )
        return [self._node(result, nodes, p) for p in result.documents] or empty_nodes(result, self.on_empty)

    def _node(self, result: ContextResult, nodes: list[NodeWithScore], p: Passage) -> NodeWithScore:
        nws = nodes[int(p.id)]
        meta = passage_metadata(result, p, named=lambda pid: nodes[int(pid)].node.node_id)
        return annotate(nws, meta, nws.score if self._spec.keep_score else p.score, p)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)

    def warm_up(self, nodes: Sequence[BaseNode | NodeWithScore] = (), *, show_progress: bool = True) -> int:
        """Load the models now and have the verifier read ``nodes`` (an index's nodes, embedded
        with another model than meve's) ahead of any query, with a progress bar; what it reads is
        kept on disk, so later processes skip it too. Returns how many went through the model."""
        return self._models.read_ahead([llm_text(n.node if isinstance(n, NodeWithScore) else n) for n in nodes], show_progress=show_progress)

    async def awarm_up(self, nodes: Sequence[BaseNode | NodeWithScore] = (), *, show_progress: bool = True) -> int:
        """:meth:`warm_up` in a worker thread."""
        return await asyncio.to_thread(self.warm_up, nodes, show_progress=show_progress)


class RelevanceVerifier(_MeVeNodeProcessor):
    """Keeps nodes whose scorer score is >= tau, and with ``coverage`` the nodes that hold query
    terms the kept ones lack (MeVeConfig.coverage) and score >= ``coverage_floor``; if fewer than
    ``min_keep`` are kept, the best-scored of the rest are kept too (``meve_source="padded"``).
    Nodes kept without passing tau say why in ``meve_note``."""

    tau: float = _DEFAULTS.tau
    coverage: float = _DEFAULTS.coverage
    coverage_floor: float = _DEFAULTS.coverage_floor
    min_keep: int = 1
    _spec = _Spec(("verify", "fallback"), {f: f for f in ("tau", "coverage", "coverage_floor", "min_keep")}, {"fallback": False, "prune": "none"})


class RedundancyFilter(_MeVeNodeProcessor):
    """Drops near-duplicates (cosine > theta), always keeping the higher-ranked node of a pair."""

    theta: float = _DEFAULTS.theta_redundancy
    _spec = _Spec(("prioritise",), {"theta": "theta_redundancy"}, {"verify": False, "prioritisation": "redundancy"}, keep_score=True, needs_query=False)


class NoveltySelector(_MeVeNodeProcessor):
    """SARA-style greedy selection: relevance traded against similarity to what is already selected."""

    lam: float = _DEFAULTS.novelty_lambda
    theta: float = _DEFAULTS.theta_redundancy
    _spec = _Spec(("prioritise",), {"lam": "novelty_lambda", "theta": "theta_redundancy"}, {"verify": False, "prioritisation": "novelty"}, keep_score=True)


class TokenBudget(_MeVeNodeProcessor):
    """Greedy packing of nodes, in the given order, into ``t_max`` tokens (meve's token counter)
    of the nodes as the LLM is sent them (:func:`llm_text`), joined by ``separator``."""

    t_max: int = _DEFAULTS.t_max
    separator: str = _DEFAULTS.separator
    _spec = _Spec(("budget",), {"t_max": "t_max", "separator": "separator"}, {"verify": False, "prioritisation": "none", "prune": "none"}, True, False)


class MeVePostprocessor(_MeVeNodeProcessor):
    """All MeVe phases after retrieval: verify → fallback (BM25 over the given nodes, then their
    order) → prioritise → prune → budget. Any MeVeConfig field can be given directly or via ``config``
    (a MeVeConfig, a dict of its fields or the path of a JSON file of them, e.g. ``meve tune``'s)."""

    _spec = _Spec(("verify", "fallback", "prioritise", "prune", "budget"))

    def _config(self) -> MeVeConfig:
        return self.config
