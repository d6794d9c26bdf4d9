"""LoCoMo: evidence-turn recall of the rebuilt context vs. budget, MomentaryMemory against baselines.

For each question, memory holds every turn of its conversation in session-date order (LoCoMo's
questions are asked after the last session). Recall = share of the question's evidence turns
(dia_ids) present in the context. Category 5 (adversarial) items carry `adversarial_answer`
instead of `answer`; only evidence ids are used here, so they are scored like the others.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import embedder
from meve import MemoryConfig, MomentaryMemory, get_token_counter
from meve.store import chroma_client

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


def _recall(evidence: list[str], included: set[str]) -> float:
    return sum(e in included for e in evidence) / len(evidence)


def run(data: Path, conversations: int | None = None, questions: int | None = None) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage, trim_messages

    emb = embedder()
    counter = get_token_counter()
    samples = load(data)[:conversations]
    systems = ("momentary_weighted", "momentary_rrf", "dense_only", "bm25_only", "last_n_tokens", "langchain_trim_messages", "llamaindex_vector_memory")
    scores: dict[str, dict[int, list[float]]] = {s: {b: [] for b in BUDGETS} for s in systems}
    tokens: dict[str, dict[int, list[int]]] = {s: {b: [] for b in BUDGETS} for s in systems}
    per_cat: dict[str, dict[int, list[float]]] = {s: {c: [] for c in CATEGORIES} for s in ("momentary_weighted", "last_n_tokens", "dense_only")}
    t_start = time.perf_counter()
    for sample in samples:
        turns = turns_of(sample)
        by_text = {t["text"]: t["id"] for t in turns}
        mem = MomentaryMemory(
            f"locomo-{sample['sample_id']}",
            client=chroma_client(),
            embedders=[emb],
            collection_prefix=f"lc{time.time_ns()}",
            config=MemoryConfig(recent_turns=1),
        )
        mem.add_many([{"text": t["text"], "role": "user", "turn_id": t["id"], "timestamp": t["timestamp"]} for t in turns])
        emb.save()
        lengths = [counter.count(t["text"]) for t in turns]
        lc_messages = [HumanMessage(content=t["text"], id=t["id"]) for t in turns]
        li_memories = {
            b: llamaindex_vector_memory([t["text"] for t in turns], top_k=max(2, b // 128), budget=b, session=f"li-{sample['sample_id']}-{b}") for b in BUDGETS
        }
        emb.save()
        asked = [q for q in sample["qa"] if q.get("evidence")][:questions]
        for q in asked:
            ev = [e for e in q["evidence"] if e in mem._index]
            if not ev:
                continue
            for b in BUDGETS:
                top_k = max(4, b // 16)
                variants = {
                    "momentary_weighted": mem.reconstruct(q["question"], l_max=b, top_k=top_k, fusion="weighted"),
                    "momentary_rrf": mem.reconstruct(q["question"], l_max=b, top_k=top_k, fusion="rrf"),
                    "dense_only": mem.reconstruct(q["question"], l_max=b, top_k=top_k, weights={"bm25": 0.0, "dense": 1.0}),
                    "bm25_only": mem.reconstruct(q["question"], l_max=b, top_k=top_k, weights={"bm25": 1.0, "dense": 0.0}),
                }
                for name, ctx in variants.items():
                    inc = {t.id for t in ctx.turns}
                    scores[name][b].append(_recall(ev, inc))
                    tokens[name][b].append(ctx.token_count)
                used, inc = 0, set()
                for t, n in zip(reversed(turns), reversed(lengths), strict=True):
                    if used + n > b:
                        break
                    used += n
                    inc.add(t["id"])
                scores["last_n_tokens"][b].append(_recall(ev, inc))
                tokens["last_n_tokens"][b].append(used)
                trimmed = trim_messages(lc_messages, max_tokens=b, strategy="last", token_counter=lambda ms: sum(counter.count(str(m.content)) for m in ms))
                scores["langchain_trim_messages"][b].append(_recall(ev, {m.id for m in trimmed}))
                tokens["langchain_trim_messages"][b].append(sum(counter.count(str(m.content)) for m in trimmed))
                got = li_memories[b].get(input=q["question"])
                blob = "\n".join(str(m.content) for m in got)
                scores["llamaindex_vector_memory"][b].append(_recall(ev, {i for text, i in by_text.items() if text in blob}))
                tokens["llamaindex_vector_memory"][b].append(counter.count(blob))
                if b == 512:
                    cat = int(q["category"])
                    per_cat["momentary_weighted"][cat].append(scores["momentary_weighted"][b][-1])
                    per_cat["last_n_tokens"][cat].append(scores["last_n_tokens"][b][-1])
                    per_cat["dense_only"][cat].append(scores["dense_only"][b][-1])
        print(f"locomo {sample['sample_id']}: {len(turns)} turns, {len(asked)} questions, {time.perf_counter() - t_start:.0f}s", flush=True)
    table = {
        s: {str(b): {"recall": round(float(np.mean(v)), 4), "tokens": round(float(np.mean(tokens[s][b])), 1), "n": len(v)} for b, v in d.items()}
        for s, d in scores.items()
    }
    cats = {s: {CATEGORIES[c]: round(float(np.mean(v)), 4) if v else None for c, v in d.items()} for s, d in per_cat.items()}
    return {"dataset": f"LoCoMo, {len(samples)} conversations", "table": table, "per_category_at_512": cats, "seconds": round(time.perf_counter() - t_start, 1)}
