"""Neighbours of a split answer (issue 77 #2) through both frameworks, with real components: chunks
cut by LangChain's RecursiveCharacterTextSplitter (``add_start_index=True``) and LlamaIndex's
SentenceSplitter (its PREVIOUS/NEXT relationships), MiniLM and meve's default verifier.

The issue's case: the chunk holding an answer's start scores high, the one holding its end low, and
the verifier's ratio cut drops it, so the context held half the answer."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from langchain_meve import MeVeCompressor
from langchain_meve import MeVeRetriever as LCRetriever
from llamaindex_meve import MeVeEmbedding, MeVePostprocessor
from llamaindex_meve import MeVeRetriever as LIRetriever
from meve import get_token_counter

pytestmark = pytest.mark.integration
COUNTER = get_token_counter()
QUESTION = "What did the great storm of 1893 destroy?"
BEFORE = (
    "The harbour town sits at the mouth of a slow river. Fishing boats leave before dawn and return by noon. "
    "Tourists come in summer for the cliffs and the seabirds. The town hall was rebuilt in brick after a fire. "
    "A ferry crosses to the island twice a day. "
)
AFTER = (
    " Both were rebuilt within a decade with money from the county. Today the pier holds a small museum of shipwrecks. "
    "The market moved inland to a covered hall. Local schools teach the storm as part of their history lessons."
)
ANSWER = "The lighthouse keeper's logbook records that the great storm of 1893 destroyed the northern pier and the old fish market beside the harbour."
TEXT = BEFORE + ANSWER + AFTER


@pytest.fixture(scope="module")
def chunks() -> list[Document]:
    """Two chunks of one source, overlapping by 40 characters, the answer sentence split between them."""
    cut = RecursiveCharacterTextSplitter(chunk_size=360, chunk_overlap=40, add_start_index=True).create_documents([TEXT], metadatas=[{"source": "harbour.txt"}])
    assert len(cut) == 2 and not any(ANSWER in d.page_content for d in cut)
    assert cut[1].metadata["start_index"] < cut[0].metadata["start_index"] + len(cut[0].page_content)  # they overlap
    return [d.model_copy(update={"id": f"harbour#{i}"}) for i, d in enumerate(cut)]


def _overlap(chunks: list[Document]) -> str:
    a, b = chunks
    return TEXT[b.metadata["start_index"] : a.metadata["start_index"] + len(a.page_content)]


def test_langchain_chunks_join_as_one_document_holding_the_split_answer_once(minilm, chunks):
    before = MeVeCompressor(embedder=minilm, neighbours=False).compress_documents(chunks, QUESTION)
    assert [d.id for d in before] == ["harbour#0"] and ANSWER not in before[0].page_content  # as 0.6.0: the answer's end was cut
    compressor = MeVeCompressor(embedder=minilm)  # the default joins
    (doc,) = compressor.compress_documents(chunks, QUESTION)
    whole = TEXT[: chunks[1].metadata["start_index"] + len(chunks[1].page_content)]
    assert doc.page_content == whole and ANSWER in doc.page_content and doc.page_content.count(_overlap(chunks)) == 1
    assert doc.id == "harbour#0" and doc.metadata["meve_joined"] == ["harbour#0", "harbour#1"] and doc.metadata["source"] == "harbour.txt"
    assert doc.metadata["meve_tokens"] == COUNTER.count(whole) and "joined with its neighbours" in doc.metadata["meve_note"]
    result = compressor.run(chunks, QUESTION)
    assert result.token_count == COUNTER.count(result.context) == COUNTER.count(whole)
    budget = result.phase("budget")
    (made,) = budget.info["neighbours"]["joined"]["0"]
    assert made["neighbour"] == "1" and made["side"] == "next" and made["shared_chars"] == len(_overlap(chunks))
    assert budget.tokens_out == COUNTER.count(whole)


def test_a_join_that_would_break_t_max_is_not_made_and_the_trace_says_so(minilm, chunks):
    t_max = COUNTER.count(chunks[0].page_content) + 5
    compressor = MeVeCompressor(embedder=minilm, neighbours=True, t_max=t_max)
    result = compressor.run(chunks, QUESTION)
    assert [p.text for p in result.documents] == [chunks[0].page_content] and result.token_count <= t_max
    (why,) = result.phase("budget").info["neighbours"]["not_joined"]
    assert why["neighbour"] == "1" and why["reason"].startswith("needs ") and why["reason"].endswith(f"5 left in t_max {t_max}")


def test_a_chunk_of_another_source_is_never_joined(minilm, chunks):
    elsewhere = [chunks[0], chunks[1].model_copy(update={"metadata": {**chunks[1].metadata, "source": "another.txt"}})]
    result = MeVeCompressor(embedder=minilm, neighbours=True).run(elsewhere, QUESTION)
    assert [p.text for p in result.documents] == [chunks[0].page_content]
    assert result.phase("budget").info["neighbours"] == {"joined": {}, "not_joined": []}  # at the same offsets, but never linked


def test_the_langchain_retriever_joins_chunks_it_stored_with_their_metadata(minilm, chunks):
    texts, metas, ids = [d.page_content for d in chunks], [d.metadata for d in chunks], [d.id for d in chunks]
    retriever = LCRetriever.from_texts(texts, metadatas=metas, ids=ids, embedder=minilm, neighbours=True)
    (doc,) = retriever.invoke(QUESTION)
    assert ANSWER in doc.page_content and doc.page_content.count(_overlap(chunks)) == 1 and doc.metadata["meve_joined"] == ids
    assert ANSWER not in retriever.invoke(QUESTION, neighbours=False)[0].page_content


# SentenceSplitter keeps sentences whole, so an answer of two sentences is what it splits; at 40
# tokens without overlap the boundary falls between them.
TWO = "The great storm of 1893 struck the harbour on a night in October. It destroyed the northern pier and the old fish market."
LI_TEXT = BEFORE + TWO + AFTER


def _index(minilm, text: str, size: int, overlap: int) -> VectorStoreIndex:
    doc = LIDocument(text=text, metadata={"file_path": "/docs/harbour.txt"})
    nodes = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=lambda t: range(COUNTER.count(t))).get_nodes_from_documents([doc])
    return VectorStoreIndex(nodes, embed_model=MeVeEmbedding(minilm))


def _llm(nodes) -> str:
    return "\n\n".join(n.node.get_content(metadata_mode="llm") for n in nodes)


def test_llamaindex_fetches_the_next_node_from_the_docstore_when_it_is_no_candidate(minilm):
    index = _index(minilm, LI_TEXT, 40, 0)
    assert not any(TWO in n.get_content() for n in index.docstore.docs.values())
    one = {"k_init": 1, "candidates": "dense"}  # the node with the answer's start is the only candidate
    assert TWO not in _llm(LIRetriever(index, neighbours=False, **one).retrieve(QUESTION))
    retriever = LIRetriever(index, neighbours=True, **one)
    (node,) = retriever.retrieve(QUESTION)
    first = retriever.last_result.documents[0].joined
    assert TWO in node.node.get_content(metadata_mode="llm") and node.node.metadata["meve_joined"] == list(first or ())
    assert [index.docstore.get_node(i).get_content() in node.node.get_content() for i in node.node.metadata["meve_joined"]] == [True, True]
    assert node.node.get_content(metadata_mode="llm").count("file_path: /docs/harbour.txt") == 1  # one header, its own metadata hidden


def test_llamaindex_postprocessor_joins_among_the_nodes_it_is_given(minilm):
    index = _index(minilm, LI_TEXT, 40, 0)
    hits = index.as_retriever(similarity_top_k=10).retrieve(QUESTION)
    assert TWO not in _llm(MeVePostprocessor(embedder=minilm, neighbours=False).postprocess_nodes(hits, query_str=QUESTION))
    (node,) = MeVePostprocessor(embedder=minilm, neighbours=True).postprocess_nodes(hits, query_str=QUESTION)
    parts = node.node.metadata["meve_joined"]
    assert TWO in _llm([node]) and len(parts) == 2 and set(parts) <= {h.node.node_id for h in hits}


def test_llamaindex_overlapping_nodes_both_kept_become_one_with_their_overlap_once(minilm):
    # At 48 tokens with 20 of overlap the storm's sentence ends one node and opens the next, which adds the damage.
    first = TWO.split(". ")[0] + "."
    index = _index(minilm, LI_TEXT, 48, 20)
    assert _llm(LIRetriever(index, neighbours=False).retrieve(QUESTION)).count(first) == 2
    retriever = LIRetriever(index, neighbours=True)
    got = retriever.retrieve(QUESTION)
    assert _llm(got).count(first) == 1 and TWO in _llm(got)
    made = [j for joins in retriever.last_result.phase("budget").info["neighbours"]["joined"].values() for j in joins]
    assert [j["kept"] for j in made] == [True] and made[0]["tokens_added"] < 0  # the overlap and a separator fewer
