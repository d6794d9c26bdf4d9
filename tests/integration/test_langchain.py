"""LangChain adapters with real objects: MiniLM, Chroma, langchain-tests' standard suite, a real agent graph.
The only fake is the chat model (no LLM runs offline), named as such."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_meve import MeVeCompressor, MeVeRetriever, MomentaryContextMiddleware, reconstruct_messages
from meve import MemoryConfig, MeVeConfig, MomentaryMemory
from meve.cli.commands import demo_corpus
from meve.scoring.cosine import CosineScorer
from meve.scoring.embedders import default_embedder
from meve.scoring.late_interaction import shared_cache, text_key
from tests.fakes import run_while_ticking

pytestmark = pytest.mark.integration

TEXTS = [p["text"] for p in demo_corpus()["passages"]]


def test_langchain_meve_public_api():
    import langchain_meve

    assert sorted(langchain_meve.__all__) == ["MeVeCompressor", "MeVeEmbeddings", "MeVeRetriever", "MomentaryContextMiddleware", "reconstruct_messages"]


class TestMeVeRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return _DemoRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"k": 3}

    @property
    def retriever_query_example(self) -> str:
        # k caps MeVe's context; a broad query has at least 3 passages that pass verification.
        return "bicycle"


_SHARED: dict[str, Any] = {}


class _DemoRetriever(MeVeRetriever):
    """MeVeRetriever on the demo corpus with the default configuration and verifier, built once
    (the standard suite constructs it repeatedly)."""

    def __init__(self, **kwargs: Any) -> None:
        if "meve" not in _SHARED:
            _SHARED["meve"] = MeVeRetriever.from_texts(TEXTS, embedder=default_embedder()).meve
        super().__init__(meve=_SHARED["meve"], **kwargs)


def test_retriever_metadata_invoke_overrides_and_phase_events(minilm):
    from langchain_core.callbacks import BaseCallbackHandler

    events: list[dict] = []

    class Collect(BaseCallbackHandler):
        def on_custom_event(self, name, data, **kwargs):
            if name == "meve_phase":
                events.append(data)

    r = MeVeRetriever.from_texts(TEXTS, embedder=minilm, scorer=CosineScorer(minilm))
    docs = r.invoke("How do pneumatic tyres make cycling more comfortable?", config={"callbacks": [Collect()]}, t_max=60, tau=0.5)
    assert [e["phase"] for e in events] == ["retrieve", "verify", "fallback", "prioritise", "prune", "budget"]
    assert sum(d.metadata["meve_tokens"] for d in docs) <= 60
    assert docs[0].metadata["meve_source"] == "verified" and 0 <= docs[0].metadata["meve_score"] <= 1
    unverified = r.invoke("How do pneumatic tyres make cycling more comfortable?", verify=False)
    assert {d.metadata["meve_source"] for d in unverified} == {"unverified"}
    with pytest.raises(TypeError, match="allowed at invoke time"):
        r.invoke("x", bogus=1)


def test_retriever_keeps_a_users_own_id_metadata_key(minilm):
    ids = [f"doc-{i}" for i in range(len(TEXTS))]
    r = MeVeRetriever.from_texts(TEXTS, ids=ids, metadatas=[{"id": f"isbn-{i}"} for i in range(len(TEXTS))], embedder=minilm, scorer=CosineScorer(minilm))
    got = r.invoke("How do pneumatic tyres make cycling more comfortable?")
    assert got and all(d.metadata["id"] == f"isbn-{d.id.split('-')[1]}" for d in got)


async def test_retriever_async_does_not_block_the_loop(minilm):
    r = MeVeRetriever.from_texts(TEXTS, embedder=minilm, scorer=CosineScorer(minilm), k=2)
    docs, ticks = await run_while_ticking(r.ainvoke("What does the derailleur do?"))
    assert len(docs) <= 2 and docs[0].id == "doc-9" and ticks > 0


def test_from_vectorstore_keeps_the_users_langchain_chroma_store(minilm, chroma_dir):
    from langchain_chroma import Chroma
    from langchain_core.embeddings import Embeddings

    class MiniLMEmbeddings(Embeddings):
        """Real MiniLM behind LangChain's interface, recording which side embedded what."""

        documents: ClassVar[list[str]] = []
        queries: ClassVar[list[str]] = []

        def embed_documents(self, texts):
            self.documents.extend(texts)
            return minilm.encode(texts).tolist()

        def embed_query(self, text):
            self.queries.append(text)
            return minilm.encode([text])[0].tolist()

    docs = [Document(page_content=p["text"], metadata={"title": p["title"]}, id=p["id"]) for p in demo_corpus()["passages"]]
    store = Chroma(collection_name="lcdocs", embedding_function=MiniLMEmbeddings(), persist_directory=chroma_dir)
    store.add_documents(docs, ids=[d.id for d in docs])
    r = MeVeRetriever.from_vectorstore(store, docs, scorer=CosineScorer(minilm))
    question = "How do pneumatic tyres make cycling more comfortable?"
    MiniLMEmbeddings.documents.clear()
    got = r.invoke(question, t_max=200)
    ids = [d.id for d in got]
    assert ids[0] == "dunlop" and "dunlop-dup" not in ids
    # The query goes through embed_query; passages never go through embed_documents again: their
    # vectors are the ones Chroma keeps (issue 49: one model pass per hit, the verifier's).
    assert question in MiniLMEmbeddings.queries and not MiniLMEmbeddings.documents
    assert r.invoke(question, t_max=200) and not MiniLMEmbeddings.documents
    assert r.meve.store.vectors_read > 0 and r.meve.store.vectors_embedded == 0
    fb = r.invoke("Campagnolo", k_init=2, tau=0.99, fallback_tau=0.0)  # plumbing test: the cosine verifier would reject the hit
    assert "derailleur-history" in [d.id for d in fb]
    # No scorer named: the default verifier runs meve's own MiniLM whatever the store's model is
    # (it used to be built on the store's LangChain embeddings and fail at the first query).
    default = MeVeRetriever.from_vectorstore(store, docs)
    assert default.meve.scorer.name.startswith("late-interaction:")
    top = default.invoke(question)[0]
    assert top.metadata["meve_source"] == "verified"
    # The store's passages never went through meve's ingestion: their token vectors were made at query
    # time, by this retriever or an earlier component over the same model (the process shares them).
    assert text_key(top.page_content) in default.meve.scorer.cache and default.meve.scorer.cache is shared_cache(minilm)


def _fake_idless_store(embeddings):
    """A FAKE store, named as one: LangChain's real InMemoryVectorStore whose hits come back
    without ``Document.id``, as from vector-store integrations that never set it (neither store
    installed here, InMemoryVectorStore or langchain-chroma, leaves it out)."""
    from langchain_core.vectorstores import InMemoryVectorStore

    class FakeIdlessVectorStore(InMemoryVectorStore):
        def similarity_search_by_vector(self, embedding, k=4, **kwargs):
            return [Document(page_content=d.page_content, metadata=d.metadata) for d in super().similarity_search_by_vector(embedding, k, **kwargs)]

    return FakeIdlessVectorStore(embeddings)


def test_from_vectorstore_gives_id_less_hits_content_ids_bm25_shares(minilm):
    # Issue 52 #5a: every hit without an id got id "", so all dense hits collapsed into one passage
    # (the first hit's text).
    from langchain_meve import MeVeEmbeddings

    store = _fake_idless_store(MeVeEmbeddings(minilm))
    docs = [Document(page_content=t) for t in TEXTS]
    store.add_documents(docs)
    r = MeVeRetriever.from_vectorstore(store, docs, scorer=CosineScorer(minilm), config=MeVeConfig(k_init=6, tau=0.2, prioritisation="none"))
    got = r.invoke("How do pneumatic tyres make cycling more comfortable?", t_max=1000)
    texts = [d.page_content for d in got]
    assert len(texts) > 1 and len(set(texts)) == len(texts)
    assert len(set(r.meve.lexical.ids)) == len(set(TEXTS)) and {d.id for d in got} <= set(r.meve.lexical.ids)  # the ids BM25 holds


def test_from_vectorstore_matches_documents_given_without_ids_to_the_stores_own_ids(minilm, chroma_dir):
    # Issue 52 #5b: documents without ids got BM25 ids "0".."n" while Chroma named the same rows
    # with uuids, so a passage the dense search and the BM25 fallback both found came back twice.
    from langchain_chroma import Chroma

    from langchain_meve import MeVeEmbeddings

    docs = [Document(page_content=t) for t in TEXTS]
    store = Chroma(collection_name="noids", embedding_function=MeVeEmbeddings(minilm), persist_directory=chroma_dir)
    store.add_documents(docs)  # Chroma gives every row a uuid
    r = MeVeRetriever.from_vectorstore(store, docs, scorer=CosineScorer(minilm))
    settings = {"k_init": 4, "tau": 0.0, "n_min": 20, "fallback_k": 10, "fallback_tau": 0.0, "prioritisation": "none", "t_max": 4000}
    got = r.invoke("pneumatic tyres", **settings)
    texts = [d.page_content for d in got]
    assert len(texts) > 1 and len(set(texts)) == len(texts)
    assert {d.id for d in got} <= set(r.meve.lexical.ids)
    fallback = r.meve.run("pneumatic tyres", **settings).phase("fallback")
    assert fallback.info["already_verified"] == [d.id for d in got]  # BM25 found the dense hits, under their ids


def test_from_vectorstore_returns_the_new_text_of_a_document_upserted_again(minilm, chroma_dir):
    # Issue 52 (read in code): the wrapper kept the text it first saw under an id.
    from langchain_chroma import Chroma

    from langchain_meve import MeVeEmbeddings

    docs = [Document(page_content=p["text"], id=p["id"]) for p in demo_corpus()["passages"]]
    store = Chroma(collection_name="upserts", embedding_function=MeVeEmbeddings(minilm), persist_directory=chroma_dir)
    store.add_documents(docs, ids=[d.id for d in docs])
    r = MeVeRetriever.from_vectorstore(store, docs, scorer=CosineScorer(minilm))
    question = "Who developed the pneumatic tyre?"
    assert r.invoke(question)[0].id == "dunlop"
    newer = "John Boyd Dunlop developed the first practical pneumatic tyre in 1888, for his son's tricycle in Belfast."
    store.add_documents([Document(page_content=newer, id="dunlop")], ids=["dunlop"])  # Chroma upserts
    got = {d.id: d.page_content for d in r.invoke(question)}
    assert got["dunlop"] == newer


def test_compressor_in_contextual_compression_retriever_and_lcel(minilm):
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.runnables import RunnableLambda

    base = MeVeRetriever.from_texts(TEXTS, embedder=minilm, config=MeVeConfig(verify=False, prioritisation="none", t_max=5000), scorer=CosineScorer(minilm))
    comp = MeVeCompressor(embedder=minilm, scorer=CosineScorer(minilm), t_max=80)
    ccr = ContextualCompressionRetriever(base_compressor=comp, base_retriever=base)
    out = ccr.invoke("How do pneumatic tyres make cycling more comfortable?")
    assert out and sum(d.metadata["meve_tokens"] for d in out) <= 80
    assert "dunlop-dup" not in [d.id for d in out]
    docs = base.invoke("tyres")
    before = [dict(d.metadata) for d in docs]
    chain = RunnableLambda(lambda q: comp.compress_documents(base.invoke(q), q))
    assert chain.invoke("tyres")
    comp.compress_documents(docs, "tyres")
    assert [d.metadata for d in docs] == before  # inputs not mutated
    few = MeVeCompressor(embedder=minilm, scorer=CosineScorer(minilm), tau=0.999, n_min=2, fallback_k=2).compress_documents(docs, "tyres")
    assert len(few) == 2 and all(d.metadata["meve_source"] == "fallback" for d in few)


def test_the_budget_counts_what_a_stuff_chain_sends_page_content_only(minilm):
    # A pin for docs/langchain.md: LangChain's stuff-documents chains send each Document through
    # "{page_content}" joined by a blank line, so the metadata is not sent and meve does not count it.
    from langchain_classic.chains.combine_documents.base import DEFAULT_DOCUMENT_PROMPT, DEFAULT_DOCUMENT_SEPARATOR
    from langchain_core.prompts import format_document

    from meve.core.tokens import get_token_counter

    docs = [Document(page_content=p["text"], id=p["id"], metadata={"source": f"/srv/library/bicycle-history/{p['id']}.txt"}) for p in demo_corpus()["passages"]]
    out = MeVeCompressor(embedder=minilm, scorer=CosineScorer(minilm), tau=0.0, cut="none", t_max=120).compress_documents(docs, "pneumatic tyres")
    sent = [format_document(d, DEFAULT_DOCUMENT_PROMPT) for d in out]
    counter = get_token_counter()
    assert len(out) > 1 and counter.count(DEFAULT_DOCUMENT_SEPARATOR.join(sent)) <= 120
    assert [d.metadata["meve_tokens"] for d in out] == [counter.count(t) for t in sent]


def test_compressor_marks_what_query_coverage_adds(minilm):
    docs = [Document(page_content=p["text"], id=p["id"]) for p in demo_corpus()["passages"]]
    q = "Who built the draisine and who developed the pneumatic tyre?"
    plain = MeVeCompressor(embedder=minilm, tau=0.85, coverage=0.0, prioritisation="none").compress_documents(docs, q)
    covered = MeVeCompressor(embedder=minilm, tau=0.85, coverage=0.1, prioritisation="none").compress_documents(docs, q)
    assert [d.metadata["meve_source"] for d in plain] == ["verified"]
    added = [d for d in covered if d.metadata["meve_source"] == "covered"]
    assert len(added) == 1 and added[0].id.startswith("draisine") and added[0].metadata["meve_score"] < 0.85


def test_compressor_defaults_work_with_no_arguments():
    out = MeVeCompressor().compress_documents([Document(page_content=t) for t in TEXTS[:6]], "Who built the draisine?")
    assert out and out[0].page_content.startswith(("The first two-wheeled", "In 1817", "Karl Drais"))


class FakeToolChatModel(GenericFakeChatModel):
    """A FAKE chat model (no LLM runs offline): replies from a script, records what it saw."""

    seen: list = []  # noqa: RUF012 - reset per test

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_middleware_in_a_real_agent_graph(minilm, chroma_dir):
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    @tool
    def lookup_allergy(name: str) -> str:
        """Look up a person's allergy."""
        return f"{name} is allergic to peanuts"

    script = []
    history_turns = 30
    for i in range(history_turns):
        script.append(AIMessage(content=f"Noted fact number {i}."))
    script += [
        AIMessage(content="", tool_calls=[{"name": "lookup_allergy", "args": {"name": "Ana"}, "id": "call-1"}]),
        AIMessage(content="Ana is allergic to peanuts, so avoid satay."),
    ]
    model = FakeToolChatModel(messages=iter(script))
    model.seen = []
    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=3, l_max=120))
    agent = create_agent(model=model, tools=[lookup_allergy], middleware=[mw], system_prompt="You are helpful.", checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "thread-1"}}
    for i in range(history_turns):
        fact = "My sister Ana loves satay." if i == 3 else f"Filler remark {i} about the weather and trains."
        agent.invoke({"messages": [HumanMessage(content=fact)]}, cfg)
    final = agent.invoke({"messages": [HumanMessage(content="Can Ana eat satay? Check her allergy.")]}, cfg)
    assert final["messages"][-1].content.startswith("Ana is allergic")
    assert len(final["messages"]) == 2 * history_turns + 4  # checkpointed history untouched
    mem = mw.memory_for("thread-1")
    counter = mem.token_counter
    recalled_any = False
    for call in model.seen:
        recalled = [m for m in call if (m.id or "").startswith("meve-")]  # recalled turns' ids; no flag rides into the prompt
        assert not any("meve_recalled" in m.additional_kwargs for m in call)
        assert sum(counter.count(m.content) for m in recalled) <= 120
        recalled_any = recalled_any or bool(recalled)
        assert isinstance(call[0], SystemMessage) and call[0].content == "You are helpful."
    last = model.seen[-1]
    assert recalled_any and any("Ana loves satay" in str(m.content) for m in last)
    assert last[-2].tool_calls and isinstance(last[-1], ToolMessage) and last[-1].tool_call_id == "call-1"
    assert any(isinstance(m, HumanMessage) and m.content.startswith("Can Ana eat satay") for m in last)
    assert len(last) < len(final["messages"])
    assert len(MomentaryMemory("thread-1", path=chroma_dir, embedders=[minilm])) == len(mem)


def test_reconstruct_messages_keeps_tool_pairs_whole(minilm):
    import time

    from meve.retrieval.chroma import chroma_client

    mem = MomentaryMemory("plain", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(top_k=1, l_max=40))
    msgs = [HumanMessage(content=f"old message {i}", id=f"h{i}") for i in range(5)]
    msgs += [
        HumanMessage(content="What is 2+2?", id="q"),
        AIMessage(content="", id="a1", tool_calls=[{"name": "calc", "args": {}, "id": "c1"}]),
        ToolMessage(content="4", tool_call_id="c1", id="t1"),
    ]
    out = reconstruct_messages(msgs, mem)
    assert [m.id for m in out[-3:]] == ["q", "a1", "t1"]
    assert sum(1 for m in out if isinstance(m, ToolMessage)) == 1


async def test_middleware_async_agent_path(minilm):
    import time

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from meve.retrieval.chroma import chroma_client

    mem = MomentaryMemory(
        "async-thread", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(top_k=2, l_max=50)
    )
    model = FakeToolChatModel(messages=iter(AIMessage(content=f"reply {i}") for i in range(10)))
    model.seen = []
    agent = create_agent(model=model, tools=[], middleware=[MomentaryContextMiddleware(mem)], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "ignored-because-memory-is-fixed"}}
    for i in range(5):
        await agent.ainvoke({"messages": [HumanMessage(content=f"async message {i} about trains")]}, cfg)
    assert len(mem) == 10  # 5 user turns + 5 AI replies, each stored when the model returned it (aafter_model)
    last = model.seen[-1]
    assert last[-1].content == "async message 4 about trains"
    recalled = [m for m in last if (m.id or "").startswith("meve-")]
    assert recalled and sum(mem.token_counter.count(m.content) for m in recalled) <= 50


def test_hierarchical_retrieval_through_langchain(minilm):
    docs = [Document(page_content=p["text"], metadata={"title": p["title"]}, id=p["id"]) for p in demo_corpus()["passages"]]
    r = MeVeRetriever.from_documents(docs, embedder=minilm, scorer=CosineScorer(minilm), config=MeVeConfig(k_docs=3, t_max=200))
    got = r.invoke("Who made the first practical pneumatic tyre?")
    assert got[0].metadata["doc_id"] in ("dunlop", "dunlop-dup")
    src = next(p["text"] for p in demo_corpus()["passages"] if p["id"] == got[0].metadata["doc_id"])
    assert src[got[0].metadata["start"] : got[0].metadata["end"]] == got[0].page_content


BROMPTON = " ".join(
    [
        "The Brompton folding bicycle was designed by Andrew Ritchie in London in 1975.",
        "Its hinge lets the frame fold in half in about twenty seconds.",
        "Early frames were brazed by hand in a small workshop under a railway arch.",
        "The company moved its factory to Greenford in west London in 2015.",
        "Each bicycle is still brazed by a named craftsman who signs the frame.",
        "The standard model has a steel frame and sixteen inch wheels.",
        "A titanium version saves about a kilogram of weight.",
        "Riders in cities use them to combine cycling with trains and buses.",
    ]
)


@pytest.mark.parametrize("prune", ["none", "scorer"])
def test_a_mindref_window_cut_to_fit_reports_each_part_it_keeps_in_its_document(minilm, prune):
    # Issue 78 #6: after a cut, a window's start/end are its window's (text[start:end] is the whole
    # window, not what the model reads); meve_spans give each part the model reads, as offsets from
    # start, cut alone or pruned then cut (the latter indexed the pruned text before last session's fix).
    from meve.pipeline.prune import GAP_MARK

    docs = [Document(page_content=BROMPTON, metadata={"title": "Brompton"}, id="bike"), Document(page_content="Tea is a drink made from leaves.", id="tea")]
    config = MeVeConfig(passage_tokens=120, t_max=30, prune=prune, prune_gate=0.0)
    r = MeVeRetriever.from_documents(docs, embedder=minilm, config=config)
    question = "Who designed the Brompton folding bicycle and where is its factory?"
    result = r.meve.run(question)
    (window,) = result.documents
    (got,) = r.invoke(question)
    assert got.page_content == window.text and got.metadata["meve_cut"] is True and window.id in result.phase("budget").info["cut"]
    start, end, spans = got.metadata["start"], got.metadata["end"], got.metadata["meve_spans"]
    assert (window.metadata["start"], window.metadata["end"]) == (start, end) and BROMPTON[start:end] != got.page_content  # the window's own offsets
    assert [list(s) for s in window.spans] == spans and (len(spans) > 1) == (prune == "scorer")
    assert all(0 <= a < b <= end - start for a, b in spans)
    assert GAP_MARK.join(BROMPTON[start + a : start + b] for a, b in spans) == got.page_content  # each part the model reads


def test_middleware_without_a_thread_id_refuses_to_share_a_default_session(minilm, chroma_dir):
    from langchain.agents import create_agent

    from meve import ConfigError

    model = FakeToolChatModel(messages=iter([AIMessage(content="hi")]))
    model.seen = []
    agent = create_agent(model=model, tools=[], middleware=[MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm])])
    with pytest.raises(ConfigError, match=r"thread_id=None is not allowed.*never puts different users into one shared default session"):
        agent.invoke({"messages": [HumanMessage(content="my secret is 42")]})
    assert model.seen == []  # the model was never called with anyone's memory


def test_messages_without_ids_are_stored_once_across_restarts_and_never_emitted_twice(minilm, chroma_dir):
    def conversation():  # fresh objects each time, as a restarted process would rebuild them
        return [
            HumanMessage(content="I ride a green Brompton."),
            AIMessage(content="Nice bike."),
            HumanMessage(content="What colour is my bike?"),
        ]

    mem = MomentaryMemory("restart", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=4, l_max=200))
    out = reconstruct_messages(conversation(), mem)
    assert len(mem) == 3
    assert [m.content for m in out].count("What colour is my bike?") == 1
    again = MomentaryMemory("restart", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=4, l_max=200))
    out = reconstruct_messages(conversation(), again)
    assert len(again) == 3  # nothing stored twice after the "restart"
    assert [m.content for m in out].count("What colour is my bike?") == 1
    # By default (dates="auto") a question that does not ask about time gets undated turns...
    assert any(m.content == "I ride a green Brompton." and (m.id or "").startswith("meve-") for m in out)
    # ...and with dates on, recalled turns carry their date into the messages.
    dated = MomentaryMemory("restart", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=4, l_max=200, dates=True))
    out = reconstruct_messages(conversation(), dated)
    assert any(re.fullmatch(r"\[\d{4}-\d\d-\d\d\] I ride a green Brompton\.", m.content) and (m.id or "").startswith("meve-") for m in out)


PRUNE_DOCS = [
    "The Louvre is the world's most-visited museum. The Eiffel Tower was completed in March 1889. "
    "It was the entrance arch to the World's Fair. Bees pollinate many flowering plants.",
    "Pride and Prejudice is an 1813 novel by Jane Austen.",
]


def test_compressor_prunes_sentences_and_gives_their_offsets(minilm):
    docs = [Document(page_content=t, metadata={"src": i}, id=f"d{i}") for i, t in enumerate(PRUNE_DOCS)]
    out = MeVeCompressor(embedder=minilm, prune="scorer", prune_ratio=0.6, n_min=0).compress_documents(docs, "When was the Eiffel Tower completed?")
    top = next(d for d in out if d.id == "d0")
    assert "Eiffel Tower was completed in March 1889" in top.page_content and "Bees" not in top.page_content
    # "It was the entrance arch" opens with a pronoun: kept only with the sentence before it.
    assert "It was the entrance arch" not in top.page_content or "The Eiffel Tower was completed" in top.page_content
    spans = top.metadata["meve_spans"]
    assert " … ".join(PRUNE_DOCS[0][a:b] for a, b in spans) == top.page_content
    assert top.metadata["src"] == 0 and docs[0].page_content == PRUNE_DOCS[0]


def test_compressor_without_verification_labels_nothing_verified(minilm):
    docs = [Document(page_content=t, id=f"d{i}") for i, t in enumerate(TEXTS[:6])]
    out = MeVeCompressor(embedder=minilm, verify=False, t_max=2000).compress_documents(docs, "How do pneumatic tyres make cycling more comfortable?")
    assert out and {d.metadata["meve_source"] for d in out} <= {"unverified", "fallback"}
    assert "unverified" in {d.metadata["meve_source"] for d in out}


def _plain_memory(minilm, **cfg):
    import time

    from meve.retrieval.chroma import chroma_client

    return MomentaryMemory("lc", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(**cfg))


def test_an_edited_message_in_a_real_agent_graph_supersedes_the_stored_turn(minilm, chroma_dir):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    model = FakeToolChatModel(messages=iter([AIMessage(content=f"Noted {i}.") for i in range(4)]))
    model.seen = []
    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm], config=MemoryConfig(l_max=300))
    agent = create_agent(model=model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "edits"}}
    agent.invoke({"messages": [HumanMessage(content="My bike is a red Peugeot.", id="u1")]}, cfg)
    # The user edits the message: LangGraph replaces it in the thread's state (same id, new text).
    state = agent.invoke({"messages": [HumanMessage(content="My bike is a green Brompton.", id="u1")]}, cfg)
    assert [m.content for m in state["messages"] if m.id == "u1"] == ["My bike is a green Brompton."]
    agent.invoke({"messages": [HumanMessage(content="What colour is my bike?", id="u2")]}, cfg)  # the thread lives on
    mem = mw.memory_for("edits")
    stored = {t.id: t for t in mem.turns()}
    assert stored["u1"].text == "My bike is a green Brompton." and stored["u1"].edited is not None
    assert not any("Peugeot" in t.text for t in mem.turns())
    last = model.seen[-1]
    assert any(m.content == "My bike is a green Brompton." and m.id == "meve-u1" for m in last)
    assert not any("Peugeot" in str(m.content) for m in last)
    row = next(tr for tr in mem.reconstruct("What colour is my bike?").trace if tr.id == "u1")
    assert row.edited == stored["u1"].edited.isoformat()  # the trace records that the turn was superseded
    mw.close()


def test_a_sliding_window_without_ids_stores_each_turn_once_and_a_repeat_in_view_twice(minilm):
    conversation = [HumanMessage(content="ok"), AIMessage(content="Shall I book the 9:40 train?"), HumanMessage(content="ok")]
    conversation += [AIMessage(content="Booked."), HumanMessage(content="Thanks, which platform?")]
    mem = _plain_memory(minilm, l_max=200)
    for end in range(1, len(conversation) + 1):
        window = [type(m)(content=m.content) for m in conversation[max(0, end - 3) : end]]  # fresh objects, as trim_messages gives
        reconstruct_messages(window, mem)
    assert [t.text for t in mem.turns()] == [m.content for m in conversation]  # 5 turns, not one per window shift


def test_assistant_like_roles_are_stored_as_assistant_and_unknown_roles_are_skipped_with_a_warning(minilm, caplog):
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages import ChatMessage as RoleMessage

    mem = _plain_memory(minilm, l_max=300)
    msgs = [
        HumanMessage(content="Which gear for the hill?", id="h1"),
        AIMessageChunk(content="Use the lowest gear.", id="c1"),  # left in state after streaming
        RoleMessage(role="model", content="Gemini says: spin fast.", id="g1"),
        RoleMessage(role="chatbot", content="Cohere says: stand up.", id="k1"),
        RoleMessage(role="critic", content="That advice is poor.", id="x1"),
        HumanMessage(content="And downhill?", id="h2"),
    ]
    with caplog.at_level("WARNING", logger="meve"):
        out = reconstruct_messages(msgs, mem)
    assert [(t.id, t.role) for t in mem.turns()] == [("h1", "user"), ("c1", "assistant"), ("g1", "assistant"), ("k1", "assistant"), ("h2", "user")]
    assert "role 'critic' are not stored" in caplog.text
    recalled = {m.id: m for m in out if (m.id or "").startswith("meve-")}
    assert isinstance(recalled["meve-g1"], AIMessage) and isinstance(recalled["meve-c1"], AIMessage)


def test_a_tool_call_with_text_stays_with_its_result_and_is_not_stored_alone(minilm):
    mem = _plain_memory(minilm, l_max=300)
    call = AIMessage(content="Let me look that up.", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Lyon"}, "id": "c1"}])
    msgs = [HumanMessage(content="Weather in Lyon?", id="q"), call, ToolMessage(content="Sunny, 24 C", tool_call_id="c1", id="t1")]
    out = reconstruct_messages(msgs, mem)
    assert [m.id for m in out] == ["q", "a1", "t1"]
    assert [t.id for t in mem.turns()] == ["q", "t1"]  # the result is kept; the call is never recalled later without it
    out = reconstruct_messages([*msgs, AIMessage(content="It is sunny in Lyon.", id="a2"), HumanMessage(content="Thanks!", id="h2")], mem)
    assert [t.id for t in mem.turns()] == ["q", "t1", "a2", "h2"] and not any(m.id == "meve-a1" for m in out)


class _HeldMiniLM:
    """The real MiniLM; embedding a text that holds "hold:" waits until the test releases it."""

    def __init__(self, inner):
        import threading

        self.inner, self.name = inner, inner.name
        self.entered, self.release = threading.Event(), threading.Event()

    def encode(self, texts):
        if any("hold:" in t for t in texts):
            self.entered.set()
            assert self.release.wait(60)
        return self.inner.encode(texts)


def test_evicting_a_session_never_closes_a_memory_a_model_call_is_using(minilm, chroma_dir):
    import threading
    from pathlib import Path

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from meve.retrieval.chroma import open_clients

    held = _HeldMiniLM(minilm)
    model = FakeToolChatModel(messages=iter([AIMessage(content="Hello."), AIMessage(content="Saved.")]))
    model.seen = []
    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[held], max_sessions=1)
    agent = create_agent(model=model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    results: dict[str, object] = {}

    def run(thread: str, text: str) -> None:
        try:
            results[thread] = agent.invoke({"messages": [HumanMessage(content=text)]}, {"configurable": {"thread_id": thread}})
        except Exception as exc:
            results[thread] = exc

    a = threading.Thread(target=run, args=("a", "hold: my locker code is 4471"))
    a.start()
    assert held.entered.wait(60)  # thread a's model call is storing its turn, inside the middleware
    b = threading.Thread(target=run, args=("b", "hi"))  # opening b evicts a, the least recently used
    b.start()
    try:
        b.join(30)  # a deadlock guard, not a timing: b never needs a's memory
        b_done_while_a_busy = not b.is_alive()
    finally:
        held.release.set()
    a.join(60)
    b.join(60)
    # Eviction neither closed a's memory under its call nor waited on it (it used to do both).
    assert b_done_while_a_busy
    assert not isinstance(results["a"], Exception), results["a"]
    assert not isinstance(results["b"], Exception), results["b"]
    assert open_clients()[str(Path(chroma_dir).resolve())] == 1  # a's memory was closed once its call ended; b's is open
    assert [t.text for t in mw.memory_for("a").turns()] == ["hold: my locker code is 4471", "Saved."]  # its reply stored after the call
    mw.close()


def test_components_built_one_after_another_share_the_token_vectors_of_what_they_verified(minilm):
    # Issue 63 #4: the cache belonged to each instance, so every new postprocessor or compressor
    # (one per request in many apps) encoded its long nodes again: 40-48 s per first query.
    from llamaindex_meve import MeVePostprocessor

    texts = [f"Chapter {i}: the chain of bicycle number {i} is oiled every {100 + i} kilometres with wax." for i in range(6)]
    found = [Document(page_content=t, id=f"c{i}") for i, t in enumerate(texts)]
    first = MeVeCompressor()
    first.compress_documents(found, "How often is the chain of bicycle 3 oiled?")
    encoded_first = first._models.scoring.scorer.encoded_at_query_time
    second = MeVeCompressor()
    second.compress_documents(found, "Which bicycle chain is oiled every 104 kilometres?")
    from llama_index.core.schema import NodeWithScore, TextNode

    third = MeVePostprocessor()
    third.postprocess_nodes([NodeWithScore(node=TextNode(text=t), score=0.5) for t in texts], query_str="chain wax")
    assert encoded_first == len(texts)
    assert second._models.scoring.scorer.encoded_at_query_time == 0 and third._models.scoring.scorer.encoded_at_query_time == 0
    assert second._models.scoring.scorer is not first._models.scoring.scorer  # their own scorers, one cache


def test_each_threads_last_reply_and_its_tool_results_are_stored_when_the_model_returns_them(minilm, chroma_dir):
    # Issue 64: the last AI reply of a thread was recorded only at the thread's next model call, so
    # with an in-memory checkpointer it was lost across a restart; tool results were never stored.
    import subprocess
    import sys
    from pathlib import Path

    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    @tool
    def lookup_locker(name: str) -> str:
        """Look up a person's gym locker."""
        return f"{name}'s locker is number 417, code 2291."

    def script(thread: str) -> list[AIMessage]:
        return [
            AIMessage(content="", tool_calls=[{"name": "lookup_locker", "args": {"name": thread}, "id": f"call-{thread}"}]),
            AIMessage(content=f"Found it: {thread}'s locker is number 417."),
            AIMessage(content=f"Last words of thread {thread}: see you at the gym."),
        ]

    for thread in ("ana", "ben"):
        model = FakeToolChatModel(messages=iter(script(thread)))
        model.seen = []
        mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm])
        agent = create_agent(model=model, tools=[lookup_locker], middleware=[mw], checkpointer=InMemorySaver())
        cfg = {"configurable": {"thread_id": thread}}
        agent.invoke({"messages": [HumanMessage(content=f"Where is {thread}'s locker?")]}, cfg)
        agent.invoke({"messages": [HumanMessage(content="Thanks, bye.")]}, cfg)
        mw.close()
    code = (
        "import sys\nfrom meve import MomentaryMemory\nfrom meve.scoring.embedders import default_embedder\n"
        "for t in ('ana', 'ben'):\n"
        "    m = MomentaryMemory(t, path=sys.argv[1], embedders=[default_embedder()], create=False)\n"
        "    print(t, [(x.role, x.text) for x in m.turns()])\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code, chroma_dir], capture_output=True, text=True, timeout=300, cwd=root).stdout  # a new process
    for thread in ("ana", "ben"):
        line = next(x for x in out.splitlines() if x.startswith(thread + " "))
        assert f"Last words of thread {thread}: see you at the gym." in line  # the run's final reply, stored when returned
        assert f"('tool', \"{thread}'s locker is number 417, code 2291.\")" in line  # the tool result, as a turn


def test_a_recalled_tool_result_reaches_the_model_as_an_ai_message_and_storing_them_is_an_option(minilm):
    mem = _plain_memory(minilm, l_max=300)
    call = AIMessage(content="", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Lyon"}, "id": "c1"}])
    first = [HumanMessage(content="Weather in Lyon?", id="q"), call, ToolMessage(content="Lyon: sunny, 24 C, wind 5 km/h", tool_call_id="c1", id="t1")]
    reconstruct_messages([*first, AIMessage(content="Sunny.", id="a2")], mem)
    out = reconstruct_messages([*first, AIMessage(content="Sunny.", id="a2"), HumanMessage(content="What was the wind speed in Lyon?", id="h2")], mem)
    recalled = [m for m in out if (m.id or "").startswith("meve-t1")]
    assert recalled and isinstance(recalled[0], AIMessage) and recalled[0].content == "Tool result: Lyon: sunny, 24 C, wind 5 km/h"
    off = _plain_memory(minilm, l_max=300)
    reconstruct_messages(first, off, tools=False)
    assert [t.id for t in off.turns()] == ["q"]
    with pytest.raises(ValueError, match="store_tool_results"):
        MomentaryContextMiddleware(off, store_tool_results="yes")


def test_continue_in_a_real_agent_gets_the_reply_it_follows(minilm):
    # Issue 64: "Continue" reads as no follow-up to a list of phrasings; the reply it follows is
    # longer than l_max, so 0.2.0 neither kept it first nor had room for it whole. Now the latest
    # exchange is kept first and the reply is cut to its end, where a continuation picks up.
    import time

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from meve.retrieval.chroma import chroma_client

    story = "Chapter one. The keeper Ivo lit the lamp at dusk. " + "Ships passed the northern reef all night. " * 12 + "At dawn a stranger knocked."
    replies = [AIMessage(content=f"Noted, fact {i}.") for i in range(6)] + [AIMessage(content=story), AIMessage(content="Chapter two ...")]
    mem = MomentaryMemory("continue", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(l_max=60))
    model = FakeToolChatModel(messages=iter(replies))
    model.seen = []
    agent = create_agent(model=model, tools=[], middleware=[MomentaryContextMiddleware(mem)], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    for i in range(6):
        agent.invoke({"messages": [HumanMessage(content=f"Remember fact {i}: my locker number is {100 + i}.")]}, cfg)
    agent.invoke({"messages": [HumanMessage(content="Write the first chapter of a story about a lighthouse keeper.")]}, cfg)
    agent.invoke({"messages": [HumanMessage(content="Continue")]}, cfg)
    last = model.seen[-1]
    assert last[-1].content == "Continue"
    recalled = [m for m in last if (m.id or "").startswith("meve-")]
    assert any(m.content.startswith("… ") and m.content.endswith("At dawn a stranger knocked. […]") for m in recalled)
    assert sum(mem.token_counter.count(m.content) for m in recalled) <= 60
