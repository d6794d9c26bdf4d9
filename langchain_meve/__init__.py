"""LangChain adapters for meve: a retriever, a document compressor, agent middleware and offline embeddings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError('langchain_meve needs LangChain: pip install -e ".[langchain]" (langchain-core; the agent middleware also needs langchain)') from exc

from langchain_meve.compressor import MeVeCompressor
from langchain_meve.embeddings import MeVeEmbeddings
from langchain_meve.retriever import MeVeRetriever

if TYPE_CHECKING:
    from langchain_meve.middleware import MomentaryContextMiddleware, reconstruct_messages

__all__ = ["MeVeCompressor", "MeVeEmbeddings", "MeVeRetriever", "MomentaryContextMiddleware", "reconstruct_messages"]


def __getattr__(name: str) -> Any:
    # The middleware subclasses langchain.agents' AgentMiddleware, whose import alone takes about
    # 0.5 s (measured); retriever-only users should not pay it.
    if name in ("MomentaryContextMiddleware", "reconstruct_messages"):
        from langchain_meve import middleware

        return getattr(middleware, name)
    raise AttributeError(f"module 'langchain_meve' has no attribute {name!r}")
