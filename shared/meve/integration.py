"""The one surface the framework adapters use (``langchain_meve``, ``llamaindex_meve``).

Adapters import only :mod:`meve` and this module, and only convert types: everything a
LangChain retriever, a LlamaIndex postprocessor or either framework's chat memory does is here,
once, so both behave the same way.

* :func:`config_from`, :func:`run_overrides`, :func:`builder_kwargs` (:mod:`meve.pipeline.keywords`): MeVeConfig fields as any component's keywords.
* :func:`run_on_texts`: MeVe's phases over another retriever's texts (all of them, or one alone).
* :class:`ForeignStore` (:mod:`meve.pipeline.foreign`) and :func:`meve_over`: a framework's vector store as meve's passage store.
* :func:`passage_metadata`: the ``meve_*`` keys a returned document or node carries.
* :class:`Place`, :class:`Neighbours`, :func:`metadata_place` (:mod:`meve.pipeline.neighbours`): where a chunk sits in its source.
* :func:`recall`, :func:`chat_context`, :func:`record_messages`, :func:`delete_removed`, :func:`chat_role`, :func:`storable`: the chat-message policy.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from meve.core.config import MeVeConfig
from meve.core.logs import log, warn_once
from meve.core.records import ContextResult, Passage, check_query
from meve.core.tokens import STAMP_PREFIX, get_token_counter
from meve.memory.ids import content_id
from meve.memory.memory import MomentaryMemory
from meve.pipeline.config_file import ConfigLike, as_config
from meve.pipeline.foreign import ForeignStore, StoredVectors
from meve.pipeline.keywords import CONFIG_FIELDS, builder_kwargs, config_from, run_overrides
from meve.pipeline.meve import MeVe
from meve.pipeline.neighbours import Neighbours, Place, metadata_place
from meve.pipeline.runner import PHASES, PhaseCallback, run_phases
from meve.retrieval.bm25 import DEFAULT_BM25
from meve.retrieval.lexical import LexicalIndex, local_lexical
from meve.scoring.embedders import default_embedder
from meve.scoring.resolve import Models, ScorerSpec

__all__ = [
    "CONFIG_FIELDS",
    "META_KEYS",
    "PHASES",
    "ConfigLike",
    "Exchanges",
    "ForeignStore",
    "Message",
    "Models",
    "Neighbours",
    "Place",
    "StoredVectors",
    "as_config",
    "builder_kwargs",
    "chat_context",
    "chat_role",
    "config_from",
    "default_embedder",
    "delete_removed",
    "metadata_place",
    "meve_over",
    "passage_metadata",
    "recall",
    "recall_query",
    "record_messages",
    "run_on_texts",
    "run_overrides",
    "stable_id",
    "storable",
    "stored_roles",
    "stored_text",
    "user_metadata",
]

#: The metadata keys meve adds to what it returns (reserved: storing one is an InputError).
META_KEYS = ("meve_score", "meve_source", "meve_tokens", "meve_spans", "meve_cut", "meve_joined", "meve_note")


def run_on_texts(
    query: str,
    texts: Sequence[str],
    config: MeVeConfig,
    models: Models,
    *,
    scores: Sequence[float | None] | None = None,
    token_counter: Any = None,
    phases: Collection[str] = PHASES,
    on_phase: PhaseCallback | None = None,
    places: Sequence[Place | None] | None = None,
) -> ContextResult:
    """MeVe's phases 2-5 (or those in ``phases``) over another retriever's ``texts``, in its order.

    Passages get ids "0", "1", … (their index in ``texts``) and the retriever's ``scores`` (or
    their cosine to the query). The fallback searches BM25 over these texts. Texts are embedded
    only when a phase needs vectors (prioritisation, cosine pruning, an unverified fallback).
    ``places``: where each text sits in its source, neighbours named by their index too
    (``MeVeConfig.neighbours`` joins only texts given here)."""
    query = check_query(query)
    cfg = config
    unverified_fallback = not cfg.verify and cfg.fallback and "fallback" in phases
    vectors = ("prioritise" in phases and cfg.prioritisation != "none") or ("prune" in phases and cfg.prune == "embedder") or unverified_fallback
    given = list(scores) if scores is not None else [None] * len(texts)
    qvec = None
    if vectors and texts:
        qvec, vecs = _vectors(query, texts, models, verified=cfg.verify and "verify" in phases)
        passages = tuple(
            Passage(id=str(i), text=t, embedding=vecs[i], dense_score=s if s is not None else float(vecs[i] @ qvec))
            for i, (t, s) in enumerate(zip(texts, given, strict=True))
        )
    else:
        passages = tuple(Passage(id=str(i), text=t, dense_score=s) for i, (t, s) in enumerate(zip(texts, given, strict=True)))
    return run_phases(
        query,
        passages,
        cfg,
        scoring=lambda: models.scoring,
        embedder=models.embedder,
        token_counter=get_token_counter(token_counter),
        query_vec=qvec,
        lexical=local_lexical(passages),
        on_phase=on_phase,
        phases=phases,
        neighbours=Neighbours(place=lambda p: places[int(p.id)]) if places is not None else None,
    )


def _vectors(query: str, texts: Sequence[str], models: Models, *, verified: bool) -> tuple[np.ndarray, np.ndarray]:
    """The query's and the texts' dense vectors. When the verifier runs and shares the embedder's
    forward pass (late interaction over the same MiniLM), that one pass makes the vectors and keeps
    the token vectors verification reads, so each text goes through the model once, not twice."""
    shared = models.scoring.shared if verified else None
    if shared is not None and shared.name == models.embedder.name:
        return shared.query(query), (shared.candidates or shared.passages)(texts)
    vecs = models.embedder.encode([query, *texts])
    return vecs[0], vecs[1:]


def user_metadata(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored passage's metadata less meve's own bookkeeping (token-count stamps)."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(STAMP_PREFIX)}


def passage_metadata(result: ContextResult, p: Passage, base: Mapping[str, Any] | None = None, named: Callable[[str], str] = str) -> dict[str, Any]:
    """``base`` plus what meve adds: score, source, tokens, the kept character spans of a pruned
    or cut passage (``meve_cut`` and a note for one cut to fit t_max), the chunks a passage joined
    with its neighbours holds (``meve_joined``, each by ``named(passage id)``, in reading order),
    and a note for a passage kept without passing the verifier (query coverage: the terms it adds;
    padding: why)."""
    meta = {**user_metadata(base), "meve_score": p.score, "meve_source": p.source, "meve_tokens": p.tokens}
    if p.spans is not None:
        meta["meve_spans"] = [list(span) for span in p.spans]
    if p.joined is not None:
        meta["meve_joined"] = [named(pid) for pid in p.joined]
        meta["meve_note"] = f"joined with its neighbours in its source: {len(p.joined)} chunks, their overlap once"
    cut = result.phase("budget").info.get("cut", {}).get(p.id)
    if cut is not None:
        meta["meve_cut"] = True
        meta["meve_note"] = f"cut to its best excerpt to fit t_max: {cut['tokens_kept']} of its {cut['tokens_whole']} tokens"
    if p.source == "covered":
        terms = result.phase("verify").info.get("covered", {}).get(p.id, {}).get("terms", [])
        meta["meve_note"] = f"kept for query coverage: adds {', '.join(terms)}"
    elif p.source == "padded":
        meta["meve_note"] = f"kept below tau to reach min_keep={result.config.get('min_keep')}"
    return {k: v for k, v in meta.items() if v is not None}


def meve_over(
    store: ForeignStore, *, config: ConfigLike | None = None, scorer: ScorerSpec = None, token_counter: Any = None, bm25_backend: str = DEFAULT_BM25
) -> MeVe:
    """A MeVe whose phase 1 is the framework's vector store: the store's embeddings for the query
    and the redundancy checks (its stored vectors where it gives them: :class:`ForeignStore`), BM25
    over the store's known passages for the fallback, and the scorer resolved for a foreign store
    (the default runs meve's MiniLM, with no shared pass)."""
    config = as_config(config)  # a bad config file is refused before the store is read
    ids, texts = store.documents()
    models = Models(store.embedder, scorer, store=True)
    return MeVe(
        store=store,
        lexical=LexicalIndex(ids, texts, bm25_backend),
        config=config,
        embedder=store.embedder,
        scorer=models.scoring,
        token_counter=token_counter,
        query_encoder=store.embed_query,
    )


# -- chat memory ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Message:
    """A chat message as the policy sees it: role (user, assistant, system, tool, or a role meve
    does not know, which is never stored), text, id, and whether it calls tools."""

    role: str
    text: str
    id: str | None = None
    tool_calls: bool = False


#: The role names frameworks and providers use -> meve's roles: Gemini's "model" and Cohere's
#: "chatbot" are assistants, OpenAI's "developer" is a system message, "function" a tool result.
_CHAT_ROLES: Mapping[str, str] = {
    **dict.fromkeys(("user", "human"), "user"),
    **dict.fromkeys(("assistant", "ai", "model", "chatbot"), "assistant"),
    **dict.fromkeys(("system", "developer"), "system"),
    **dict.fromkeys(("tool", "function"), "tool"),
}


def chat_role(name: str) -> str | None:
    """meve's role for a framework's role name (``_CHAT_ROLES``, any case), or None for one it
    does not know: such a message is never stored (a warning says so, once per name) and reaches
    the model only as part of the current exchange."""
    role = _CHAT_ROLES.get(str(name).lower())
    if role is None:
        warn_once(
            f"chat-role:{name}",
            f"meve: messages with role {name!r} are not stored in chat memory (known roles: {', '.join(_CHAT_ROLES)}); "
            "they reach the model only as part of the current exchange",
        )
    return role


def stable_id(role: str, text: str, occurrence: int = 0) -> str:
    """The id of a message that has none: :func:`meve.memory.ids.content_id` (by content and occurrence)."""
    return content_id(role, text, occurrence)


def _turn_ids(messages: Sequence[Message], memory: MomentaryMemory | None = None) -> list[str]:
    """Each message's turn id: its own, else :func:`stable_id` (by content and occurrence among
    the messages without an id). With ``memory``, a message whose id is not stored is the stored
    turn with its role and text that no message given names, oldest first (:func:`_resent`)."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for m in messages:
        if m.id:
            out.append(m.id)
            continue
        n = seen[m.role, m.text] = seen.get((m.role, m.text), -1) + 1
        out.append(stable_id(m.role, m.text, n))
    return out if memory is None else _resent(messages, out, memory)


def _resent(messages: Sequence[Message], ids: list[str], memory: MomentaryMemory) -> list[str]:
    """``ids``, where a storable message's id is not stored, replaced by the id of a stored turn
    with its role and text that no id in ``ids`` names (each stored turn taken once, oldest first).
    LangGraph gives a message without an id a new uuid as it enters the state, so a history the
    app sends again on each call (no checkpointer) arrives under new ids: by id alone it was
    stored again on every call."""
    stored = memory.turns()
    known = {t.id for t in stored}
    cap = memory.config.max_turn_chars
    roles = stored_roles(tools=True)
    unknown = {i: (m.role, stored_text(m, cap)) for i, (m, tid) in enumerate(zip(messages, ids, strict=True)) if tid not in known and storable(m, roles)}
    if not unknown:
        return ids
    wanted, named = set(unknown.values()), set(ids)
    free: dict[tuple[str, str], list[str]] = {}
    for t in stored:
        if (t.role, t.text) in wanted and t.id not in named:
            free.setdefault((t.role, t.text), []).append(t.id)
    out = list(ids)
    for i, key in unknown.items():
        if free.get(key):
            out[i] = free[key].pop(0)
    return out


def storable(m: Message, roles: Collection[str] = ("user", "assistant")) -> bool:
    """Whether a message is stored as a turn: text, a role in ``roles``, and no tool call (a call
    stays in the current exchange beside its results; stored alone it would be recalled without them)."""
    return m.role in roles and bool(m.text.strip()) and not m.tool_calls


class Exchanges:
    """Which messages are stored, met in order (one at a time, or in batches across calls): none of
    an exchange whose user message has no text (an image alone), its reply and tool results
    included. That message is not stored (:func:`storable`), so its reply alone would be an
    assistant turn with no question before it, recalled beside another question."""

    def __init__(self) -> None:
        self.untold = False

    def told(self, m: Message) -> bool:
        """Whether ``m`` is outside such an exchange (each user message starts the next exchange)."""
        if m.role == "user":
            self.untold = not m.text.strip()
        return not self.untold


def recall_query(messages: Sequence[Message], memory: MomentaryMemory) -> str | None:
    """What memory is rebuilt for: the latest user message with text; after one with none (it says
    nothing to search for), the one before it, from the store when the app no longer sends it; None
    when no user has said anything."""
    found = next((m.text for m in reversed(messages) if m.role == "user" and m.text.strip()), None)
    return found if found is not None else next((t.text for t in reversed(memory.turns()) if t.role == "user"), None)


def stored_roles(tools: bool) -> tuple[str, ...]:
    """The roles an adapter stores: user and assistant turns, and tool results unless ``tools`` is
    False (in agent loops the facts users ask about later often arrive as tool results)."""
    return ("user", "assistant", "tool") if tools else ("user", "assistant")


#: A tool result is stored whole up to this many characters (a turn of any role is counted and cut
#: to ``l_max`` when rebuilt); past it, its head is stored with TOOL_CUT, never refused mid-run.
TOOL_CHARS = 200_000
TOOL_CUT = " … [tool result cut]"


def record_messages(messages: Sequence[Message], memory: MomentaryMemory, *, tools: bool = True) -> list[str | None]:
    """Store the user and assistant turns, and tool results unless ``tools`` is False
    (:func:`storable`; none of an exchange whose user message has no text, :class:`Exchanges`),
    under their ids (:func:`_turn_ids`, with ``memory``: a message sent again under a new id is its
    stored turn), so recording a thread again stores nothing new, and a message that keeps its id
    with a new text (edited or regenerated) supersedes the stored turn
    (``add_many(supersede=True)``). Returns each message's turn id, None for one not stored."""
    return _store(messages, _turn_ids(messages, memory), memory, tools)


def _store(messages: Sequence[Message], ids: Sequence[str], memory: MomentaryMemory, tools: bool) -> list[str | None]:
    """:func:`record_messages` with the turn ids already worked out (``chat_context`` reuses them for recall)."""
    roles, exchanges = stored_roles(tools), Exchanges()
    tids = [tid if exchanges.told(m) and storable(m, roles) else None for m, tid in zip(messages, ids, strict=True)]
    items = [
        {"text": stored_text(m, memory.config.max_turn_chars), "role": m.role, "turn_id": tid} for m, tid in zip(messages, tids, strict=True) if tid is not None
    ]
    if items:
        memory.add_many(items, supersede=True)
    return tids


def delete_removed(memory: MomentaryMemory, stored_ids: Collection[str], present: Collection[str]) -> list[str]:
    """Delete, in one reload, the turns ``stored_ids`` names (messages stored under their own id)
    that are not ``present`` any more: removed from the framework's state (LangGraph's
    ``RemoveMessage``), so never recalled again. Returns the ids deleted."""
    kept = set(present)
    gone = [i for i in dict.fromkeys(stored_ids) if i not in kept]
    if gone:
        known = {t.id for t in memory.turns()}
        gone = [i for i in gone if i in known]
    if gone:
        memory.clear(gone)
        log.info("meve: session %r: %d turn(s) deleted, their messages were removed from the conversation's state", memory.session_id, len(gone))
    return gone


def stored_text(m: Message, max_chars: int) -> str:
    """The text stored for ``m``: a tool result past :data:`TOOL_CHARS` (or the memory's
    ``max_turn_chars``) is cut to its head with :data:`TOOL_CUT`, never refused mid-run."""
    limit = min(TOOL_CHARS, max_chars)
    return m.text if m.role != "tool" or len(m.text) <= limit else m.text[: limit - len(TOOL_CUT)] + TOOL_CUT


def recall(memory: MomentaryMemory, query: str, *, exclude: Collection[str] = (), l_max: int | None = None, top_k: int | None = None) -> list[Message]:
    """The turns memory rebuilds for ``query`` within ``l_max`` tokens, oldest first, never the
    turns in ``exclude`` (the current exchange, which the caller sends verbatim): the latest
    exchange kept first is the one before it, and no budget goes to what is sent anyway. System turns are
    never recalled: the policy passes them through first, outside ``l_max``. A tool result comes
    back as an assistant message saying so ("Tool result: ..."): a tool message needs the call it
    answers, which is not recalled. Each recalled message's id is ``"meve-<turn id>"``; no flag
    rides along into the prompt."""
    ctx = memory.reconstruct(query, l_max=l_max, top_k=top_k, skip_roles=("system",), skip_ids=exclude)
    out = []
    for t, text in zip(ctx.turns, ctx.contents(), strict=True):
        out.append(Message("assistant", f"Tool result: {text}", f"meve-{t.id}") if t.role == "tool" else Message(t.role, text, f"meve-{t.id}"))
    return out


def chat_context(
    messages: Sequence[Message],
    memory: MomentaryMemory,
    *,
    l_max: int | None = None,
    top_k: int | None = None,
    record: bool = True,
    tools: bool = True,
) -> list[Message]:
    """The messages a model should see: system messages first (outside ``l_max``), then the turns
    memory recalls for the latest user message with text (:func:`recall_query`), then the current
    exchange (the latest user message and everything after it: tool calls and their results stay
    together, in order). An exchange whose user message has no text is not stored (:class:`Exchanges`)."""
    ids = _turn_ids(messages, memory)
    if record:
        _store(messages, ids, memory, tools)
    system = [m for m in messages if m.role == "system"]
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if start is None:
        return list(messages)
    current = [m for m in messages[start:] if m.role != "system"]
    query = recall_query(messages, memory)
    if query is None:
        return [*system, *current]
    history = recall(memory, query, exclude=set(ids[start:]), l_max=l_max, top_k=top_k)
    return [*system, *history, *current]
