"""LlamaIndex adapters with real objects: VectorStoreIndex on Chroma, MiniLM through LlamaIndex's
embedding interface, real query and chat engines. The LLM is LlamaIndex's MockLLM (a mock: no LLM runs offline)."""

from __future__ import annotations

import asyncio
import copy
import time

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode

from llamaindex_meve import (
    MeVeEmbedding,
    MeVePostprocessor,
    MeVeRetriever,
    MomentaryChatMemory,
    MomentaryMemoryBlock,
    NoveltySelector,
    RedundancyFilter,
    RelevanceVerifier,
    TokenBudget,
)
from meve import ConfigError, InputError, MemoryConfig, MeVeConfig
from meve import MomentaryMemory as CoreMemory
from meve.cli.commands import demo_corpus
from meve.retrieval.chroma import chroma_client
from meve.scoring.cosine import CosineScorer
from tests.fakes import run_while_ticking

pytestmark = pytest.mark.integration
PASSAGES = demo_corpus()["passages"]


def test_llamaindex_meve_public_api():
    import llamaindex_meve

    assert sorted(llamaindex_meve.__all__) == sorted(
        [
            "MeVeEmbedding",
            "MeVePostprocessor",
            "MeVeRetriever",
            "MomentaryChatMemory",
            "MomentaryMemoryBlock",
            "NoveltySelector",
            "RedundancyFilter",
            "RelevanceVerifier",
            "TokenBudget",
        ]
    )


@pytest.fixture(scope="module")
def chroma_index(minilm, tmp_path_factory):
    from llama_index.vector_stores.chroma import ChromaVectorStore

    client = chroma_client(str(tmp_path_factory.mktemp("li-chroma")))
    store = ChromaVectorStore(chroma_collection=client.get_or_create_collection("bikes"))
    nodes = [TextNode(text=p["text"], id_=p["id"], metadata={"title": p["title"]}) for p in PASSAGES]
    return VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=MeVeEmbedding(minilm))


def _nodes(index, query, k=10):
    return index.as_retriever(similarity_top_k=k).retrieve(query)


def test_each_postprocessor_alone_without_mutating_inputs(chroma_index, minilm):
    q = "How do pneumatic tyres make cycling more comfortable?"
    nodes = _nodes(chroma_index, q)
    snapshot = copy.deepcopy([(n.node.node_id, dict(n.node.metadata), n.score) for n in nodes])
    scorer = CosineScorer(minilm)
    verified = RelevanceVerifier(tau=0.5, min_keep=3, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    assert verified[0].node.node_id == "dunlop" and verified[0].node.metadata["meve_source"] == "verified"
    strict = RelevanceVerifier(tau=0.999, min_keep=2, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    assert len(strict) == 2 and all(n.node.metadata["meve_source"] == "padded" and "min_keep=2" in n.node.metadata["meve_note"] for n in strict)
    assert "meve_note" not in strict[0].node.get_content(metadata_mode="llm")
    dedup = RedundancyFilter(theta=0.85, embedder=minilm).postprocess_nodes(nodes, query_str=q)
    ids = [n.node.node_id for n in dedup]
    assert "dunlop" in ids and "dunlop-dup" not in ids
    novel = NoveltySelector(embedder=minilm).postprocess_nodes(nodes, query_str=q)
    assert len({n.node.node_id for n in novel}) == len(novel) <= len(nodes)
    budget = TokenBudget(t_max=60).postprocess_nodes(nodes, query_str=q)
    assert sum(n.node.metadata["meve_tokens"] for n in budget) <= 60
    allp = MeVePostprocessor(t_max=80, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    assert allp[0].node.node_id == "dunlop" and sum(n.node.metadata["meve_tokens"] for n in allp) <= 80
    assert [(n.node.node_id, dict(n.node.metadata), n.score) for n in nodes] == snapshot


def test_postprocessors_work_with_the_offline_defaults():
    nodes = [NodeWithScore(node=TextNode(text=p["text"]), score=0.5) for p in PASSAGES[:6]]
    for pp in (RelevanceVerifier(), RedundancyFilter(), NoveltySelector(), TokenBudget(), MeVePostprocessor()):
        out = pp.postprocess_nodes(nodes, query_str="Who built the draisine?")
        assert out and all(isinstance(n, NodeWithScore) for n in out)


def test_relevance_verifier_keeps_the_node_for_the_other_half_of_the_question(chroma_index, minilm):
    q = "Which came first, the penny-farthing or the Tour de France?"
    nodes = _nodes(chroma_index, q)
    scorer = CosineScorer(minilm)
    plain = RelevanceVerifier(tau=0.23, coverage=0.0, min_keep=0, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    covered = RelevanceVerifier(tau=0.23, coverage=0.2, min_keep=0, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    verified = {n.node.node_id for n in plain}
    added = [n for n in covered if n.node.metadata["meve_source"] == "covered"]
    assert verified and {n.node.node_id for n in covered} - verified == {n.node.node_id for n in added} != set()
    assert all(n.node.metadata["meve_note"].startswith("kept for query coverage: adds ") for n in added)
    assert {"penny-farthing", "tour"} <= {n.node.node_id for n in covered}
    # A floor at tau leaves coverage nothing to add: every node it added scored below tau.
    floored = RelevanceVerifier(tau=0.23, coverage=0.2, coverage_floor=0.23, min_keep=0, embedder=minilm, scorer=scorer).postprocess_nodes(nodes, query_str=q)
    assert {n.node.node_id for n in floored} == verified


def test_query_engine_with_meve_postprocessor_and_async(chroma_index, minilm):
    pp = MeVePostprocessor(t_max=100, embedder=minilm, scorer=CosineScorer(minilm))
    engine = chroma_index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=10, node_postprocessors=[pp])
    resp = engine.query("What does the derailleur do on a bicycle?")
    assert resp.source_nodes[0].node.node_id == "derailleur"
    assert sum(n.node.metadata["meve_tokens"] for n in resp.source_nodes) <= 100
    out = asyncio.run(pp.apostprocess_nodes(_nodes(chroma_index, "derailleur"), query_str="derailleur"))
    assert out[0].node.node_id.startswith("derailleur")


def test_meve_retriever_over_a_chroma_vector_store_index(chroma_index, minilm):
    r = MeVeRetriever(chroma_index, config=MeVeConfig(k_init=8, t_max=120), scorer=CosineScorer(minilm))
    got = r.retrieve("How do pneumatic tyres make cycling more comfortable?")
    ids = [n.node.node_id for n in got]
    assert ids[0] == "dunlop" and "dunlop-dup" not in ids
    assert r.last_result is not None and r.last_result.token_count <= 120
    # Each node is counted as the LLM is sent it: "title: ..." and its text.
    sent = [n.node.get_content(metadata_mode="llm") for n in got]
    assert all(t.startswith("title: ") for t in sent) and [n.node.metadata["meve_tokens"] for n in got] == [r.core.token_counter.count(t) for t in sent]
    fb = MeVeRetriever(chroma_index, config=MeVeConfig(k_init=2, tau=0.95, fallback_tau=0.0), scorer=CosineScorer(minilm)).retrieve("Campagnolo")
    assert "derailleur-history" in [n.node.node_id for n in fb if n.node.metadata["meve_source"] == "fallback"]

    res, ticks = asyncio.run(run_while_ticking(r.aretrieve("What does the derailleur do?")))
    assert res[0].node.node_id == "derailleur" and ticks > 0


class _CountingEmbedder:
    """The real MiniLM, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.texts = inner, inner.name, []

    def encode(self, texts):
        self.texts.extend(texts)
        return self.inner.encode(texts)


def test_meve_retriever_runs_the_core_pipeline_in_the_index_space_and_reads_the_indexs_vectors(minilm):
    counting = _CountingEmbedder(minilm)
    nodes = [TextNode(text=p["text"], id_=p["id"], metadata={"title": p["title"]}) for p in PASSAGES]
    index = VectorStoreIndex(nodes, embed_model=MeVeEmbedding(counting))
    r = MeVeRetriever(index, config=MeVeConfig(k_init=6, t_max=200, fallback=False), scorer=CosineScorer(minilm))
    query = "Who developed the pneumatic tyre?"
    counting.texts.clear()
    first = r.retrieve(query)
    # Either of the two Dunlop passages (near-duplicates, one dropped for the other); which one ranks
    # first moved when the verifier began scoring the text the LLM is sent ("title: ..." included).
    assert first[0].node.node_id.startswith("dunlop") and first[0].node.metadata["title"] == "Pneumatic tyre"  # the index's node, metadata kept
    retrieve = r.last_result.phase("retrieve")
    assert retrieve.info["store_size"] == len(PASSAGES) and len(retrieve.kept) == 6  # MeVe's own candidate path over the index
    # The query goes through the index's model; the candidates' vectors are the ones the index's
    # SimpleVectorStore keeps (issue 49: no model pass per hit beside the verifier's).
    assert counting.texts == [query]
    assert r.core.store.vectors_read == 6 and r.core.store.vectors_embedded == 0
    counting.texts.clear()
    again = r.retrieve(query)
    assert counting.texts == [query]
    assert [n.node.node_id for n in again] == [n.node.node_id for n in first]
    with pytest.raises(InputError, match="core="):
        MeVeRetriever()


def _memory(minilm, **cfg):
    core = CoreMemory("li", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(**cfg))
    return MomentaryChatMemory(core)


def _rendered(messages):
    return "\n".join(f"{m.role.value}: {m.content}" for m in messages)


def test_chat_memory_get_put_set_reset_and_system_messages(minilm):
    mem = _memory(minilm, top_k=2, l_max=40, dates=False)
    mem.put(ChatMessage(role=MessageRole.SYSTEM, content="You are a cycling assistant."))
    for i in range(20):
        mem.put(ChatMessage(role=MessageRole.USER, content=f"Filler remark {i} about trains and weather."))
        mem.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Reply {i}."))
    mem.put(ChatMessage(role=MessageRole.USER, content="My bike is a green Brompton."))
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="Nice folding bike."))
    mem.put(ChatMessage(role=MessageRole.USER, content="What colour is my bike?"))
    got = mem.get()  # no input: the latest user message is the query (as agents call aget())
    assert got[0].role == MessageRole.SYSTEM
    assert got[-1].content == "What colour is my bike?"
    assert any(m.content == "My bike is a green Brompton." for m in got)
    # meve's chat policy: system messages pass through first, outside l_max; the recalled turns and
    # the current turn are rendered within it.
    assert got[1].role != MessageRole.SYSTEM and mem.core.token_counter.count(_rendered(got[1:])) <= 40
    assert len(mem.get_all()) == 44
    mem.set([ChatMessage(role=MessageRole.USER, content="fresh start")])
    assert [m.content for m in mem.get_all()] == ["fresh start"]
    asyncio.run(mem.areset())
    assert mem.get_all() == []


def test_chat_memory_keeps_tool_exchanges_whole(minilm):
    mem = _memory(minilm, top_k=1, l_max=30)
    for i in range(5):
        mem.put(ChatMessage(role=MessageRole.USER, content=f"old {i}"))
    mem.put(ChatMessage(role=MessageRole.USER, content="add 2 and 2"))
    call = ChatMessage(role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": "{}"}}]})
    result = ChatMessage(role=MessageRole.TOOL, content="4", additional_kwargs={"tool_call_id": "c1"})
    mem.put(call)
    mem.put(result)
    got = mem.get()
    assert got[-2:] == [call, result] and got[-3].content == "add 2 and 2" and got[-3].role == MessageRole.USER


def test_chat_memory_after_an_empty_user_message_recalls_and_stores_no_reply_alone(minilm):
    # Issue 78 #12, as the block was fixed: a user message with no text (an image alone) gave the
    # model no memory, and its reply was stored as an assistant turn with no question before it.
    mem = _memory(minilm, l_max=200, dates=False)
    for i in range(6):
        mem.put(ChatMessage(role=MessageRole.USER, content=f"Fact {i}: my bike is a green Brompton number {i}."))
        mem.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted fact {i}."))
    empty = ChatMessage(role=MessageRole.USER, content="")
    mem.put(empty)
    sent = mem.get()  # no input, as agents call aget(); a chat engine passes the message's text, ""
    assert sent == mem.get("") and sent[-1] is empty
    assert any("green Brompton" in (m.content or "") for m in sent[:-1])  # rebuilt for the latest user message with text
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="You sent an empty message; your bike is a green Brompton."))
    mem.put(ChatMessage(role=MessageRole.USER, content="Thanks. Will it rain in Oslo tomorrow?"))
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="Light rain after two."))
    stored = [(t.role, t.text) for t in mem.core.turns()]
    assert not any(t.startswith("You sent") for _, t in stored)  # the reply to the empty message is not stored alone
    assert [r for r, _ in stored] == ["user", "assistant"] * 7  # every reply follows its question


def test_chat_engine_over_a_long_conversation(minilm):
    from llama_index.core.chat_engine import SimpleChatEngine

    mem = _memory(minilm, top_k=3, l_max=80)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=5), memory=mem)
    for i in range(30):
        engine.chat(f"message {i}: {'my sister Ana lives in Porto' if i == 4 else 'small talk about the weather'}")
    resp = engine.chat("Where does my sister live?")
    assert resp.response
    sent = mem.get("Where does my sister live?")
    # The current exchange (the question and its reply) comes last, verbatim, outside l_max; what
    # memory rebuilt before it is within l_max and holds the fact.
    history, current = sent[:-2], sent[-2:]
    assert [m.content for m in current] == ["Where does my sister live?", resp.response]
    assert any("Porto" in (m.content or "") for m in history)
    assert mem.core.token_counter.count(_rendered(history)) <= 80


def test_memory_block_in_llamaindex_memory(minilm):
    from llama_index.core.memory import Memory

    core = CoreMemory("block", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(top_k=2, l_max=60))
    block = MomentaryMemoryBlock(memory=core, priority=0)
    memory = Memory.from_defaults(session_id="block", token_limit=200, chat_history_token_ratio=0.3, token_flush_size=50, memory_blocks=[block])
    for i in range(25):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"note {i}: {'my bike is a green Brompton' if i == 2 else 'weather chat'}"))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"ok {i}"))
    assert len(core) > 0  # flushed messages reached the block
    memory.put(ChatMessage(role=MessageRole.USER, content="What colour is my bike?"))
    msgs = memory.get()
    assert any("green Brompton" in (m.content or "") for m in msgs)


def _block_memory(minilm, name, l_max, ratio, tokenizer_fn=None, **kw):
    """A real llama_index Memory whose one long-term block is MomentaryMemoryBlock over a new session."""
    from llama_index.core.memory import Memory

    core = CoreMemory(name, client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(dates=False))
    block = MomentaryMemoryBlock(memory=core, l_max=l_max, priority=0, tokenizer_fn=tokenizer_fn)
    return core, Memory.from_defaults(session_id=name, memory_blocks=[block], chat_history_token_ratio=ratio, tokenizer_fn=tokenizer_fn, **kw)


@pytest.mark.parametrize(("l_max", "tokenizer_fn"), [(256, None), (512, None), (512, list)])
def test_memory_block_text_as_memory_sends_it_stays_within_l_max(minilm, l_max, tokenizer_fn):
    # Memory wraps the block's text in <memory> and <momentary_context> tags and counts with its own
    # tokenizer (cl100k_base, or the one given: here one token per character, as an app may count);
    # the block counted its bare text with meve's (o200k_base): 277 of 256, 538 of 512.
    _, memory = _block_memory(minilm, f"budget-{l_max}", l_max, 0.05, tokenizer_fn, token_limit=4000, token_flush_size=100)
    for i in range(80):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"Note {i}: my bike number {i} is a green Brompton with {i} gears and a basket, isn't it?"))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Okay {i}: green Brompton, {i} gears — noted; the basket's handy."))
    memory.put(ChatMessage(role=MessageRole.USER, content="What colour is my bike with the basket and gears?"))
    sent = memory.get()[0]
    assert sent.role == MessageRole.SYSTEM and "<momentary_context>" in (sent.content or "")
    assert l_max * 0.8 < len(memory.tokenizer_fn(sent.content)) <= l_max  # within l_max, and not left empty to get there


def test_memory_block_after_an_empty_user_message_recalls_and_stores_no_reply_alone(minilm):
    # The queue is kept to about one exchange, so when the empty message comes the questions before it
    # are in the block's store only.
    core, memory = _block_memory(minilm, "empty-user", 200, 0.01, token_limit=1100, token_flush_size=10)  # 11 > the flush size, as older LlamaIndex requires
    for i in range(10):
        memory.put(ChatMessage(role=MessageRole.USER, content=f"Fact {i}: my bike is a green Brompton number {i}."))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=f"Noted fact {i}."))
    memory.put(ChatMessage(role=MessageRole.USER, content=""))
    sent = memory.get()
    assert sent[-1].content == "" and "green Brompton" in (sent[0].content or "")  # rebuilt for the latest user message with text
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="You sent an empty message; your bike is a green Brompton."))
    memory.put(ChatMessage(role=MessageRole.USER, content="Thanks. Will it rain in Oslo tomorrow afternoon, do you think?"))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="Light rain after two."))
    memory.put(ChatMessage(role=MessageRole.USER, content="And in Bergen?"))
    memory.get()
    stored = [(t.role, t.text) for t in core.turns()]
    assert ("user", "Thanks. Will it rain in Oslo tomorrow afternoon, do you think?") in stored  # flushed past the empty exchange
    assert not any(t.startswith("You sent") for _, t in stored)  # the reply to the empty message is not stored alone
    # Every reply follows its question; the newest question's reply may still wait in the queue
    # (LlamaIndex before 0.14.9 can flush a user message without the reply after it).
    assert [r for r, _ in stored] == ["user", "assistant"] * (len(stored) // 2) + ["user"] * (len(stored) % 2)


def test_hierarchical_retrieval_through_llamaindex(minilm):
    from llama_index.core import Document as LIDocument

    docs = [LIDocument(text=p["text"], doc_id=p["id"], metadata={"title": p["title"]}) for p in PASSAGES]
    r = MeVeRetriever.from_documents(docs, embedder=minilm, scorer=CosineScorer(minilm), config=MeVeConfig(k_docs=3, t_max=200))
    got = r.retrieve("What does the derailleur do?")
    assert got[0].node.metadata["doc_id"].startswith("derailleur") and got[0].node.metadata["meve_source"] == "verified"
    assert r.last_result is not None and r.last_result.phase("retrieve").info["mode"] == "hierarchical"
    # A window's metadata (doc_id, title, offsets) stays on the node but is not sent: the budget counted its text.
    assert [n.node.get_content(metadata_mode="llm") for n in got] == [p.text for p in r.last_result.documents]


def test_chat_memory_recalls_a_turn_said_twice_and_can_keep_system_messages_outside(minilm):
    mem = _memory(minilm, l_max=60, dates=False)
    mem.put(ChatMessage(role=MessageRole.SYSTEM, content="Be brief."))
    mem.put(ChatMessage(role=MessageRole.USER, content="I like green tea."))
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="Noted."))
    for i in range(6):
        mem.put(ChatMessage(role=MessageRole.USER, content=f"Small talk {i} about trains."))
    mem.put(ChatMessage(role=MessageRole.USER, content="I like green tea."))  # the same words again, now the current message
    got = mem.get()
    assert [m.content for m in got].count("I like green tea.") == 2  # the earlier turn is recalled, not deduplicated by text
    assert got[-1].content == "I like green tea." and not got[-1].additional_kwargs  # no meve flag rides into the prompt
    assert got[0].role == MessageRole.SYSTEM and mem.core.token_counter.count(_rendered(got[1:])) <= 60
    outside = _memory(minilm, l_max=12)
    outside.put(ChatMessage(role=MessageRole.SYSTEM, content="A long system prompt that alone is longer than twelve tokens of budget."))
    outside.put(ChatMessage(role=MessageRole.USER, content="hello"))
    got = outside.get()
    assert got[0].role == MessageRole.SYSTEM and got[-1].content == "hello"


def test_postprocessor_prunes_sentences_without_touching_the_input_nodes(minilm):
    from llama_index.core.schema import NodeWithScore, TextNode

    text = "The Louvre is the world's most-visited museum. The Eiffel Tower was completed in March 1889. Bees pollinate many flowering plants."
    nodes = [NodeWithScore(node=TextNode(text=text, id_="n0"), score=0.5)]
    post = MeVePostprocessor(embedder=minilm, prune="scorer", prune_ratio=0.6, n_min=0)
    out = post.postprocess_nodes(nodes, query_str="When was the Eiffel Tower completed?")
    (got,) = out
    assert got.node.get_content() == "The Eiffel Tower was completed in March 1889."
    (span,) = got.node.metadata["meve_spans"]
    assert text[span[0] : span[1]] == got.node.get_content()
    assert "meve_spans" in got.node.excluded_llm_metadata_keys
    assert nodes[0].node.get_content() == text and "meve_spans" not in nodes[0].node.metadata


def test_token_budget_counts_the_joined_text_not_the_sum_of_its_parts():
    from llama_index.core.schema import NodeWithScore, TextNode

    from meve.core.tokens import CallableTokenCounter

    # A fake counter, named as one: words, plus 4 once a text holds two or more paragraph breaks,
    # so three 3-word passages sum to 9 but join to 13.
    def fake(text: str) -> int:
        return len(text.split()) + (4 if text.count("\n\n") >= 2 else 0)

    nodes = [NodeWithScore(node=TextNode(text=f"alpha beta {i}", id_=f"n{i}"), score=1.0) for i in range(3)]
    kept = TokenBudget(t_max=10, token_counter=CallableTokenCounter(fake, "fake-words")).postprocess_nodes(nodes, query_str="q")
    assert [n.node.node_id for n in kept] == ["n0", "n1"]
    assert fake("\n\n".join(n.node.get_content() for n in kept)) <= 10


def test_a_chat_engine_still_asks_its_llm_when_meve_keeps_nothing_and_stores_only_its_answer(chroma_index, minilm):
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.memory import ChatMemoryBuffer

    nothing = MeVeConfig(k_init=4, tau=1.0, n_min=0)  # no passage can pass: the context is empty
    llm = MockLLM(max_tokens=3)  # a mock LLM (none runs offline): it answers "text text text"
    for on_empty, expected in (("note", "text text text"), ("nothing", "Empty Response")):
        retriever = MeVeRetriever(chroma_index, config=nothing, scorer=CosineScorer(minilm), on_empty=on_empty)
        memory = ChatMemoryBuffer.from_defaults()
        engine = ContextChatEngine.from_defaults(retriever=retriever, llm=llm, memory=memory)
        answer = engine.chat("What is the capital of Australia?")
        assert str(answer) == expected  # "nothing" shows LlamaIndex's own behaviour: no LLM call
        assert retriever.last_result is not None and retriever.last_result.documents == ()
        if on_empty == "note":
            (node,) = answer.source_nodes
            assert node.node.metadata["meve_source"] == "empty" and "nothing relevant" in node.node.get_content()
            assert memory.get_all()[-1].content == expected  # the stored answer is the LLM's own
    with pytest.raises(ConfigError, match=r"on_empty=.maybe. is not allowed"):
        MeVeRetriever(chroma_index, on_empty="maybe")


def test_each_phase_is_an_instrumentation_event_tools_reading_the_dispatcher_see(chroma_index, minilm):
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    seen: list[tuple[str, int, str | None]] = []

    class Collect(BaseEventHandler):  # a handler as an observability tool would register it
        @classmethod
        def class_name(cls) -> str:
            return "Collect"

        def handle(self, event, **kwargs) -> None:
            if event.class_name() == "MeVePhaseEvent":
                seen.append((event.phase, len(event.kept), event.span_id))

    root = get_dispatcher()
    handler = Collect()
    root.add_event_handler(handler)
    try:
        MeVeRetriever(chroma_index, config=MeVeConfig(k_init=6), scorer=CosineScorer(minilm)).retrieve("Who built the draisine?")
        MeVePostprocessor(embedder=minilm, scorer=CosineScorer(minilm)).postprocess_nodes(_nodes(chroma_index, "tyres"), query_str="tyres")
    finally:
        root.event_handlers.remove(handler)
    phases = [p for p, _, _ in seen]
    assert phases == ["retrieve", "verify", "fallback", "prioritise", "prune", "budget", "verify", "fallback", "prioritise", "prune", "budget"]
    assert seen[0][1] == 6 and all(span is not None for _, _, span in seen)  # each event sits inside a span


def test_chat_memory_shows_each_system_message_once(minilm):
    alone = _memory(minilm, l_max=200)
    alone.put(ChatMessage(role=MessageRole.SYSTEM, content="Be brief."))
    assert [(m.role, m.content) for m in alone.get()] == [(MessageRole.SYSTEM, "Be brief.")]
    mem = _memory(minilm, l_max=200)
    for role, text in [("system", "Be brief."), ("system", "Answer in French."), ("user", "Bonjour"), ("system", "Answer in French.")]:
        mem.put(ChatMessage(role=role, content=text))
    got = mem.get()
    assert [m.content for m in got if m.role == MessageRole.SYSTEM] == ["Be brief.", "Answer in French."]
    assert got[-1].content == "Bonjour" and got[0].role == MessageRole.SYSTEM and got[1].role == MessageRole.SYSTEM


def test_gemini_and_cohere_replies_are_stored_and_recalled_as_the_assistant(minilm):
    mem = _memory(minilm, l_max=300, dates=False)
    mem.put(ChatMessage(role=MessageRole.USER, content="I keep bees in Ghent."))
    mem.put(ChatMessage(role=MessageRole.MODEL, content="Gemini: Ghent beekeeping sounds sweet."))
    mem.put(ChatMessage(role=MessageRole.USER, content="They make linden honey."))
    mem.put(ChatMessage(role=MessageRole.CHATBOT, content="Cohere: linden honey is pale."))
    mem.put(ChatMessage(role=MessageRole.USER, content="What do my bees make?"))
    assert [t.role for t in mem.core.turns()] == ["user", "assistant", "user", "assistant", "user"]
    recalled = {m.content: m.role for m in mem.get()[:-1]}
    assert recalled["Gemini: Ghent beekeeping sounds sweet."] == MessageRole.ASSISTANT
    assert recalled["Cohere: linden honey is pale."] == MessageRole.ASSISTANT
    core = CoreMemory("block-roles", client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}")
    block = MomentaryMemoryBlock(memory=core)
    asyncio.run(block.aput([ChatMessage(role=MessageRole.USER, content="hi"), ChatMessage(role=MessageRole.MODEL, content="Gemini: hello")]))
    assert [(t.role, t.text) for t in core.turns()] == [("user", "hi"), ("assistant", "Gemini: hello")]


def test_a_tool_call_block_with_text_stays_with_its_result_and_is_not_stored_alone(minilm):
    types = pytest.importorskip("llama_index.core.base.llms.types")
    if not hasattr(types, "ToolCallBlock"):
        pytest.skip("this llama-index-core has no ToolCallBlock (its tool calls travel in additional_kwargs, tested elsewhere)")
    TextBlock, ToolCallBlock = types.TextBlock, types.ToolCallBlock

    mem = _memory(minilm, l_max=300, dates=False)
    mem.put(ChatMessage(role=MessageRole.USER, content="Weather in Lyon?"))
    call = ChatMessage(role=MessageRole.ASSISTANT, blocks=[TextBlock(text="Let me look that up."), ToolCallBlock(tool_call_id="c1", tool_name="weather")])
    result = ChatMessage(role=MessageRole.TOOL, content="Sunny, 24 C", additional_kwargs={"tool_call_id": "c1"})
    mem.put(call)
    mem.put(result)
    assert mem.get()[-2:] == [call, result]
    assert [t.text for t in mem.core.turns()] == ["Weather in Lyon?", "Sunny, 24 C"]  # the result is kept; the call is never recalled without it
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="It is sunny in Lyon."))
    mem.put(ChatMessage(role=MessageRole.USER, content="Thanks! Any rain tomorrow in Lyon?"))
    assert "Let me look that up." not in [m.content for m in mem.get()]


def test_last_result_is_each_threads_and_each_tasks_own(chroma_index, minilm):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    r = MeVeRetriever(chroma_index, config=MeVeConfig(k_init=6, t_max=120), scorer=CosineScorer(minilm))
    queries = ["What does the derailleur do?", "Who built the draisine?"]
    both = threading.Barrier(2, timeout=60)

    def ask(query):
        r.retrieve(query)
        both.wait()  # both calls are done before either reads its result
        return r.last_result.query

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(ask, queries)) == queries

    async def two_tasks():
        done = asyncio.Barrier(2)

        async def aask(query):
            await r.aretrieve(query)
            await done.wait()
            return r.last_result.query

        return await asyncio.gather(*(aask(q) for q in queries))

    assert asyncio.run(two_tasks()) == queries
    assert r.last_result is None  # this thread retrieved nothing itself


def _with_paths(passages):
    # What a SimpleDirectoryReader gives each node: its file's path, which LlamaIndex's response
    # synthesizers send to the LLM with the text (MetadataMode.LLM).
    return [
        NodeWithScore(node=TextNode(text=p["text"], id_=p["id"], metadata={"file_path": f"/srv/library/bicycle-history/chapters/{p['id']}.txt"}), score=0.5)
        for p in passages
    ]


def test_the_budget_counts_each_node_as_the_llm_is_sent_it_metadata_included(minilm):
    # Issue 52 #2: t_max counted node.get_content(); the synthesizer sends get_content(MetadataMode.LLM),
    # so with t_max=60 meve counted 56 tokens while the LLM was sent 176.
    from llama_index.core.schema import MetadataMode

    from meve.core.tokens import get_token_counter

    counter = get_token_counter()
    nodes = _with_paths(PASSAGES[:8])
    q = "How do pneumatic tyres make cycling more comfortable?"
    for pp in (TokenBudget(t_max=120), MeVePostprocessor(t_max=120, tau=0.0, cut="none", embedder=minilm, scorer=CosineScorer(minilm))):
        out = pp.postprocess_nodes(nodes, query_str=q)
        sent = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in out]
        assert len(out) > 1 and all("file_path: /srv/library" in t for t in sent), sent
        assert counter.count("\n\n".join(sent)) <= 120  # the synthesizer's context_str for these nodes
        assert [n.node.metadata["meve_tokens"] for n in out] == [counter.count(t) for t in sent]


def test_a_pruned_node_is_sent_as_the_text_meve_scored_and_counted(minilm):
    from llama_index.core.schema import MetadataMode

    from meve.core.tokens import get_token_counter

    text = "The Louvre is the world's most-visited museum. The Eiffel Tower was completed in March 1889. Bees pollinate many flowering plants."
    node = TextNode(text=text, id_="n0", metadata={"file_path": "/srv/library/paris/landmarks.txt"})
    post = MeVePostprocessor(embedder=minilm, prune="scorer", prune_ratio=0.6, n_min=0)
    (got,) = post.postprocess_nodes([NodeWithScore(node=node, score=0.5)], query_str="When was the Eiffel Tower completed?")
    sent = got.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "The Eiffel Tower was completed in March 1889." in sent and "Louvre" not in sent
    assert sent.count("file_path") <= 1  # pruned out of the text meve saw, or kept once: never added back on top
    assert got.node.metadata["meve_tokens"] == get_token_counter().count(sent)
    assert got.node.metadata["file_path"] == "/srv/library/paris/landmarks.txt"  # still there for the application
    assert node.get_content() == text and node.excluded_llm_metadata_keys == []  # the input node is untouched


def test_meve_retriever_returns_the_new_text_of_a_node_inserted_again(minilm):
    # Issue 52 (read in code): the store wrapper and the retriever kept the first text and node seen under an id.
    nodes = [TextNode(text=p["text"], id_=p["id"]) for p in PASSAGES]
    index = VectorStoreIndex(nodes, embed_model=MeVeEmbedding(minilm))
    r = MeVeRetriever(index, config=MeVeConfig(k_init=6), scorer=CosineScorer(minilm))
    question = "Who developed the pneumatic tyre?"
    assert "dunlop" in [n.node.node_id for n in r.retrieve(question)]
    newer = "John Boyd Dunlop developed the first practical pneumatic tyre in 1888, for his son's tricycle in Belfast."
    index.insert_nodes([TextNode(text=newer, id_="dunlop")])  # the same id: the index replaces the node
    got = {n.node.node_id: n.node.get_content() for n in r.retrieve(question)}
    assert got["dunlop"] == newer


def test_the_default_pipeline_over_default_nodes_answers_from_a_real_multi_node_document(minilm):
    # Issue 63: SentenceSplitter's default nodes are ~1,024 tokens, MeVePostprocessor's t_max 512, and
    # every query got no passage. Now the most relevant node is cut to its best sentences within t_max.
    from pathlib import Path

    from llama_index.core import Document

    from meve.core.tokens import get_token_counter

    # A real document frozen for the test (docs/concepts/phases.md as of 0.2.0): the live page changes with the docs.
    page = Path(__file__).resolve().parents[1] / "data" / "long_document.txt"
    index = VectorStoreIndex.from_documents([Document(text=page.read_text(encoding="utf-8"))], embed_model=MeVeEmbedding(minilm))  # Settings' splitter
    counter = get_token_counter()
    sizes = [counter.count(n.get_content()) for n in index.docstore.docs.values()]
    assert len(sizes) >= 5 and max(sizes) > 900  # LlamaIndex's own default nodes, each far over t_max 512
    engine = index.as_query_engine(llm=MockLLM(max_tokens=3), node_postprocessors=[MeVePostprocessor()])  # a mock LLM: none runs offline
    for question, answer in (("How much faster are the int8 sentence vectors than float32?", "1.6x faster"), ("What error does bad input raise?", "MeVeError")):
        (node,) = engine.query(question).source_nodes
        text = node.node.get_content(metadata_mode="llm")
        assert node.node.metadata["meve_source"] == "verified" and node.node.metadata["meve_cut"] is True
        assert counter.count(text) <= 512 and answer in text
        assert "cut to its best excerpt to fit t_max" in (note := node.node.metadata["meve_note"]) and note not in text  # hidden from the LLM


def test_tool_and_function_results_are_stored_and_survive_a_restart(minilm, tmp_path):
    # Issue 64: a TOOL and a FUNCTION result in the current exchange were silently not stored.
    db = str(tmp_path / "db")
    mem = MomentaryChatMemory.from_defaults("agent-1", path=db, embedders=[minilm], l_max=400)
    mem.put(ChatMessage(role=MessageRole.USER, content="What is Ana's locker, and the gym's hours?"))
    call = ChatMessage(
        role=MessageRole.ASSISTANT, content="", additional_kwargs={"tool_calls": [{"id": "c1", "function": {"name": "locker", "arguments": "{}"}}]}
    )
    mem.put(call)
    mem.put(ChatMessage(role=MessageRole.TOOL, content="Ana's locker is number 417.", additional_kwargs={"tool_call_id": "c1"}))
    mem.put(ChatMessage(role=MessageRole.FUNCTION, content="The gym opens at 6 am.", additional_kwargs={"name": "hours"}))
    mem.put(ChatMessage(role=MessageRole.ASSISTANT, content="Locker 417; it opens at 6."))
    mem.core.close()
    again = MomentaryChatMemory.from_defaults("agent-1", path=db, embedders=[minilm], l_max=400)
    stored = [(m.role, m.content) for m in again.get_all()]
    assert (MessageRole.TOOL, "Ana's locker is number 417.") in stored and (MessageRole.TOOL, "The gym opens at 6 am.") in stored
    assert not any(m.content == "" for m in again.get_all())  # the call itself stays out: recalled alone it would lack its result
    again.put(ChatMessage(role=MessageRole.USER, content="Remind me of Ana's locker number?"))
    recalled = [m for m in again.get() if m.content.startswith("Tool result: ")]
    assert recalled and recalled[0].role == MessageRole.ASSISTANT and "417" in recalled[0].content
    off = MomentaryChatMemory.from_defaults("agent-2", path=db, embedders=[minilm], store_tool_results=False)
    off.put(ChatMessage(role=MessageRole.TOOL, content="not kept", additional_kwargs={"tool_call_id": "c9"}))
    assert off.get_all() == []


def test_token_budget_alone_cuts_a_node_too_long_for_it_to_its_opening_without_a_model():
    # Issue 78 #9: TokenBudget loaded the verifier (10.9 s) to cut a node, and chose the excerpt by its
    # similarity to a placeholder query when none was given.
    text = " ".join(f"Sentence {i} says something about chains and gears." for i in range(60))
    budget = TokenBudget(t_max=30)
    kept = budget.postprocess_nodes([NodeWithScore(node=TextNode(text=text), score=1.0)])
    assert len(kept) == 1 and text.startswith(kept[0].node.get_content()) and kept[0].node.get_content().startswith("Sentence 0 says")
    assert budget._models._scoring is None  # no scorer resolved, so no model loaded
