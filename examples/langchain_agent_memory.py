"""A LangChain 1.x agent (`create_agent`) with MomentaryContextMiddleware over a 200-turn conversation.

Prints how many tokens of history the model saw per call against the full history. The chat
model is a FAKE (no LLM runs offline) that records what it was sent; set MEVE_CHAT_MODEL to use a real one.

    python examples/langchain_agent_memory.py [--turns 200] [--db ./agent_memdb]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_meve import MomentaryContextMiddleware
from meve import MemoryConfig, get_token_counter


class RecordingFakeChatModel(GenericFakeChatModel):
    """FAKE chat model: scripted replies; remembers the messages of each call."""

    calls: list = []  # noqa: RUF012 - reset per instance in main()

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def main(turns: int = 200, db: str | None = None) -> list[tuple[int, int]]:
    if db is None:  # a throwaway memory, removed when the run ends
        with tempfile.TemporaryDirectory(prefix="meve-agent-") as tmp:
            return main(turns, tmp)
    counter = get_token_counter()
    if os.environ.get("MEVE_CHAT_MODEL"):
        from langchain.chat_models import init_chat_model

        model = init_chat_model(os.environ["MEVE_CHAT_MODEL"])
    else:
        model = RecordingFakeChatModel(messages=iter(AIMessage(content=f"(fake) reply {i}") for i in range(turns + 1)))
        model.calls = []
    middleware = MomentaryContextMiddleware(path=db, config=MemoryConfig(top_k=6, l_max=256))
    agent = create_agent(model=model, tools=[], middleware=[middleware], system_prompt="You are a helpful assistant.", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo-user"}}
    topics = ["my bike", "the Lyon marathon", "my sister Ana in Porto", "peanut allergy", "the garden", "work at the hospital"]
    seen: list[tuple[int, int]] = []
    state = None
    for i in range(turns):
        text = f"Turn {i}: a few words about {topics[i % len(topics)]}, detail number {i}."
        state = agent.invoke({"messages": [HumanMessage(content=text)]}, config)
        full = sum(counter.count(str(m.content)) for m in state["messages"][:-1])
        sent = sum(counter.count(str(m.content)) for m in model.calls[-1]) if hasattr(model, "calls") and model.calls else full
        seen.append((sent, full))
        if (i + 1) % 50 == 0 or i == turns - 1:
            print(f"call {i + 1:>4}: model saw {sent:>5} tokens of conversation; full history {full:>6} tokens")
    middleware.close()
    return seen


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--db")
    args = parser.parse_args()
    main(args.turns, args.db)
