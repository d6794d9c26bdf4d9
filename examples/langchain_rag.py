"""LCEL chain: MeVeRetriever → prompt → model.

Runs offline with a FAKE chat model (langchain-core's GenericFakeChatModel, named as a fake:
no LLM runs offline). Set MEVE_CHAT_MODEL to a model string that `langchain.chat_models.init_chat_model`
understands (e.g. "openai:gpt-4o-mini") to use a real one.

    python examples/langchain_rag.py
"""

from __future__ import annotations

import os

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from langchain_meve import MeVeRetriever
from meve.cli.commands import demo_corpus


def chat_model():
    name = os.environ.get("MEVE_CHAT_MODEL")
    if name:
        from langchain.chat_models import init_chat_model

        return init_chat_model(name)
    return GenericFakeChatModel(messages=iter([AIMessage(content="(fake model) John Boyd Dunlop's air-filled tyre absorbs road shocks.")] * 10))


def main() -> str:
    passages = demo_corpus()["passages"]
    retriever = MeVeRetriever.from_texts([p["text"] for p in passages], ids=[p["id"] for p in passages], k=4)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer only from the context.\n\nContext:\n{context}"), ("human", "{question}")])
    chain = (
        {"context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)), "question": RunnablePassthrough()}
        | prompt
        | chat_model()
        | StrOutputParser()
    )
    question = "How do pneumatic tyres make cycling more comfortable?"
    docs = retriever.invoke(question, t_max=128)
    print(f"MeVe context: {len(docs)} documents, {sum(d.metadata['meve_tokens'] for d in docs)} tokens: {[d.id for d in docs]}")
    answer = chain.invoke(question)
    print("answer:", answer)
    return answer


if __name__ == "__main__":
    main()
