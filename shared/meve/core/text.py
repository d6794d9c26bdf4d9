"""Sentence splitting and sentence-group chunking (as the MeVe paper chunks Wikipedia)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from meve.core.tokens import TokenCounter

_SENTENCE_END = re.compile(r"([.!?][\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n")
_ABBREVIATIONS = frozenset(["mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "prof", "gen", "col", "lt", "no", "fig", "e.g", "i.e"])


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of sentences (and paragraphs) in ``text``; whitespace between them is excluded."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end(1) if match.group(1) else match.start()
        if match.group(1):
            before = text[max(0, match.start() - 12) : match.start()].split()
            word = before[-1].lower() if before else ""
            if word.rstrip(".") in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        if text[start:end].strip():
            spans.append(_strip(text, start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(_strip(text, start, len(text)))
    return spans


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def chunk_spans(text: str, max_tokens: int, counter: TokenCounter) -> Iterator[tuple[int, int]]:
    """Group consecutive sentences into spans of at most ``max_tokens`` tokens (a longer
    single sentence is split into consecutive pieces that each fit)."""
    group_start: int | None = None
    group_end = 0
    used = 0
    for a, b in sentence_spans(text):
        n = counter.count(text[a:b])
        if n > max_tokens or (group_start is not None and used + n + 1 > max_tokens):
            if group_start is not None:
                yield group_start, group_end
            group_start, used = None, 0
        if n > max_tokens:
            yield from _long_sentence(text, a, b, max_tokens, counter)
            continue
        if group_start is None:
            group_start = a
        group_end = b
        used += n + (1 if used else 0)
    if group_start is not None:
        yield group_start, group_end


def _long_sentence(text: str, a: int, b: int, max_tokens: int, counter: TokenCounter) -> Iterator[tuple[int, int]]:
    """A sentence longer than a chunk, as consecutive pieces of at most ``max_tokens``: nothing is dropped."""
    pos = a
    while pos < b:
        end = pos + max(1, len(counter.truncate(text[pos:b], max_tokens)))  # a prefix (TokenCounter.truncate)
        if text[pos:end].strip():
            yield _strip(text, pos, end)
        pos = end
        while pos < b and text[pos].isspace():
            pos += 1


def chunk_text(text: str, max_tokens: int, counter: TokenCounter) -> list[str]:
    """``text`` as chunks of consecutive sentences of at most ``max_tokens`` tokens."""
    return [text[a:b] for a, b in chunk_spans(text, max_tokens, counter)]
