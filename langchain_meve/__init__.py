"""LangChain adapters for meve: a retriever, a document compressor and agent middleware."""

from langchain_meve.compressor import MeVeCompressor
from langchain_meve.middleware import MomentaryContextMiddleware, reconstruct_messages
from langchain_meve.retriever import MeVeRetriever

__all__ = ["MeVeCompressor", "MeVeRetriever", "MomentaryContextMiddleware", "reconstruct_messages"]
