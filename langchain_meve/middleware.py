"""Momentary Contexts for LangChain 1.x agents (``langchain.agents.create_agent``)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage

from meve import ConfigError, MemoryConfig, MomentaryMemory

try:  # the middleware needs `langchain` 1.x (extra "langchain"); reconstruct_messages does not
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
except ImportError:  # pragma: no cover
    AgentMiddleware = object  # type: ignore[assignment,misc]
    ModelRequest = ModelResponse = Any  # type: ignore[assignment,misc]

_ROLE = {"human": "user", "ai": "assistant"}


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content).strip()


def _current_exchange_start(messages: Sequence[BaseMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return len(messages)


def stable_id(role: str, position: int, text: str) -> str:
    """The id of a message that has none: a content hash of role, position in the thread and text,
    the same in every process and after every restart (``hash()`` is salted per process)."""
    digest = hashlib.sha256(f"{role}\x00{position}\x00{text}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"msg-{digest[:24]}"


def record_messages(messages: Sequence[BaseMessage], memory: MomentaryMemory) -> None:
    """Store user and AI turns that have text (message ids, or stable content ids, make this idempotent)."""
    items = []
    for i, m in enumerate(messages):
        role = _ROLE.get(m.type)
        text = _text(m)
        if role is None or not text.strip():
            continue
        items.append({"text": text, "role": role, "turn_id": m.id or stable_id(role, i, text)})
    if items:
        memory.add_many(items)


def reconstruct_messages(
    messages: Sequence[AnyMessage],
    memory: MomentaryMemory,
    *,
    l_max: int | None = None,
    top_k: int | None = None,
    record: bool = True,
) -> list[AnyMessage]:
    """The messages a model should see: reconstructed memory, then the current exchange.

    The current exchange (the latest user message and everything after it: AI tool
    calls and their ToolMessages) is kept whole and in order, so a tool call is never
    separated from its result. Older history is replaced by the turns memory picks
    for the latest user message (as plain user/assistant messages), within ``l_max``
    tokens. System messages are kept first. Usable from LangGraph or hand-written loops.
    """
    if record:
        record_messages(messages, memory)
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    start = _current_exchange_start(rest)
    current = rest[start:]
    if not current:
        return list(messages)
    query = _text(current[0])
    if not query.strip():
        return [*system, *current]  # a user message with no text (e.g. only an image): nothing to rebuild for
    ctx = memory.reconstruct(query, l_max=l_max, top_k=top_k)
    position = {id(m): i for i, m in enumerate(messages)}  # the positions record_messages hashed
    current_ids = {m.id or stable_id(_ROLE.get(m.type, m.type), position[id(m)], _text(m)) for m in current}
    recalled: list[AnyMessage] = []
    for turn in ctx.turns:
        if turn.id in current_ids:
            continue
        cls = HumanMessage if turn.role == "user" else AIMessage
        recalled.append(cls(content=ctx.content_of(turn), id=f"meve-{turn.id}", additional_kwargs={"meve_recalled": True}))
    return [*system, *recalled, *current]


class MomentaryContextMiddleware(AgentMiddleware):  # type: ignore[misc]
    """Gives the model ``system prompt + reconstructed memory + the new message`` on every call.

    The agent's checkpointed history is left untouched (``request.override``); every
    user and AI turn is recorded in a :class:`meve.MomentaryMemory` keyed by the
    agent's ``thread_id`` (or ``session_id``). Pass ``memory=`` to use one memory for
    every thread, or ``path=``/``client=`` to open one per thread.
    """

    def __init__(
        self,
        memory: MomentaryMemory | None = None,
        *,
        session_id: str | None = None,
        path: str | None = None,
        client: Any = None,
        config: MemoryConfig | None = None,
        embedders: Sequence[Any] | None = None,
        l_max: int | None = None,
        top_k: int | None = None,
        max_sessions: int = 1024,
    ) -> None:
        super().__init__()
        if memory is not None and not isinstance(memory, MomentaryMemory):
            raise ConfigError("memory", memory, "a meve.MomentaryMemory (or None to open one per thread with path=/client=)")
        if memory is not None and (path is not None or client is not None):
            raise ConfigError("path/client", path if path is not None else client, "nothing when memory= is given: the memory already has its store")
        MemoryConfig(l_max=l_max if l_max is not None else 1, top_k=top_k if top_k is not None else 0)  # validates both, naming the bad value
        self._fixed = memory
        self._session_id = session_id
        self._open = {"path": path, "client": client, "config": config, "embedders": embedders}
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise ConfigError("max_sessions", max_sessions, "an int >= 1 (memories kept open; the least recently used is closed first)")
        self._memories: OrderedDict[str, MomentaryMemory] = OrderedDict()
        self._lock = threading.Lock()
        self.max_sessions = max_sessions
        self.l_max = l_max
        self.top_k = top_k

    def memory_for(self, session: str) -> MomentaryMemory:
        """The memory of one session; at most ``max_sessions`` stay open (least recently used evicted).
        Everything is in Chroma, so an evicted session is simply reopened on its next call."""
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            mem = self._memories.get(session)
            if mem is not None:
                self._memories.move_to_end(session)
                return mem
        opened = MomentaryMemory(session, **self._open)  # opened outside the lock: it reads Chroma
        with self._lock:
            mem = self._memories.setdefault(session, opened)
            self._memories.move_to_end(session)
            while len(self._memories) > self.max_sessions:
                self._memories.popitem(last=False)
            return mem

    def _session(self) -> str:
        if self._session_id is not None:
            return self._session_id
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # called outside a LangGraph run: there is no config to read
            config = {}
        thread = (config.get("configurable") or {}).get("thread_id")
        if thread is None:
            raise ConfigError(
                "thread_id",
                None,
                "a thread_id in the run config ({'configurable': {'thread_id': ...}}), or session_id=/memory= on the middleware: "
                "meve never puts different users into one shared default session",
            )
        return str(thread)

    def _messages(self, request: ModelRequest) -> list[AnyMessage]:
        return reconstruct_messages(request.messages, self.memory_for(self._session()), l_max=self.l_max, top_k=self.top_k)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request.override(messages=self._messages(request)))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        messages = await asyncio.to_thread(self._messages, request)
        return await handler(request.override(messages=messages))


__all__ = ["MomentaryContextMiddleware", "reconstruct_messages", "record_messages"]
