"""meve: a small, verified, token-budgeted context for RAG and chat memory.

The framework-free core; the adapters (``langchain_meve``, ``llamaindex_meve``) reach it only
through this module and :mod:`meve.integration`. The house (docs/architecture.md):
``core`` (records, config, errors, tokens) ← ``scoring`` / ``retrieval`` ← ``mindref`` ←
``pipeline`` (phases, runner, MeVe); ``memory`` beside the pipeline; ``cli`` on top.
"""

from meve.core.config import MemoryConfig, MeVeConfig
from meve.core.errors import ConfigError, InputError, MeVeError, StoreError
from meve.core.records import ContextResult, Passage, PhaseRecord
from meve.core.tokens import TokenCounter, get_token_counter
from meve.memory.memory import MomentaryMemory
from meve.memory.records import MemoryContext, Turn
from meve.pipeline.meve import MeVe
from meve.scoring.cross_encoder import CrossEncoderScorer
from meve.scoring.embedders import SentenceTransformerEmbedder
from meve.scoring.late_interaction import LateInteractionScorer
from meve.scoring.protocols import Embedder, Scorer

__version__ = "0.7.0"

__all__ = [
    "ConfigError",
    "ContextResult",
    "CrossEncoderScorer",
    "Embedder",
    "InputError",
    "LateInteractionScorer",
    "MeVe",
    "MeVeConfig",
    "MeVeError",
    "MemoryConfig",
    "MemoryContext",
    "MomentaryMemory",
    "Passage",
    "PhaseRecord",
    "Scorer",
    "SentenceTransformerEmbedder",
    "StoreError",
    "TokenCounter",
    "Turn",
    "get_token_counter",
]
