"""LlamaIndex adapters for meve: node postprocessors, a retriever, chat memory and an embedding model."""

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError('llamaindex_meve needs LlamaIndex: pip install -e ".[llamaindex]" (llama-index-core)') from exc

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
