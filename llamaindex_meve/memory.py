"""Momentary Contexts as LlamaIndex chat memory: ``MomentaryChatMemory`` (BaseMemory) and ``MomentaryMemoryBlock``.

The core store is ``meve.MomentaryMemory``; the LlamaIndex class has its own name so the two
cannot be confused in one file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import TextBlock
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemory
from llama_index.core.memory.memory import DEFAULT_MEMORY_BLOCKS_TEMPLATE, BaseMemoryBlock
from llama_index.core.utils import get_tokenizer
from pydantic import ConfigDict, Field, PrivateAttr

from meve import ConfigError, MemoryConfig
from meve import MomentaryMemory as CoreMemory
from meve.integration import Exchanges, Message, chat_role, recall, recall_query, storable, stored_roles, stored_text

_FROM_CORE = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT, "system": MessageRole.SYSTEM, "tool": MessageRole.TOOL}


def _check_budget(l_max: Any, top_k: Any) -> None:
    # The same rules as MemoryConfig, at construction rather than at the first get().
    MemoryConfig(l_max=l_max if l_max is not None else 1, top_k=top_k if top_k is not None else 0)


def _text(message: ChatMessage) -> str:
    return message.content or ""


def _message(message: ChatMessage) -> Message:
    # MODEL (Gemini) and CHATBOT (Cohere) are assistants; a tool call is OpenAI-style
    # additional_kwargs or a ToolCallBlock beside the text.
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    calls = bool(message.additional_kwargs.get("tool_calls")) or any(getattr(b, "block_type", None) == "tool_call" for b in message.blocks)
    return Message(chat_role(role) or role, _text(message), None, calls)


class MomentaryChatMemory(BaseMemory):
    """Chat memory for LlamaIndex chat engines and agents, backed by ``meve.MomentaryMemory`` in Chroma.

    ``get(input)`` follows meve's chat policy (:func:`meve.integration.chat_context`): the
    stored system messages first (never evicted, outside ``l_max``), then the user and assistant
    turns memory rebuilds for ``input`` (default: the latest user message, as agents call
    ``aget()`` with none) within ``l_max`` tokens, then the current exchange — the latest user
    message and everything after it, verbatim, so tool calls and their results stay together.
    User, assistant and system text, and tool results unless ``store_tool_results=False``, is
    persisted in Chroma (a recalled tool result comes back as an assistant message "Tool result:
    ..."); a tool call lives in the current exchange only, beside its results. A user message with
    no text (an image alone) is answered with the turns rebuilt for the latest one with text, and
    its exchange is not stored (its reply alone would be recalled beside another question).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    session_id: str = Field(description="the core memory's session id")
    l_max: int | None = None
    top_k: int | None = None
    store_tool_results: bool = Field(default=True, description="store TOOL and FUNCTION results as turns (recalled like any turn)")
    _core: CoreMemory = PrivateAttr()
    _current: list[ChatMessage] = PrivateAttr(default_factory=list)
    _current_ids: set[str] = PrivateAttr(default_factory=set)
    _exchanges: Exchanges = PrivateAttr(default_factory=Exchanges)

    def __init__(self, core: CoreMemory, **kwargs: Any) -> None:
        if not isinstance(core, CoreMemory):
            raise ConfigError("core", core, "a meve.MomentaryMemory (or build one with MomentaryChatMemory.from_defaults)")
        _check_budget(kwargs.get("l_max"), kwargs.get("top_k"))
        super().__init__(session_id=core.session_id, **kwargs)  # type: ignore[call-arg]
        self._core = core
        self._current = []

    @classmethod
    def class_name(cls) -> str:
        return "MeVeMomentaryChatMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        session_id: str,
        *,
        path: str | None = None,
        client: Any = None,
        config: MemoryConfig | None = None,
        embedders: Any = None,
        token_counter: Any = None,
        chat_history: list[ChatMessage] | None = None,
        l_max: int | None = None,
        top_k: int | None = None,
        store_tool_results: bool = True,
    ) -> MomentaryChatMemory:
        """A chat memory over a new or reopened core session (``path=`` a Chroma directory, or ``client=``)."""
        _check_budget(l_max, top_k)  # before a store is opened
        if not isinstance(store_tool_results, bool):
            raise ConfigError("store_tool_results", store_tool_results, "True or False")
        core = CoreMemory(session_id, path=path, client=client, config=config, embedders=embedders, token_counter=token_counter)
        mem = cls(core, l_max=l_max, top_k=top_k, store_tool_results=store_tool_results)
        if chat_history:
            mem.put_messages(chat_history)
        return mem

    @property
    def core(self) -> CoreMemory:
        """The meve memory behind this one."""
        return self._core

    def put(self, message: ChatMessage) -> None:
        """Store a message's text (user, assistant, system, and a tool result unless
        ``store_tool_results=False``; a tool call only in the current exchange, beside its
        results) and track the current exchange."""
        plain = _message(message)
        if plain.role == "user":
            self._current = []
            self._current_ids = set()
        self._current.append(message)
        if self._exchanges.told(plain) and storable(plain, (*stored_roles(self.store_tool_results), "system")):
            # The id of what was stored: recalled turns are told apart from the current exchange by id,
            # never by text, so a turn legitimately said twice is recalled.
            self._current_ids.add(self._core.add(stored_text(plain, self._core.config.max_turn_chars), plain.role).id)

    async def aput(self, message: ChatMessage) -> None:
        """:meth:`put` in a worker thread."""
        await asyncio.to_thread(self.put, message)

    def put_messages(self, messages: list[ChatMessage]) -> None:
        """Put each message in order."""
        for m in messages:
            self.put(m)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        """:meth:`put_messages` in a worker thread."""
        await asyncio.to_thread(self.put_messages, messages)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace everything stored with ``messages``."""
        self.reset()
        self.put_messages(messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """:meth:`set` in a worker thread."""
        await asyncio.to_thread(self.set, messages)

    def reset(self) -> None:
        """Delete every stored turn of this session."""
        self._core.clear()
        self._current = []
        self._current_ids = set()
        self._exchanges = Exchanges()

    async def areset(self) -> None:
        """:meth:`reset` in a worker thread."""
        await asyncio.to_thread(self.reset)

    def get_all(self) -> list[ChatMessage]:
        """Every stored turn, oldest first, as chat messages."""
        return [ChatMessage(role=_FROM_CORE[t.role], content=t.text) for t in self._core.turns()]

    async def aget_all(self) -> list[ChatMessage]:
        """:meth:`get_all` in a worker thread."""
        return await asyncio.to_thread(self.get_all)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """Stored system messages, then the turns rebuilt for ``input`` within ``l_max`` tokens
        (counted on the rendered ``role: text`` lines), then the current exchange verbatim."""
        turns = self._core.turns()
        query = input if input and input.strip() else recall_query([_message(m) for m in self._current], self._core)
        # Each system text once, first: stored system messages are never recalled, nor repeated
        # from the current exchange (a system message put after the user message is stored too).
        system = [ChatMessage(role=MessageRole.SYSTEM, content=text) for text in dict.fromkeys(t.text for t in turns if t.role == "system")]
        current = [m for m in self._current if _message(m).role != "system"]
        if query is None:
            return [*system, *current]  # nothing to rebuild for (no user has said anything): no recall
        history = recall(self._core, query, exclude=self._current_ids, l_max=self.l_max, top_k=self.top_k)
        return [*system, *(ChatMessage(role=_FROM_CORE[m.role], content=m.text) for m in history), *current]

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """:meth:`get` in a worker thread."""
        return await asyncio.to_thread(self.get, input, **kwargs)


class MomentaryMemoryBlock(BaseMemoryBlock[str]):
    """A memory block for ``llama_index.core.memory.Memory``: stores the messages the short-term
    queue flushes into it, and returns the turns rebuilt for the latest user message with text.

    ``l_max`` bounds the block as Memory sends it: its text inside Memory's default template (the
    ``<memory>`` and ``<name>`` tags), counted with ``tokenizer_fn``, LlamaIndex's tokenizer unless
    given (Memory's default: pass both the same one if you set your own). An exchange whose user
    message has no text is not stored: its reply alone would be recalled beside another question."""

    name: str = "momentary_context"
    memory: Any = Field(description="a meve.MomentaryMemory (the core store)")
    l_max: int | None = None
    top_k: int | None = None
    store_tool_results: bool = True
    tokenizer_fn: Callable[[str], list[Any]] | None = Field(default=None, exclude=True, description="Memory's tokenizer_fn, if not LlamaIndex's")
    _exchanges: Exchanges = PrivateAttr(default_factory=Exchanges)  # the queue flushes an exchange over several puts

    def model_post_init(self, context: Any, /) -> None:
        if not isinstance(self.memory, CoreMemory):
            raise ConfigError("memory", self.memory, "a meve.MomentaryMemory (the core store)")
        _check_budget(self.l_max, self.top_k)

    def _sent_tokens(self, text: str) -> int:
        """The tokens Memory counts for this block holding ``text``, wrapped as its template wraps it."""
        rendered = DEFAULT_MEMORY_BLOCKS_TEMPLATE.format_messages(memory_blocks=[(self.name, [TextBlock(text=text)])])
        count = self.tokenizer_fn or get_tokenizer()
        return sum(len(count(m.content or "")) for m in rendered)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = await asyncio.to_thread(recall_query, [_message(m) for m in messages or []], self.memory)
        if query is None:
            return ""  # no user message to rebuild for
        limit = self.l_max if self.l_max is not None else self.memory.config.l_max
        wrapper = self._sent_tokens("")
        budget = room = limit - wrapper
        # meve counts with its own tokenizer, which may count fewer: rebuild smaller, in proportion, until it fits.
        while budget > 0:
            ctx = await self.memory.areconstruct(query, l_max=budget, top_k=self.top_k)
            sent = self._sent_tokens(ctx.text)
            if sent <= limit:
                return str(ctx.text)
            used = self.memory.token_counter.count(ctx.text)  # below it, this text cannot be chosen again
            budget = min(used - 1, used * room // (sent - wrapper))
        return ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        roles = stored_roles(self.store_tool_results)
        cap = self.memory.config.max_turn_chars
        items = [{"text": stored_text(p, cap), "role": p.role} for p in map(_message, messages) if self._exchanges.told(p) and storable(p, roles)]
        if items:
            await self.memory.aadd_many(items)
