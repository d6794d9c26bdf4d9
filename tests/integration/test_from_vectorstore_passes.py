"""``MeVeRetriever.from_vectorstore`` runs one model pass per hit text (issue 49): a hit's vector is
the one the user's store keeps, read rather than made again; the verifier's token vectors are the
only pass. Real MiniLM, LangChain's real InMemoryVectorStore and langchain-chroma's Chroma."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_meve import MeVeRetriever
from meve import LateInteractionScorer, MeVeConfig
from meve.cli.commands import demo_corpus

pytestmark = pytest.mark.integration

DOCS = [Document(page_content=p["text"], id=p["id"]) for p in demo_corpus()["passages"]]
#: Unverified and a low redundancy threshold: every candidate's order and keep/drop rests on its
#: vector (cosine to the query, cosine to the others), so a wrong vector shows.
BY_VECTORS = MeVeConfig(k_init=10, candidates="dense", verify=False, theta_redundancy=0.8, t_max=4000)
#: question -> what the retriever returned before it read the store's vectors (the code before this
#: change, run on this data): with the defaults, and with BY_VECTORS (kept in order, then dropped as near-duplicates).
QUESTIONS = {
    "How do pneumatic tyres make cycling more comfortable?": (
        ["dunlop"],
        ["dunlop", "tyre-pressure", "velocipede", "penny-farthing", "brakes", "safety-bicycle", "draisine-2", "hub-gear"],
        ["dunlop-dup", "draisine-1"],
    ),
    "Who built the first two-wheeled running machine?": (
        ["draisine-1", "draisine-2"],
        ["draisine-1", "safety-bicycle", "velocipede", "penny-farthing", "draisine-3", "dunlop-dup", "derailleur-history", "frame"],
        ["draisine-2", "dunlop"],
    ),
    "How do you change gear on a bicycle?": (
        ["hub-gear", "derailleur"],
        ["hub-gear", "derailleur", "derailleur-history", "penny-farthing", "draisine-3", "safety-bicycle", "velocipede", "draisine-1", "frame"],
        ["draisine-2"],
    ),
    "Campagnolo": (
        ["derailleur-history"],
        ["derailleur-history", "sourdough", "chess", "brakes", "volcano", "velocipede", "draisine-1", "frame", "derailleur"],
        ["draisine-2"],
    ),
}


class CountingEmbeddings(Embeddings):
    """The user's LangChain Embeddings (real MiniLM), counting each text it embeds."""

    def __init__(self, minilm: Any) -> None:
        self.model = minilm.inner  # past meve's text cache: every call here runs the model
        self.documents: Counter[str] = Counter()
        self.queries: Counter[str] = Counter()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.update(texts)
        return self.model.encode(texts).tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        self.queries[text] += 1
        return self.model.encode([text])[0].tolist()  # type: ignore[no-any-return]


class OpaqueStore:
    """A STAND-IN for a store meve cannot read vectors from (most LangChain integrations): the
    real InMemoryVectorStore behind only the methods ``from_vectorstore`` calls."""

    def __init__(self, inner: InMemoryVectorStore) -> None:
        self.inner = inner
        self.embeddings = inner.embeddings

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        return self.inner.similarity_search_by_vector(embedding, k, **kwargs)

    def add_documents(self, documents: list[Document], ids: list[str] | None = None) -> list[str]:
        return self.inner.add_documents(documents, ids=ids)


@pytest.fixture()
def store(minilm):
    s = InMemoryVectorStore(CountingEmbeddings(minilm))
    s.add_documents(DOCS)
    s.embeddings.documents.clear()  # what adding embedded is the store's own work, not a query's
    return s


def _run(vectorstore: Any, question: str, minilm: Any, config: MeVeConfig | None = None) -> tuple[Any, LateInteractionScorer]:
    scorer = LateInteractionScorer(minilm)  # fresh: nothing cached from another run
    retriever = MeVeRetriever.from_vectorstore(vectorstore, DOCS, scorer=scorer, config=config)
    return retriever.meve.run(question), scorer


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_stores_vectors_select_the_same_passages_in_the_same_order_as_embedding_the_hits_again(store, minilm, question):
    default, kept, dropped = QUESTIONS[question]
    read, embedded = _run(store, question, minilm)[0], _run(OpaqueStore(store), question, minilm)[0]
    assert [d.id for d in read.documents] == default == [d.id for d in embedded.documents]
    assert read.phase("verify").scores == embedded.phase("verify").scores
    # The same float32 cosines, bit for bit, here: the store kept what embed_documents made, and
    # MiniLM gave each text the same vector in the batch it was added in as in the hits' batch.
    assert read.phase("retrieve").scores == embedded.phase("retrieve").scores
    read, embedded = _run(store, question, minilm, BY_VECTORS)[0], _run(OpaqueStore(store), question, minilm, BY_VECTORS)[0]
    assert [d.id for d in read.documents] == kept == [d.id for d in embedded.documents]
    assert [d.id for d in read.phase("prioritise").dropped] == dropped
    assert read.phase("prioritise").dropped == embedded.phase("prioritise").dropped  # the same cosines


def test_each_hit_text_goes_through_a_model_once_the_verifiers_pass(store, minilm):
    question = "How do pneumatic tyres make cycling more comfortable?"
    result, scorer = _run(store, question, minilm, MeVeConfig(k_init=len(DOCS)))
    candidates = {d.page_content for d in DOCS}
    assert len(result.phase("verify").scores) == len(candidates)  # every text was a verified candidate
    # The store's model ran only for the query (the kNN needs its space); no hit went through it.
    assert store.embeddings.queries == Counter({question: 1}) and not store.embeddings.documents
    assert scorer.encoded_at_query_time == len(candidates)  # the verifier's pass: each text once
    assert scorer.cache_info()["encoded_at_query_time"] == len(candidates)


def test_a_store_that_gives_no_vectors_is_embedded_again_and_the_log_says_so(store, minilm, caplog):
    opaque = OpaqueStore(store)
    with caplog.at_level(logging.DEBUG, logger="meve"):
        result, scorer = _run(opaque, "Who built the first two-wheeled running machine?", minilm, MeVeConfig(k_init=len(DOCS)))
    hits = len(result.phase("verify").scores)
    assert sum(store.embeddings.documents.values()) == hits and scorer.encoded_at_query_time == hits  # two passes: as before
    assert f"0 passage vectors read from the vector store, {hits} embedded with CountingEmbeddings" in caplog.text


def test_a_langchain_chroma_store_gives_its_vectors_too(minilm, chroma_dir):
    from langchain_chroma import Chroma

    embeddings = CountingEmbeddings(minilm)
    chroma = Chroma(collection_name="one-pass", embedding_function=embeddings, persist_directory=chroma_dir)
    chroma.add_documents(DOCS, ids=[d.id for d in DOCS])
    embeddings.documents.clear()
    question = "How do pneumatic tyres make cycling more comfortable?"
    result, scorer = _run(chroma, question, minilm, MeVeConfig(k_init=len(DOCS)))
    assert [d.id for d in result.documents] == QUESTIONS[question][0]
    assert not embeddings.documents and scorer.encoded_at_query_time == len(result.phase("verify").scores)
