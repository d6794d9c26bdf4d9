"""MeVe's phases as LlamaIndex instrumentation events, so tools that read LlamaIndex's dispatcher
(its event handlers, tracing integrations) show what each phase kept, dropped and why."""

from __future__ import annotations

from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import Field

from meve import ContextResult, PhaseRecord

dispatcher = get_dispatcher("llamaindex_meve")

ON_EMPTY = ("note", "nothing")


class MeVePhaseEvent(BaseEvent):
    """One MeVe phase ended: its name, the ids it kept, what it dropped and why, tokens in and out,
    milliseconds and the phase's facts (a meve ``PhaseRecord``)."""

    phase: str
    kept: list[str]
    dropped: list[dict[str, Any]]
    tokens_in: int | None = None
    tokens_out: int | None = None
    ms: float = 0.0
    info: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "MeVePhaseEvent"


def emit(record: PhaseRecord) -> None:
    """Send one phase's record to LlamaIndex's dispatcher."""
    data = record.to_dict()
    dispatcher.event(MeVePhaseEvent(**{k: data[k] for k in ("phase", "kept", "dropped", "tokens_in", "tokens_out", "ms", "info")}))


def check_on_empty(value: Any) -> str:
    """``on_empty`` as the adapters take it (see :func:`empty_nodes`)."""
    from meve import ConfigError

    if value not in ON_EMPTY:
        raise ConfigError("on_empty", value, "'nothing' (no node: LlamaIndex's own empty response) or 'note' (one node saying why nothing was kept)")
    return str(value)


def empty_nodes(result: ContextResult, on_empty: str) -> list[NodeWithScore]:
    """What to hand LlamaIndex when MeVe kept nothing: with ``"nothing"`` (the default) no node,
    so its response synthesizers answer "Empty Response" without calling the LLM, as with any
    retriever that finds nothing; with ``"note"`` (opt-in) one node saying why (the budget phase's
    reason, ``meve_source="empty"``), so the LLM is asked and a chat engine stores its answer."""
    if result.documents or on_empty == "nothing":
        return []
    reason = result.phase("budget").info.get("empty", "nothing was kept")
    node = TextNode(text=f"meve kept no passage for this question: {reason}.", id_="meve-empty", metadata={"meve_source": "empty"})
    node.excluded_llm_metadata_keys = ["meve_source"]
    return [NodeWithScore(node=node, score=0.0)]
