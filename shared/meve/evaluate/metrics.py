"""Evidence counted by the text the model reads.

A context keeps a piece of evidence when the evidence sentence's text stands in it (whitespace
normalised): a passage whose id survived pruning but whose evidence sentence was cut keeps
nothing. Answer strings match as whole normalised words. Passage-id recall is computed beside,
labelled as such, and never used to choose anything.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import numpy as np

__all__ = ["ANSWER_MATCHES", "answer_in", "answer_score", "check_match", "evidence_recall", "normalise", "passage_recall", "summarise"]

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Whitespace runs as one space, trimmed (sentences are matched on this)."""
    return _SPACE.sub(" ", text).strip()


def evidence_recall(evidence: Sequence[str], context: str) -> float:
    """Share of the evidence sentences whose text stands in ``context``."""
    if not evidence:
        return 0.0
    ctx = normalise(context)
    return sum(normalise(e) in ctx for e in evidence) / len(evidence)


# SQuAD's normalisation treats every punctuation mark as punctuation; "\w" counts "_" as a letter,
# so Markdown emphasis (_test double_) and snake_case stuck to their words and missed. A "+" or "#"
# right after a letter or digit is part of the word (C++, C#, NADP+): dropped, "C++" matched "Option C".
_PUNCT = re.compile(r"(?<![\w+#])[+#]+|[^\w\s+#]|_")


def _words(text: str) -> str:
    text = re.sub(r"\b(a|an|the)\b", " ", _PUNCT.sub(" ", text.lower()))
    return f" {' '.join(text.split())} "


def answer_in(answers: Sequence[str], context: str) -> bool:
    """A gold answer occurs in ``context`` as a run of whole normalised words (SQuAD's
    normalisation: lower case, punctuation (``_``, ``*``, backticks, brackets included) and
    articles removed, whitespace collapsed): ``_test double_``, ``**test double**``,
    `` `test double` `` and ``[test double](url)`` all hold the answer "test double", and
    ``snake_case`` holds "snake case" (and "snake_case"). A "+" or "#" after a letter or digit
    stays part of its word ("C++" is not in "Option C"); an answer with no word left after
    normalisation ("A", "The") matches nothing."""
    ctx = _words(context)
    # An answer with no word left ("A", "The", ".") is in every context, an empty one too: it never counts.
    return any(w.strip() and w in ctx for w in map(_words, answers))


#: How a question's several answer strings count: "any" (alternatives: one occurring is enough, the
#: default, as SQuAD's several annotators' answers) or "all" (each must occur: the share that do).
ANSWER_MATCHES = {
    "any": "a question's answer strings are alternatives: it counts 1 when any one of them occurs in the context as whole words",
    "all": "a question's answer strings must all occur: it counts the share of them that occur in the context as whole words",
}


def check_match(match: str) -> str:
    """``match`` if it is one of :data:`ANSWER_MATCHES`, else a refusal naming it."""
    if match not in ANSWER_MATCHES:
        from meve.core.errors import InputError

        raise InputError(f"answers={match!r}: expected 'any' (the strings are alternatives) or 'all' (each must occur)")
    return match


def answer_score(answers: Sequence[str], context: str, match: str = "any") -> float:
    """``answers`` held by ``context`` (:func:`answer_in`), counted as ``match`` says (:data:`ANSWER_MATCHES`)."""
    if match == "all":
        return sum(answer_in([a], context) for a in answers) / len(answers) if answers else 0.0
    return float(answer_in(answers, context))


def passage_recall(gold: Collection[str], kept_ids: Collection[str]) -> float:
    """Share of the gold passages whose id is in the context, in whole or in part (passage-level: labelled as such)."""
    if not gold:
        return 0.0
    kept = set(kept_ids)
    return sum(g in kept for g in gold) / len(gold)


def summarise(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Means over questions, rounded: each over the questions that have it (the answer rate over
    those with answer strings, passage recall over those with evidence ids); a key no question
    has is left out (unknown), never reported as 0."""
    out: dict[str, float] = {"questions": float(len(rows))}
    for key in ("evidence", "all_evidence", "passages", "tokens", "ms"):
        vals = [r[key] for r in rows if key in r]
        if vals:
            out[key] = round(float(np.mean(vals)), 4)
    answered = [r["answer"] for r in rows if "answer" in r]
    if answered:
        out["answer"] = round(float(np.mean(answered)), 4)
    ms = [r["ms"] for r in rows if "ms" in r]
    if ms:
        out["ms_p50"] = round(float(np.percentile(ms, 50)), 2)
    return out
