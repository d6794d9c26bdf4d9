"""LoCoMo data for the chat-memory benchmark (``benchmarks.memory_tuning``): conversations as
turns in session-date order (LoCoMo's questions are asked after the last session), and the
LlamaIndex ``Memory`` + ``VectorMemoryBlock`` baseline."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchmarks.harness.common import embedder
from meve import get_token_counter
from meve.retrieval.chroma import chroma_client

# Category names as used by the LoCoMo evaluation code and follow-up work (the file has numbers only).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
BUDGETS = (256, 512, 1024, 2048)


def load(data: Path) -> list[dict[str, Any]]:
    return json.loads((data / "locomo" / "locomo10.json").read_text())


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    conv = sample["conversation"]
    out = []
    n = 1
    while f"session_{n}" in conv:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
        for i, t in enumerate(conv[f"session_{n}"]):
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [shares an image: {t['blip_caption']}]"
            out.append({"id": t["dia_id"], "text": text, "role": "user", "timestamp": when + timedelta(seconds=30 * i)})
        n += 1
    out.sort(key=lambda t: t["timestamp"])
    return out


def llamaindex_vector_memory(texts: list[str], *, top_k: int, budget: int, session: str) -> Any:
    """LlamaIndex ``Memory`` + ``VectorMemoryBlock`` (Chroma, meve's cached MiniLM) holding ``texts``
    as user messages, with ``budget`` as its token limit: the LlamaIndex baseline of both benchmarks."""
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.memory import Memory
    from llama_index.core.memory.memory_blocks import VectorMemoryBlock
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from llamaindex_meve import MeVeEmbedding

    counter = get_token_counter()
    store = ChromaVectorStore(chroma_collection=chroma_client().create_collection(f"li{time.time_ns()}"))
    block = VectorMemoryBlock(vector_store=store, embed_model=MeVeEmbedding(embedder()), similarity_top_k=top_k)
    li = Memory.from_defaults(
        session_id=session,
        token_limit=budget,
        chat_history_token_ratio=0.5,
        token_flush_size=max(32, budget // 4),
        memory_blocks=[block],
        tokenizer_fn=counter.encode,  # type: ignore[attr-defined]
    )
    asyncio.run(li.aput_messages([ChatMessage(role=MessageRole.USER, content=t) for t in texts]))
    return li
