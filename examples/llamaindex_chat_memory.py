"""A LlamaIndex chat engine with meve's MomentaryChatMemory over a long conversation.

The LLM is LlamaIndex's MockLLM (a mock: no LLM runs offline); pass `main(llm=...)` to use a real one.
Prints how many tokens of history each call would carry with the full history vs. the rebuilt context.

    python examples/llamaindex_chat_memory.py [--turns 120]
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLM

from llamaindex_meve import MomentaryChatMemory
from meve import MemoryConfig


def main(turns: int = 120, llm: Any = None, db: str | None = None) -> tuple[int, int, list[str]]:
    if db is None:  # a throwaway memory, removed when the run ends
        with tempfile.TemporaryDirectory(prefix="meve-li-mem-") as tmp:
            return main(turns, llm, tmp)
    memory = MomentaryChatMemory.from_defaults("chat-demo", path=db, config=MemoryConfig(top_k=6, l_max=256))
    engine = SimpleChatEngine.from_defaults(llm=llm or MockLLM(max_tokens=8), memory=memory)
    facts = {7: "My sister Ana lives in Porto.", 40: "I'm allergic to peanuts.", 90: "My bike is a green Brompton."}
    for i in range(turns):
        engine.chat(facts.get(i, f"Turn {i}: some small talk about trains, weather and work."))
    question = "Where does my sister live, and what am I allergic to?"
    counter = memory.core.token_counter
    full = sum(counter.count(m.content or "") for m in memory.get_all())
    rebuilt = memory.get(question)
    sent = sum(counter.count(m.content or "") for m in rebuilt)
    print(f"full history: {full} tokens; rebuilt context: {sent} tokens")
    for m in rebuilt:
        print(f"  {m.role.value}: {m.content}")
    memory.core.close()
    return full, sent, [m.content or "" for m in rebuilt]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=120)
    main(parser.parse_args().turns)
