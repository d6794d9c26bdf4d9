"""meve: a small, verified, token-budgeted context for RAG and chat memory.

The framework-free core. Adapters live in ``langchain_meve`` and ``llamaindex_meve``.
"""

from meve.config import MemoryConfig, MeVeConfig
from meve.cross_encoder import MeveCrossEncoder
from meve.errors import ConfigError, InputError, MeVeError, StoreError
from meve.memory import MemoryContext, MomentaryMemory, Turn
from meve.models import (
    BiEncoderScorer,
    CachedEmbedder,
    CrossEncoderScorer,
    Embedder,
    RelevanceScorer,
    SentenceTransformerEmbedder,
    default_embedder,
    default_scorer,
    make_scorer,
)
from meve.pipeline import MeVe
from meve.records import ContextResult, Dropped, Passage, PhaseRecord
from meve.tokens import TokenCounter, get_token_counter
from meve.verifier import LateInteractionScorer

__version__ = "0.1.0"

__all__ = [
    "BiEncoderScorer",
    "CachedEmbedder",
    "ConfigError",
    "ContextResult",
    "CrossEncoderScorer",
    "Dropped",
    "Embedder",
    "InputError",
    "LateInteractionScorer",
    "MeVe",
    "MeVeConfig",
    "MeVeError",
    "MemoryConfig",
    "MemoryContext",
    "MeveCrossEncoder",
    "MomentaryMemory",
    "Passage",
    "PhaseRecord",
    "RelevanceScorer",
    "SentenceTransformerEmbedder",
    "StoreError",
    "TokenCounter",
    "Turn",
    "default_embedder",
    "default_scorer",
    "get_token_counter",
    "make_scorer",
]
