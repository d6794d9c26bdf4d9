"""The LangChain middleware and the history a real agent graph hands it (issue 78 #8 and #11): a
history sent again on every call, and messages deleted from a thread's state. Real MiniLM, Chroma,
LangChain agents and LangGraph checkpointers; the only fake is the chat model, named as such."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from langchain_meve import MomentaryContextMiddleware
from meve import MemoryConfig, MomentaryMemory

pytestmark = pytest.mark.integration


class FakeChatModel(GenericFakeChatModel):
    """A FAKE chat model (no LLM runs offline): replies from a script, records what it saw."""

    seen: list = []  # noqa: RUF012 - reset per test

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _model(n: int) -> FakeChatModel:
    model = FakeChatModel(messages=iter([AIMessage(content=f"Reply {i}.") for i in range(n)]))
    model.seen = []
    return model


def _plain_memory(minilm, name: str = "lc") -> MomentaryMemory:
    import time

    from meve.retrieval.chroma import chroma_client

    return MomentaryMemory(name, client=chroma_client(), embedders=[minilm], collection_prefix=f"t{time.time_ns()}", config=MemoryConfig(l_max=300))


def test_a_history_sent_whole_on_each_call_without_a_checkpointer_is_stored_once(minilm, chroma_dir):
    # LangGraph gives each message without an id a new uuid as it enters the state: sent again, the
    # same history arrived under new ids each call, and 6 messages were stored as 12 turns.
    from langchain.agents import create_agent

    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm])
    agent = create_agent(_model(3), tools=[], middleware=[mw])
    cfg = {"configurable": {"thread_id": "resent"}}
    history: list[dict[str, str]] = []
    for question in ("I ride a green Brompton.", "My sister is called Ana.", "What colour is my bike?"):
        history.append({"role": "user", "content": question})
        state = agent.invoke({"messages": list(history)}, cfg)  # the app's own copy of the thread, no ids
        history.append({"role": "assistant", "content": state["messages"][-1].content})
    stored = mw.memory_for("resent").turns()
    assert sorted(t.text for t in stored) == sorted(m["content"] for m in history)  # 6 messages, 6 turns
    assert [t.role for t in stored] == ["user", "assistant"] * 3  # each in the order it was said
    mw.close()


def test_one_memory_given_to_the_middleware_needs_no_thread_id(minilm):
    from langchain.agents import create_agent

    mem = _plain_memory(minilm)
    model = _model(2)
    agent = create_agent(model, tools=[], middleware=[MomentaryContextMiddleware(memory=mem)])
    agent.invoke({"messages": [HumanMessage(content="I ride a green Brompton.")]})
    agent.invoke({"messages": [HumanMessage(content="I ride a green Brompton."), AIMessage(content="Reply 0."), HumanMessage(content="My bike?")]})
    assert [t.text for t in mem.turns()] == ["I ride a green Brompton.", "Reply 0.", "My bike?", "Reply 1."]
    assert len(model.seen) == 2


def test_an_empty_user_message_gets_memory_and_its_reply_is_not_stored_alone(minilm, chroma_dir):
    # Issue 78 #12, as LlamaIndex's block was fixed: a user message with no text (an image alone) gave
    # the model no memory, and the reply to it was stored as an assistant turn with no question before it.
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm])
    model = _model(4)
    agent = create_agent(model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "image"}}
    agent.invoke({"messages": [HumanMessage(content="I ride a green Brompton.")]}, cfg)
    agent.invoke({"messages": [HumanMessage(content="My sister is called Ana.")]}, cfg)
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    agent.invoke({"messages": [HumanMessage(content=[image])]}, cfg)
    seen = model.seen[-1]
    assert seen[-1].content == [image]
    assert any("green Brompton" in str(m.content) for m in seen[:-1])  # recalled for the latest user message with text
    agent.invoke({"messages": [HumanMessage(content="Will it rain in Oslo tomorrow?")]}, cfg)
    stored = mw.memory_for("image").turns()
    assert "Reply 2." not in [t.text for t in stored]  # the reply to the image alone is not stored
    assert [t.role for t in stored] == ["user", "assistant"] * 3  # every reply follows its question
    mw.close()


def _door_code_thread(mw: MomentaryContextMiddleware, n: int = 4):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    model = _model(n)
    agent = create_agent(model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "door"}}
    agent.invoke({"messages": [HumanMessage(content="The office door code is 7312.")]}, cfg)
    agent.invoke({"messages": [HumanMessage(content="I water the office plants on Fridays.")]}, cfg)
    return agent, model, cfg


def test_a_message_removed_from_the_state_is_no_longer_stored_nor_recalled(minilm, chroma_dir):
    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm], config=MemoryConfig(l_max=300))
    agent, model, cfg = _door_code_thread(mw)
    code = next(m for m in agent.get_state(cfg).values["messages"] if "7312" in m.content)
    assert code.id in {t.id for t in mw.memory_for("door").turns()}
    agent.update_state(cfg, {"messages": [RemoveMessage(id=code.id)]})  # the user deletes the message
    state = agent.invoke({"messages": [HumanMessage(content="What is the office door code?")]}, cfg)
    assert not any("7312" in str(m.content) for m in model.seen[-1])
    assert set(state) == {"messages"}  # the ids the middleware keeps in the state are private
    stored = [t.text for t in mw.memory_for("door").turns()]
    assert not any("7312" in t for t in stored) and "I water the office plants on Fridays." in stored
    mw.close()


def test_removing_all_messages_forgets_the_thread_unless_forget_removed_is_false(minilm, chroma_dir):
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    mw = MomentaryContextMiddleware(path=chroma_dir, embedders=[minilm], config=MemoryConfig(l_max=300))
    agent, model, cfg = _door_code_thread(mw)
    agent.invoke({"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(content="What is the office door code?")]}, cfg)
    assert not any("7312" in str(m.content) for m in model.seen[-1])
    assert [t.text for t in mw.memory_for("door").turns()] == ["What is the office door code?", "Reply 2."]
    mw.close()
    keep = MomentaryContextMiddleware(session_id="kept", path=chroma_dir, embedders=[minilm], forget_removed=False)
    agent, model, cfg = _door_code_thread(keep)
    agent.invoke({"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage(content="What is the office door code?")]}, cfg)
    assert any("7312" in str(m.content) for m in model.seen[-1])  # e.g. a summarising middleware's compaction
    keep.close()
