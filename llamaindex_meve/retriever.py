"""A LlamaIndex retriever running MeVe over a ``VectorStoreIndex`` (Chroma-backed ones included).

The index is wrapped as meve's passage store (:class:`meve.integration.ForeignStore`) and its
embedding model embeds queries and passages; then ``meve.MeVe`` does the work, as for every other
entry point: this module only converts types.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode

from llamaindex_meve.events import check_on_empty, dispatcher, emit, empty_nodes
from llamaindex_meve.postprocessors import annotate, llm_text, node_place
from meve import ContextResult, InputError, MeVe, MeVeConfig, Passage, Scorer
from meve.integration import (
    ConfigLike,
    ForeignStore,
    Neighbours,
    Place,
    StoredVectors,
    builder_kwargs,
    config_from,
    meve_over,
    passage_metadata,
    run_overrides,
    user_metadata,
)


def _all_nodes(index: Any) -> list[BaseNode]:
    docs = list(getattr(index.docstore, "docs", {}).values())
    if docs:
        return docs
    getter = getattr(index.vector_store, "get_nodes", None)
    if getter is None:
        raise TypeError(f"{type(index.vector_store).__name__} cannot list its nodes; pass nodes= for the BM25 fallback")
    return list(getter(None))


def stored_vectors(index: Any, nodes: dict[str, BaseNode]) -> StoredVectors | None:
    """How to read the vectors an index keeps under its node ids (the ``stored`` hook of
    ``meve.integration.ForeignStore``): LlamaIndex's default ``SimpleVectorStore`` (in memory or
    persisted) holds them in its embedding dict. None for any other store: meve then embeds each
    hit again with the index's model, and logs it."""
    kept = getattr(getattr(getattr(index, "vector_store", None), "data", None), "embedding_dict", None)
    if not isinstance(kept, dict):
        return None
    return lambda ids: [(llm_text(nodes[i]), kept[i]) if i in nodes and i in kept else None for i in ids]


def _window(pid: str, text: str, meta: dict[str, Any]) -> TextNode:
    return TextNode(text=text, id_=pid, metadata=meta, excluded_llm_metadata_keys=list(meta))


class MeVeRetriever(BaseRetriever):
    """MeVe over a LlamaIndex ``VectorStoreIndex``: dense retrieval through the index, then verify
    → BM25 fallback (over every node of the index) → prioritise → prune → budget, each node seen
    as the LLM is sent it (:func:`~llamaindex_meve.postprocessors.llm_text`, metadata included).
    ``aretrieve`` runs in a worker thread so the loop is not blocked.

    ``embed_model``: the index's embedding model (default: the one the index was built with); it
    embeds the query for the kNN, and the candidates for the redundancy checks where the index keeps
    no vector meve can read (:func:`stored_vectors`: the default ``SimpleVectorStore``'s are read,
    so a hit costs no model pass beside the verifier's), so both live in the index's vector space.
    ``config``: a MeVeConfig, a dict of its fields or the path of a JSON file of them (``meve tune
    --out``); any MeVeConfig field can also be given by name (``t_max=256``, over ``config``).
    ``core=`` wraps a ready ``meve.MeVe`` instead (e.g. ``from_documents``); settings given with it
    apply to this retriever's runs, and the MeVe's own config is left as it is."""

    def __init__(
        self,
        index: Any = None,
        *,
        core: MeVe | None = None,
        config: ConfigLike | None = None,
        nodes: Sequence[BaseNode] | None = None,
        embed_model: Any = None,
        scorer: Scorer | str | None = None,
        token_counter: Any = None,
        bm25_backend: str | None = None,
        on_empty: str = "nothing",
        **kwargs: Any,
    ) -> None:
        """``on_empty``: when MeVe keeps nothing, ``"nothing"`` (the default) returns no node, so
        LlamaIndex answers with its own empty response; ``"note"`` returns one node saying why (so
        a chat engine still asks its LLM). Either way meve logs the reason at WARNING."""
        self.on_empty = check_on_empty(on_empty)
        if (index is None) == (core is None):
            raise InputError("give either a VectorStoreIndex or core= (a meve.MeVe), not both or neither")
        base = ("callback_manager", "object_map", "objects", "verbose")
        # Settings are checked before anything else happens: no model loads for a refused value.
        self._overrides: dict[str, Any] = {}
        if core is not None:
            self._overrides = run_overrides(kwargs, config, core.config, owner="MeVeRetriever", others=base)
        else:
            config = config_from(kwargs, config, owner="MeVeRetriever", others=base)
        super().__init__(**kwargs)
        self.index = index
        # Per thread and per asyncio task: a retriever shared by a server's threads used to hand
        # one caller another caller's result.
        self._last: ContextVar[ContextResult | None] = ContextVar(f"meve-last-result-{id(self)}", default=None)
        self._nodes: dict[str, BaseNode] = {}
        if core is not None:
            self.core = core
            return
        model = embed_model if embed_model is not None else getattr(index, "_embed_model", None)
        if model is None:
            raise InputError(f"{type(index).__name__} has no embedding model meve can read; pass embed_model= (the one the index was built with)")
        self._nodes = {n.node_id: n for n in (list(nodes) if nodes is not None else _all_nodes(index))}

        def search(vector: Any, k: int) -> list[tuple[str, str, dict[str, Any]]]:
            hits = index.as_retriever(similarity_top_k=k).retrieve(QueryBundle(query_str="", embedding=[float(x) for x in vector]))
            for h in hits:
                self._nodes[h.node.node_id] = h.node  # added, or inserted again, after this retriever was built: the index's node now
            return [(h.node.node_id, llm_text(h.node), dict(h.node.metadata)) for h in hits]

        store = ForeignStore(
            name=str(getattr(model, "model_name", None) or type(model).__name__),
            search=search,
            embed_texts=model.get_text_embedding_batch,
            embed_query=model.get_query_embedding,
            rows=[(n.node_id, llm_text(n), dict(n.metadata)) for n in self._nodes.values()],
            stored=stored_vectors(index, self._nodes),
        )
        extra = {"bm25_backend": bm25_backend} if bm25_backend is not None else {}
        self.core = meve_over(store, config=config, scorer=scorer, token_counter=token_counter, **extra)
        self.core.neighbours = Neighbours(place=self._place, fetch=self._fetch)

    def _node(self, pid: str) -> BaseNode | None:
        node, docstore = self._nodes.get(pid), getattr(self.index, "docstore", None)
        return node if node is not None or docstore is None else docstore.get_node(pid, raise_error=False)

    def _place(self, p: Passage) -> Place | None:
        node = self._node(p.id)
        return node_place(node) if node is not None else None

    def _fetch(self, ids: Sequence[str]) -> list[Passage]:
        # A neighbour that is not a candidate is read from the index's nodes, as LlamaIndex's PrevNextNodePostprocessor reads its docstore.
        return [Passage(id=i, text=llm_text(node), metadata=dict(node.metadata)) for i in ids if (node := self._node(i)) is not None]

    @property
    def last_result(self) -> ContextResult | None:
        """The :class:`meve.ContextResult` (trace included) of the latest ``retrieve`` in this thread,
        or of the latest ``await aretrieve`` in this asyncio task; None before one. Another thread's
        or task's call never changes it."""
        return self._last.get()

    @property
    def config(self) -> MeVeConfig:
        """The settings this retriever runs with: the wrapped MeVe's, with those given here over them."""
        return self.core.config.replace(**self._overrides)

    @classmethod
    def from_documents(cls, documents: Sequence[Any], *, on_empty: str = "nothing", **kwargs: Any) -> MeVeRetriever:
        """MindRef-style hierarchical retrieval over whole LlamaIndex Documents (no pre-chunking):
        documents by title (``metadata['title']``) and summary, then passages inside them with
        character offsets (``metadata['start']``/``['end']``). Keyword arguments go to ``meve.MeVe.from_documents``."""
        check_on_empty(on_empty)
        built = builder_kwargs(kwargs, MeVe.from_documents, "MeVeRetriever.from_documents")  # any MeVeConfig field too, checked first
        docs = [(d.doc_id, str(d.metadata.get("title", "")), d.get_content()) for d in documents]
        return cls(core=MeVe.from_documents(docs, **built), on_empty=on_empty)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes, result = self._run(query_bundle)
        self._last.set(result)
        return nodes

    @dispatcher.span  # type: ignore[misc]
    def _run(self, query_bundle: QueryBundle) -> tuple[list[NodeWithScore], ContextResult]:
        result = self.core.run(query_bundle.query_str, on_phase=emit, **self._overrides)
        out = []
        for p in result.documents:
            # The index's own node where there is one (its type, relationships and metadata kept);
            # hierarchical windows of a wrapped core are new text nodes, their metadata hidden from
            # the LLM because the budget counted their text alone.
            node = self._nodes.get(p.id) or _window(p.id, p.text, user_metadata(p.metadata))
            out.append(annotate(NodeWithScore(node=node), passage_metadata(result, p), p.score, p))
        return out or empty_nodes(result, self.on_empty), result

    def warm_up(self, nodes: Sequence[BaseNode] | None = None, *, show_progress: bool = True) -> int:
        """Load the models now and have the verifier read ``nodes`` (default: every node this
        retriever knows) ahead of any query, with a progress bar; what it reads is kept on disk, so
        later processes skip it too. Nothing to read for an index built with ``MeVeEmbedding``.
        Returns how many went through the model."""
        chosen = list(self._nodes.values()) if nodes is None else list(nodes)
        before = getattr(self.core.scorer, "encoded_ahead", 0)
        self.core.warm_up([llm_text(n) for n in chosen], show_progress=show_progress)
        return int(getattr(self.core.scorer, "encoded_ahead", 0) - before)

    async def awarm_up(self, nodes: Sequence[BaseNode] | None = None, *, show_progress: bool = True) -> int:
        """:meth:`warm_up` in a worker thread."""
        return await asyncio.to_thread(self.warm_up, nodes, show_progress=show_progress)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        nodes, result = await asyncio.to_thread(self._run, query_bundle)
        self._last.set(result)  # in the awaiting task's context: the worker thread's is a copy
        return nodes
