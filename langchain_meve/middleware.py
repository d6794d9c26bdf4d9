"""Momentary Contexts for LangChain 1.x agents (``langchain.agents.create_agent``)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, NotRequired

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage

from meve import ConfigError, MemoryConfig, MomentaryMemory
from meve.integration import Message, chat_context, chat_role, delete_removed, record_messages

try:  # the middleware needs `langchain` 1.x (extra "langchain"); reconstruct_messages does not
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import PrivateStateAttr
except ImportError:  # pragma: no cover
    AgentMiddleware = object  # type: ignore[assignment,misc]
    AgentState = dict  # type: ignore[assignment,misc]
    ModelRequest = ModelResponse = PrivateStateAttr = Any  # type: ignore[assignment,misc]

_CALL_BLOCKS = ("tool_use", "tool_call", "tool_call_chunk", "function_call")
_STORED = "meve_stored_ids"


class _MeveState(AgentState):  # type: ignore[misc]
    """The agent's state plus the ids of its messages the middleware stored under their own id.
    Kept in the state, so it lives exactly as long as the messages do (checkpointed with them):
    one listed there and gone from the state's messages was removed (``RemoveMessage``)."""

    meve_stored_ids: NotRequired[Annotated[list[str], PrivateStateAttr]]


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content).strip()


def _role_name(m: BaseMessage) -> str:
    # A ChatMessage carries its provider's role ("model", "chatbot", ...); the others their type,
    # chunks included ("AIMessageChunk" is an AI message still in a state, e.g. after streaming).
    role = getattr(m, "role", None)
    return role if isinstance(role, str) else m.type.removesuffix("MessageChunk")


def _calls_tools(m: BaseMessage) -> bool:
    blocks = m.content if isinstance(m.content, list) else []
    fields = ("tool_calls", "invalid_tool_calls", "tool_call_chunks")
    return (
        any(getattr(m, f, None) for f in fields)
        or any(m.additional_kwargs.get(k) for k in ("tool_calls", "function_call"))
        or any(isinstance(b, dict) and b.get("type") in _CALL_BLOCKS for b in blocks)
    )


def _field(state: Any, name: str) -> Any:
    return state.get(name) if isinstance(state, dict) else getattr(state, name, None)


def _message(m: BaseMessage) -> Message:
    name = _role_name(m)
    return Message(chat_role(name) or name, _text(m), m.id, _calls_tools(m))


def reconstruct_messages(
    messages: Sequence[AnyMessage],
    memory: MomentaryMemory,
    *,
    l_max: int | None = None,
    top_k: int | None = None,
    record: bool = True,
    tools: bool = True,
) -> list[AnyMessage]:
    """The messages a model should see (:func:`meve.integration.chat_context`): system messages
    first, outside ``l_max``; then the turns memory recalls for the latest user message, as plain
    user/assistant messages (ids ``meve-<turn id>``; a recalled tool result is an AI message
    "Tool result: ..."), within ``l_max`` tokens; then the current exchange (the latest user
    message and everything after it, AI tool calls and their ToolMessages included) verbatim and
    in order. ``record`` stores the messages first: user and AI turns, and tool results unless
    ``tools`` is False. Usable from LangGraph or hand-written loops."""
    plain = [_message(m) for m in messages]
    wanted = chat_context(plain, memory, l_max=l_max, top_k=top_k, record=record, tools=tools)
    originals = {id(p): m for p, m in zip(plain, messages, strict=True)}
    out: list[AnyMessage] = []
    for m in wanted:
        if id(m) in originals:
            out.append(originals[id(m)])
        else:
            out.append((HumanMessage if m.role == "user" else AIMessage)(content=m.text, id=m.id))
    return out


class MomentaryContextMiddleware(AgentMiddleware):  # type: ignore[misc]
    """Gives the model ``system prompt + reconstructed memory + the new message`` on every call.

    The agent's checkpointed history is left untouched (``request.override``); every user and AI
    turn, and every tool result unless ``store_tool_results=False``, is recorded in a
    :class:`meve.MomentaryMemory` keyed by the agent's ``thread_id`` (or ``session_id``): before
    each model call, and after it (``after_model``), so a thread's last reply is stored when the
    model returns it, not only at the thread's next call. Pass ``memory=`` to use one memory for
    every thread (a run then needs no thread_id), or ``path=``/``client=`` to open one per thread
    (at most ``max_sessions`` stay open; the least recently used is closed once no model call is
    using it, and reopened from Chroma when it returns). A message the thread's state drops
    (``RemoveMessage``) is deleted from the memory too, unless ``forget_removed=False``.
    """

    state_schema = _MeveState

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
        store_tool_results: bool = True,
        forget_removed: bool = True,
    ) -> None:
        if AgentMiddleware is object:
            raise ImportError('MomentaryContextMiddleware needs LangChain\'s agents: pip install -e ".[langchain-agents]" (langchain >= 1.0)')
        super().__init__()
        if memory is not None and not isinstance(memory, MomentaryMemory):
            raise ConfigError("memory", memory, "a meve.MomentaryMemory (or None to open one per thread with path=/client=)")
        if memory is not None and (path is not None or client is not None):
            raise ConfigError("path/client", path if path is not None else client, "nothing when memory= is given: the memory already has its store")
        MemoryConfig(l_max=l_max if l_max is not None else 1, top_k=top_k if top_k is not None else 0)  # validates both, naming the bad value
        if not isinstance(max_sessions, int) or isinstance(max_sessions, bool) or max_sessions < 1:
            raise ConfigError("max_sessions", max_sessions, "an int >= 1 (memories kept open; the least recently used is closed first)")
        if not isinstance(store_tool_results, bool):
            raise ConfigError("store_tool_results", store_tool_results, "True (tool results are stored and recalled like turns) or False")
        if not isinstance(forget_removed, bool):
            raise ConfigError("forget_removed", forget_removed, "True (a message removed from the state is deleted from memory) or False")
        self.store_tool_results = store_tool_results
        self.forget_removed = forget_removed
        self._fixed = memory
        self._session_id = session_id
        self._open = {"path": path, "client": client, "config": config, "embedders": embedders}
        self._memories: OrderedDict[str, MomentaryMemory] = OrderedDict()  # least recently used first
        self._calls: Counter[str] = Counter()  # session -> model calls using its memory now: never evicted
        self._lock = threading.Lock()
        self.max_sessions = max_sessions
        self.l_max = l_max
        self.top_k = top_k

    def memory_for(self, session: str) -> MomentaryMemory:
        """The memory of one session; at most ``max_sessions`` stay open, the least recently used is
        closed (its Chroma client released) once no model call of this middleware is using it.
        Everything is in Chroma, so a closed session is simply reopened on its next call. A memory
        returned here is not held open: keep one yourself with ``memory=``."""
        return self._open_session(session, hold=False)

    @contextmanager
    def _holding(self, session: str) -> Iterator[MomentaryMemory]:
        """The session's memory, held open for one model call: eviction skips it until the call ends."""
        mem = self._open_session(session, hold=True)
        if mem is self._fixed:  # the caller's memory: never evicted
            yield mem
            return
        try:
            yield mem
        finally:
            with self._lock:
                self._calls[session] -= 1
                if not self._calls[session]:
                    del self._calls[session]
                evicted = self._evict()
            for old in evicted:
                old.close()

    def _evict(self) -> list[MomentaryMemory]:
        """Past ``max_sessions``, the least recently used memories no call is using (under the lock;
        the caller closes them). Memories in use may keep the count above the cap until released."""
        out: list[MomentaryMemory] = []
        for session in list(self._memories):
            if len(self._memories) <= self.max_sessions:
                break
            if session not in self._calls:
                out.append(self._memories.pop(session))
        return out

    def _open_session(self, session: str, *, hold: bool) -> MomentaryMemory:
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            mem = self._memories.get(session)
            if mem is not None and not mem.closed:
                self._memories.move_to_end(session)
                self._calls.update([session] if hold else [])
                return mem
        opened = MomentaryMemory(session, **self._open)  # opened outside the lock: it reads Chroma
        with self._lock:
            current = self._memories.get(session)
            theirs = current is not None and not current.closed  # another thread opened it meanwhile: keep theirs
            mem = current if current is not None and theirs else opened
            unused = [opened] if theirs else []
            self._memories[session] = mem
            self._memories.move_to_end(session)
            self._calls.update([session] if hold else [])
            unused += self._evict()
        for old in unused:
            old.close()
        return mem

    def close(self) -> None:
        """Close every memory this middleware opened (a ``memory=`` given is the caller's)."""
        with self._lock:
            opened, self._memories = list(self._memories.values()), OrderedDict()
        for mem in opened:
            mem.close()

    def _session(self) -> str:
        if self._session_id is not None:
            return self._session_id
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:  # called outside a LangGraph run: there is no config to read
            config = {}
        thread = (config.get("configurable") or {}).get("thread_id")
        if thread is None and self._fixed is not None:  # the caller's one memory: no thread to tell apart
            return self._fixed.session_id
        if thread is None:
            raise ConfigError(
                "thread_id",
                None,
                "a thread_id in the run config ({'configurable': {'thread_id': ...}}), or session_id=/memory= on the middleware: "
                "meve never puts different users into one shared default session",
            )
        return str(thread)

    def _messages(self, request: ModelRequest) -> list[AnyMessage]:
        with self._holding(self._session()) as memory:
            self._forget(request.state, memory)  # before recall: a removed message is never recalled
            return reconstruct_messages(request.messages, memory, l_max=self.l_max, top_k=self.top_k, tools=self.store_tool_results)

    def _forget(self, state: Any, memory: MomentaryMemory) -> None:
        """Delete the turns of the messages the state listed as stored and no longer has."""
        if self.forget_removed:
            delete_removed(memory, _field(state, _STORED) or [], [m.id for m in _field(state, "messages") or []])

    def _record(self, state: Any) -> dict[str, Any]:
        messages = _field(state, "messages") or []
        with self._holding(self._session()) as memory:
            self._forget(state, memory)
            ids = record_messages([_message(m) for m in messages], memory, tools=self.store_tool_results)
        # Only a message stored under its own id: one matched to a turn stored earlier (sent again
        # under a new id) does not own that turn, so removing it does not delete the turn.
        return {_STORED: [m.id for m, tid in zip(messages, ids, strict=True) if tid is not None and tid == m.id]}

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store what the model just returned (the state's messages, ids as the checkpointer keeps
        them): a thread's last reply is in memory when the run ends, across a restart. Deletes the
        turns of messages removed from the state, and lists in the state those it stored."""
        return self._record(state)

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`after_model` in a worker thread."""
        return await asyncio.to_thread(self._record, state)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """Hand the model the reconstructed messages."""
        return handler(request.override(messages=self._messages(request)))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse:
        """:meth:`wrap_model_call` for async agents (memory work in a worker thread)."""
        messages = await asyncio.to_thread(self._messages, request)
        return await handler(request.override(messages=messages))


__all__ = ["MomentaryContextMiddleware", "reconstruct_messages"]
