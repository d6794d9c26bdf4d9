"""What the shipped models can read, and a warning where a corpus, a turn or a query is mostly outside it.

Why: meve's models (all-MiniLM-L6-v2 and the verifiers built on it) were trained on English. Over
text in another script their WordPiece vocabulary sees little but unknown pieces, so every
passage can look alike: an Arabic corpus passed verification whole, and a Chinese query over an
English corpus returned an empty context, with no word of why. The check is by script (what the
vocabulary can spell), so it is cheap and certain; Latin-script languages other than English pass
it and are still read less well (docs/configuration.md, "Languages").
"""

from __future__ import annotations

from collections.abc import Iterable

from meve.core.logs import log

__all__ = ["ENGLISH_MODELS", "latin_share", "warn_if_unreadable"]

#: Name prefixes of the models meve ships or defaults to, all trained on English.
ENGLISH_MODELS = ("all-MiniLM-L6-v2",)
MOSTLY = 0.5  # below this share of Latin letters, a text is "mostly outside" what the models read


def _latin(ch: str) -> bool:
    o = ord(ch)
    return o < 0x250 or 0x1E00 <= o < 0x1F00  # Basic Latin to Latin Extended-B, and Latin Extended Additional


def latin_share(texts: Iterable[str]) -> float | None:
    """The share of the letters in ``texts`` that are Latin script; None when they hold no letter."""
    letters = latin = 0
    for text in texts:
        for ch in text:
            if ch.isalpha():
                letters += 1
                latin += _latin(ch)
    return latin / letters if letters else None


def warn_if_unreadable(what: str, texts: Iterable[str], model: str) -> bool:
    """Log a warning when ``texts`` (``what``: "the query", "the 20 passages being indexed") are
    mostly outside the Latin script and ``model`` is one of meve's English models; whether it did."""
    if not model.startswith(ENGLISH_MODELS):
        return False
    share = latin_share(texts)
    if share is None or share >= MOSTLY:
        return False
    log.warning(
        "meve: %s is mostly outside the Latin script (%.0f%% of its letters); %s was trained on English and cannot tell what is relevant "
        "there, so its scores and verification mean little. Plug in models for that language: embedder= and scorer= "
        "(docs/configuration.md, 'Languages')",
        what,
        100 * (1 - share),
        model,
    )
    return True
