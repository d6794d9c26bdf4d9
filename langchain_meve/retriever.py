"""LangChain retriever over a meve pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import ConfigDict, Field

from meve import ConfigError, ContextResult, MeVe, MeVeConfig, PhaseRecord
from meve.integration import (
    CONFIG_FIELDS,
    ConfigLike,
    ForeignStore,
    Neighbours,
    StoredVectors,
    builder_kwargs,
    config_from,
    metadata_place,
    meve_over,
    passage_metadata,
    run_overrides,
)

PHASE_EVENT = "meve_phase"
# ``k`` is LangChain's name for the document cap (MeVeConfig.max_passages); every other MeVeConfig field keeps its name.
_CALL_OVERRIDES = ("k", *(f for f in CONFIG_FIELDS if f != "max_passages"))


def check_k(k: Any) -> int | None:
    """``k`` as LangChain passes it: None (no cap) or an int >= 1."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError("k", k, "None (no cap) or an int >= 1: the most documents to return")
    return k


def _overrides(kwargs: dict[str, Any], k: int | None) -> dict[str, Any]:
    unknown = set(kwargs) - set(_CALL_OVERRIDES)
    if unknown:
        raise TypeError(f"unexpected keyword arguments {sorted(unknown)}; allowed at invoke time: {', '.join(_CALL_OVERRIDES)}")
    out = {key: kwargs[key] for key in _CALL_OVERRIDES if key != "k" and kwargs.get(key) is not None}
    limit = check_k(kwargs.get("k", k))
    if limit is not None:
        out["max_passages"] = limit
    return out


def _docs(result: ContextResult) -> list[Document]:
    # The passage id travels as Document.id: a user's own "id" metadata key is left as they stored it.
    return [Document(page_content=p.text, metadata=passage_metadata(result, p, p.metadata), id=p.id) for p in result.documents]


def _with_places(meve: MeVe) -> MeVe:
    """``meve`` reading where each chunk sits from its ``source`` and ``start_index`` metadata
    (``MeVeConfig.neighbours``: chunks a splitter cut with ``add_start_index=True``)."""
    meve.neighbours = Neighbours(place=lambda p: metadata_place(p.metadata))
    return meve


def _given_id(doc: Document) -> str | None:
    given = doc.id or doc.metadata.get("id")
    return str(given) if given else None


def _doc_id(doc: Document, fallback: int | str) -> str:
    return _given_id(doc) or str(fallback)


def stored_vectors(vectorstore: Any) -> StoredVectors | None:
    """How to read the (text, vector) a LangChain store keeps under its ids (the ``stored`` hook of
    ``meve.integration.ForeignStore``), for the stores whose API gives them: InMemoryVectorStore
    (its ``store`` dict) and langchain-chroma's ``Chroma`` (``get(include=["embeddings"])``). None
    for any other store: meve then embeds each hit again with the store's Embeddings, and logs it."""
    if isinstance(vectorstore, InMemoryVectorStore):
        return lambda ids: [(row["text"], row["vector"]) if (row := vectorstore.store.get(i)) is not None else None for i in ids]
    if _is_chroma(vectorstore):

        def read(ids: Sequence[str]) -> list[tuple[str, Any] | None]:
            got = vectorstore.get(ids=list(ids), include=["documents", "embeddings"])
            kept = dict(zip(got["ids"], zip(got["documents"], got["embeddings"], strict=True), strict=True))
            return [kept.get(i) for i in ids]

        return read
    return None


def _user_meta(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: v for key, v in meta.items() if key != "id"}


def _is_chroma(vectorstore: Any) -> bool:
    return any(c.__module__.startswith("langchain_chroma.") for c in type(vectorstore).__mro__)  # langchain-chroma is optional: not imported


def listed_rows(vectorstore: Any, page: int = 5000) -> list[tuple[str | None, str, dict[str, Any]]] | None:
    """Every chunk a store holds as (id, text, metadata), for the stores that can list theirs
    (langchain-chroma's ``Chroma``, read in pages; ``InMemoryVectorStore``); None for any other."""
    if isinstance(vectorstore, InMemoryVectorStore):
        return [(i, row["text"], dict(row.get("metadata") or {})) for i, row in vectorstore.store.items()]
    if not _is_chroma(vectorstore):
        return None
    out: list[tuple[str | None, str, dict[str, Any]]] = []
    while True:
        got = vectorstore.get(include=["documents", "metadatas"], limit=page, offset=len(out))
        out.extend((i, t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True))
        if len(got["ids"]) < page:
            return out


class MeVeRetriever(BaseRetriever):
    """MeVe's verified, de-duplicated, token-budgeted retrieval as a LangChain retriever.

    ``k`` caps the number of documents; ``k``, ``t_max`` and ``tau`` (and other
    MeVeConfig fields) can also be given at ``invoke`` time. Each phase is emitted
    as a ``meve_phase`` custom callback event. Any MeVeConfig field given here by name
    (``MeVeRetriever(meve=core, t_max=256)``), or ``config=``, applies to this retriever's
    runs; the wrapped MeVe's own config is left as it is.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    meve: Any = Field(description="a meve.MeVe pipeline")
    k: int | None = None
    overrides: dict[str, Any] = Field(default_factory=dict, description="MeVeConfig fields every run of this retriever passes to the MeVe")

    def __init__(self, **data: Any) -> None:
        """Settings are checked before anything else (no model loads for a refused value)."""
        core = data.get("meve")
        current = core.config if isinstance(core, MeVe) else MeVeConfig()
        others = [n for n in type(self).model_fields if n != "overrides"]
        kept = run_overrides(dict(data.pop("overrides", None) or {}), None, current, owner="MeVeRetriever")  # a copy of a retriever passes its own back
        data["overrides"] = {**kept, **run_overrides(data, data.pop("config", None), current, owner="MeVeRetriever", others=others)}
        super().__init__(**data)

    def model_post_init(self, context: Any, /) -> None:
        check_k(self.k)
        if not isinstance(self.meve, MeVe):
            raise ConfigError("meve", self.meve, "a meve.MeVe (build one with MeVeRetriever.from_texts / from_documents / from_vectorstore)")

    @property
    def config(self) -> MeVeConfig:
        """The settings this retriever runs with: the wrapped MeVe's, with ``overrides`` over them."""
        return self.meve.config.replace(**self.overrides)

    @classmethod
    def from_texts(cls, texts: Sequence[str], *, k: int | None = None, **kwargs: Any) -> MeVeRetriever:
        """Build the pipeline with :meth:`meve.MeVe.from_texts` (same keyword arguments, and any
        MeVeConfig field, e.g. ``t_max=200``; ``config=`` also takes ``meve tune``'s JSON file)."""
        check_k(k)  # before the corpus is embedded
        return cls(meve=_with_places(MeVe.from_texts(texts, **builder_kwargs(kwargs, MeVe.from_texts, "MeVeRetriever.from_texts"))), k=k)

    @classmethod
    def from_documents(cls, documents: Sequence[Document], *, k: int | None = None, **kwargs: Any) -> MeVeRetriever:
        """MindRef-style hierarchical retrieval over whole documents (no pre-chunking): documents
        by title (``metadata['title']``) and summary, then passages inside them, with character
        offsets in ``metadata['start']``/``['end']``. Keyword arguments go to :meth:`meve.MeVe.from_documents`."""
        check_k(k)
        built = builder_kwargs(kwargs, MeVe.from_documents, "MeVeRetriever.from_documents")
        docs = [(_doc_id(d, i), str(d.metadata.get("title", "")), d.page_content) for i, d in enumerate(documents)]
        return cls(meve=MeVe.from_documents(docs, **built), k=k)

    @classmethod
    def from_vectorstore(
        cls,
        vectorstore: Any,
        documents: Sequence[Document] | None = None,
        *,
        k: int | None = None,
        config: ConfigLike | None = None,
        scorer: Any = None,
        token_counter: Any = None,
        bm25_backend: str | None = None,
        **fields: Any,
    ) -> MeVeRetriever:
        """Keep your LangChain ``VectorStore`` (and its ``Embeddings``) for phase 1; ``documents``
        feed the BM25 fallback. They may be left out for a store meve can list (langchain-chroma's
        ``Chroma``, ``InMemoryVectorStore``: a new process needs nothing but the store); for one it
        cannot, they are required. A document's id is its ``id`` or ``metadata['id']``, else, in a
        store meve can list, the id the store gave the same text (chunks added without ids, as
        LangChain's tutorial adds them, so their stored vectors are read, not embedded again); one
        with none of these gets a content id (``text-<sha256>``), and a hit the store names
        differently (or not at all) is matched to a document by its text, so both sides return one
        passage once.

        A hit's vector (its cosine to the query, the redundancy check) is the one the store keeps
        where :func:`stored_vectors` can read it, so the verifier's is the only model pass over a
        hit; otherwise it is embedded with ``embed_documents`` (meve's log says so). MeVeConfig fields by name too."""
        check_k(k)
        config = config_from(fields, config, owner="MeVeRetriever.from_vectorstore")  # before the store is read
        embeddings = getattr(vectorstore, "embeddings", None)
        if embeddings is None:
            raise TypeError(f"{type(vectorstore).__name__} exposes no .embeddings; MeVe needs them for the query and redundancy checks")

        def search(vector: Any, n: int) -> list[tuple[str | None, str, dict[str, Any]]]:
            hits = vectorstore.similarity_search_by_vector([float(x) for x in vector], k=n)
            return [(_given_id(d), d.page_content, {key: v for key, v in d.metadata.items() if key != "id"}) for d in hits]

        def add(ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Any]) -> None:
            docs = [Document(page_content=t, metadata=dict(m or {}), id=i) for i, t, m in zip(ids, texts, metadatas, strict=True)]
            vectorstore.add_documents(docs, ids=list(ids))

        listed = listed_rows(vectorstore)
        if documents is None:
            if listed is None:
                raise TypeError(f"meve cannot list the chunks of a {type(vectorstore).__name__}; pass documents= (the chunks you added to it)")
            rows = [(i, t, _user_meta(m)) for i, t, m in listed]
        else:
            stored_ids = {t: i for i, t, _ in listed or ()}
            rows = [
                (_given_id(d) or stored_ids.get(d.page_content), d.page_content, {key: v for key, v in d.metadata.items() if key != "id"}) for d in documents
            ]
        store = ForeignStore(
            name=type(embeddings).__name__,
            search=search,
            embed_texts=embeddings.embed_documents,
            embed_query=embeddings.embed_query,
            rows=rows,
            add=add,
            stored=stored_vectors(vectorstore),
        )
        extra = {"bm25_backend": bm25_backend} if bm25_backend is not None else {}
        return cls(meve=_with_places(meve_over(store, config=config, scorer=scorer, token_counter=token_counter, **extra)), k=k)

    def warm_up(self, documents: Sequence[Document] | None = None, *, show_progress: bool = True) -> int:
        """Load the models now and have the verifier read ``documents`` (default: every passage
        this retriever knows) ahead of any query, with a progress bar; what it reads is kept on
        disk, so later processes skip it too. Nothing to read for chunks embedded with
        ``MeVeEmbeddings``. Returns how many went through the model."""
        texts = self.meve.store.documents()[1] if documents is None else [d.page_content for d in documents]
        before = getattr(self.meve.scorer, "encoded_ahead", 0)
        self.meve.warm_up(list(texts), show_progress=show_progress)
        return int(getattr(self.meve.scorer, "encoded_ahead", 0) - before)

    async def awarm_up(self, documents: Sequence[Document] | None = None, *, show_progress: bool = True) -> int:
        """:meth:`warm_up` in a worker thread."""
        return await asyncio.to_thread(self.warm_up, documents, show_progress=show_progress)

    def _emit(self, run_manager: CallbackManagerForRetrieverRun) -> Any:
        child = run_manager.get_child()
        if not child.handlers:
            return None  # no listener: skip building five event payloads per query (measured ms of overhead)

        def on_phase(rec: PhaseRecord) -> None:
            child.on_custom_event(PHASE_EVENT, rec.to_dict(), run_id=run_manager.run_id)

        return on_phase

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        return _docs(self.meve.run(query, on_phase=self._emit(run_manager), **{**self.overrides, **_overrides(kwargs, self.k)}))

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any) -> list[Document]:
        records: list[PhaseRecord] = []
        result = await self.meve.arun(query, on_phase=records.append, **{**self.overrides, **_overrides(kwargs, self.k)})
        child = run_manager.get_child()
        for rec in records if child.handlers else ():  # emitted on the loop, after the worker thread finished
            await child.on_custom_event(PHASE_EVENT, rec.to_dict(), run_id=run_manager.run_id)
        return _docs(result)
