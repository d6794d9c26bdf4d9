"""LlamaIndex adapters for meve: node postprocessors, a retriever, chat memory and an embedding model."""

from llamaindex_meve.embeddings import MeVeEmbedding
from llamaindex_meve.memory import MomentaryChatMemory, MomentaryMemoryBlock
from llamaindex_meve.postprocessors import MeVePostprocessor, NoveltySelector, RedundancyFilter, RelevanceVerifier, TokenBudget
from llamaindex_meve.retriever import MeVeRetriever

__all__ = [
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
