"""Exact localisation (MindRef, arXiv 2402.17010): where a passage or quote sits in the corpus.

* :class:`ExactIndex` finds every occurrence of a short string (e.g. a 16-token
  prefix an LLM produced) in the whole corpus with a suffix array (pydivsufsort,
  C): O(m log n + occurrences), then :meth:`ExactIndex.passage` expands a hit to
  the passage that starts there. This is also quote → source citation checking.
* :class:`TitleTrie` and its ``prefix_allowed_tokens_fn`` constrain a Hugging Face
  ``generate`` so a local causal LM can only emit valid titles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from meve.core.errors import InputError
from meve.core.tokens import TokenCounter

_SEP = b"\x00"


@dataclass(frozen=True)
class Span:
    """An exact location in a source document (character offsets, end exclusive)."""

    doc_id: str
    start: int
    end: int
    text: str


def _check_documents(documents: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    docs = list(documents)
    seen: set[str] = set()
    for i, item in enumerate(docs):
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], str)):
            raise InputError(f"documents[{i}]={item!r:.80} must be a (doc_id, text) pair of str")
        if item[0] in seen:
            raise InputError(f"duplicate doc_id {item[0]!r}")
        if "\x00" in item[1]:
            raise InputError(f"document {item[0]!r} contains a NUL character, which the index uses as a separator")
        seen.add(item[0])
    return [(d, t) for d, t in docs]


class ExactIndex:
    """Every occurrence of a string in a corpus, via a suffix array over the UTF-8 bytes."""

    def __init__(self, documents: Sequence[tuple[str, str]]) -> None:
        from pydivsufsort import divsufsort

        self.documents = _check_documents(documents)
        self.texts = {d: t for d, t in self.documents}
        encoded = [t.encode("utf-8") for _, t in self.documents]
        self._buf = _SEP.join(encoded) + _SEP
        starts = np.zeros(len(encoded), dtype=np.int64)
        pos = 0
        for i, e in enumerate(encoded):
            starts[i] = pos
            pos += len(e) + 1
        self._starts = starts
        # Byte -> character offset maps, only for documents that are not pure ASCII.
        self._char_of: dict[int, np.ndarray] = {}
        for i, (e, (_, t)) in enumerate(zip(encoded, self.documents, strict=True)):
            if len(e) != len(t):
                self._char_of[i] = np.cumsum([0] + [len(ch.encode("utf-8")) for ch in t])
        self._sa = divsufsort(np.frombuffer(self._buf, dtype=np.uint8).copy())

    @classmethod
    def from_documents(cls, documents: Iterable[tuple[str, str]]) -> ExactIndex:
        return cls(list(documents))

    def __len__(self) -> int:
        return len(self.documents)

    def _char(self, doc: int, byte_offset: int) -> int:
        table = self._char_of.get(doc)
        return byte_offset if table is None else int(np.searchsorted(table, byte_offset))

    def count(self, text: str) -> int:
        from pydivsufsort import sa_search

        if not text:
            return 0
        n, _ = sa_search(self._buf, self._sa, text.encode("utf-8"))
        return int(n)

    def locate(self, text: str, limit: int | None = None) -> list[Span]:
        """Every occurrence of ``text`` (exact, case-sensitive), in corpus order."""
        from pydivsufsort import sa_search

        if not isinstance(text, str) or not text:
            raise InputError(f"locate needs a non-empty str, got {text!r}")
        if "\x00" in text:
            raise InputError("the text to locate contains a NUL character")
        pattern = text.encode("utf-8")
        n, first = sa_search(self._buf, self._sa, pattern)
        if not n:
            return []
        positions = np.sort(self._sa[first : first + n])
        if limit is not None:
            positions = positions[:limit]
        docs = np.searchsorted(self._starts, positions, side="right") - 1
        spans = []
        for pos, d in zip(positions.tolist(), docs.tolist(), strict=True):
            doc_id, body = self.documents[d]
            start = self._char(d, pos - int(self._starts[d]))
            end = self._char(d, pos - int(self._starts[d]) + len(pattern))
            spans.append(Span(doc_id, start, end, body[start:end]))
        return spans

    def passage(self, span: Span, tokens: int = 150, counter: TokenCounter | None = None) -> Span:
        """The passage of about ``tokens`` tokens that starts at ``span`` (ending on a sentence end when one is near)."""
        from meve.core.tokens import get_token_counter

        counter = counter if counter is not None else get_token_counter()
        body = self.texts[span.doc_id]
        cut = counter.truncate(body[span.start :], tokens)
        end = span.start + len(cut)
        last = max(cut.rfind(". "), cut.rfind(".\n"), cut.rfind("? "), cut.rfind("! "))
        if end < len(body) and last >= len(cut) // 2:
            end = span.start + last + 1
        return Span(span.doc_id, span.start, end, body[span.start : end])


def naive_locate(documents: Sequence[tuple[str, str]], text: str) -> list[tuple[str, int]]:
    """Reference implementation for tests: every (doc_id, start) by plain scanning."""
    out = []
    for doc_id, body in documents:
        start = body.find(text)
        while start != -1:
            out.append((doc_id, start))
            start = body.find(text, start + 1)
    return out


class TitleTrie:
    """A trie over the token ids of every valid title, ending in ``eos_token_id``."""

    def __init__(self, titles: Iterable[str], tokenizer: Any, eos_token_id: int | None = None) -> None:
        self.eos = int(eos_token_id if eos_token_id is not None else tokenizer.eos_token_id)
        self.root: dict[int, dict] = {}
        self.titles: dict[tuple[int, ...], str] = {}
        for title in titles:
            ids = tuple(int(t) for t in tokenizer.encode(title, add_special_tokens=False))
            if not ids:
                continue
            self.titles[ids] = title
            node = self.root
            for tok in (*ids, self.eos):
                node = node.setdefault(tok, {})

    def allowed(self, prefix: Sequence[int]) -> list[int]:
        node = self.root
        for tok in prefix:
            if tok not in node:
                return [self.eos]
            node = node[tok]
        return list(node) or [self.eos]

    def title_for(self, ids: Sequence[int]) -> str | None:
        ids = [int(t) for t in ids]
        if self.eos in ids:
            ids = ids[: ids.index(self.eos)]
        return self.titles.get(tuple(ids))

    def prefix_allowed_tokens_fn(self, prompt_length: int) -> Callable[[int, Any], list[int]]:
        """For ``model.generate(..., prefix_allowed_tokens_fn=trie.prefix_allowed_tokens_fn(len(prompt)))``."""

        def fn(batch_id: int, input_ids: Any) -> list[int]:
            return self.allowed([int(t) for t in input_ids[prompt_length:]])

        return fn
