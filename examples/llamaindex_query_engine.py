"""VectorStoreIndex on Chroma + MeVePostprocessor in a query engine.

Offline: MiniLM through MeVeEmbedding, and LlamaIndex's MockLLM (a mock: no LLM runs offline).
Pass a real LlamaIndex LLM to `main(llm=...)` to use one.

    python examples/llamaindex_query_engine.py
"""

from __future__ import annotations

import tempfile
from typing import Any

import chromadb
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms.mock import MockLLM
from llama_index.core.schema import TextNode
from llama_index.vector_stores.chroma import ChromaVectorStore

from llamaindex_meve import MeVeEmbedding, MeVePostprocessor
from meve.cli.commands import demo_corpus


def main(llm: Any = None, db: str | None = None) -> Any:
    if db is None:  # a throwaway index, removed when the run ends
        with tempfile.TemporaryDirectory(prefix="meve-li-") as tmp:
            return main(llm, tmp)
    client = chromadb.PersistentClient(path=db)
    store = ChromaVectorStore(chroma_collection=client.get_or_create_collection("bikes"))
    nodes = [TextNode(text=p["text"], id_=p["id"], metadata={"title": p["title"]}) for p in demo_corpus()["passages"]]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=MeVeEmbedding())
    engine = index.as_query_engine(llm=llm or MockLLM(max_tokens=16), similarity_top_k=10, node_postprocessors=[MeVePostprocessor(t_max=128)])
    question = "How do pneumatic tyres make cycling more comfortable?"
    response = engine.query(question)
    used = [(n.node.node_id, n.node.metadata["meve_tokens"]) for n in response.source_nodes]
    print(f"{question}\nMeVe kept {len(used)} of 10 retrieved nodes ({sum(t for _, t in used)} tokens): {[i for i, _ in used]}")
    print("answer (MockLLM unless you passed an llm):", str(response)[:120])
    return response


if __name__ == "__main__":
    main()
