"""A user's questions: the JSONL file, its checks, and the deterministic dev/test split.

One JSON object a line: ``question`` (the text), and any of ``answers`` (strings that must occur in
the context as whole normalised words), ``evidence_ids`` (ids of passages in the corpus whose text
must stand in the context) and ``evidence_sentences`` (texts that must stand in the context); an
optional ``id``. Every check runs before any model loads, and a refusal is one line naming the line
number and the field (:class:`~meve.core.errors.InputError`).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meve.core.errors import InputError
from meve.core.text import sentence_spans
from meve.evaluate.metrics import answer_in

__all__ = [
    "FIELDS",
    "Question",
    "Target",
    "as_questions",
    "check_evidence_ids",
    "load_questions",
    "parse_questions",
    "passage_evidence",
    "passage_ids",
    "split_of",
    "split_questions",
    "targets",
]

#: The fields a line may hold.
FIELDS = ("id", "question", "answers", "evidence_ids", "evidence_sentences")
EVIDENCE = ("answers", "evidence_ids", "evidence_sentences")


@dataclass(frozen=True)
class Question:
    """One question of a user's set: its text and what counts as keeping its evidence. ``id``: the
    line's ``id`` ("" when none was given); ``line``: the line it came from (0 when built in Python)."""

    text: str
    id: str = ""
    answers: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    evidence_sentences: tuple[str, ...] = ()
    line: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError(f"{self._where()}field 'question': {self.text!r} is not allowed: expected a non-empty string")
        if not (self.answers or self.evidence_ids or self.evidence_sentences):
            raise InputError(f"{self._where()}no evidence: give at least one of 'answers', 'evidence_ids' or 'evidence_sentences'")

    @property
    def key(self) -> str:
        """What the split hashes: the id when one was given, else the question's text."""
        return self.id or self.text

    @property
    def name(self) -> str:
        """How a report names the question: its id, else its line, else the start of its digest."""
        return self.id or (f"line-{self.line}" if self.line else _digest(self.text)[:12])

    def _where(self) -> str:
        return f"line {self.line}: " if self.line else ""


@dataclass(frozen=True)
class Target:
    """What one question's context is scored against: evidence texts that must stand in it, answer
    strings, and the gold passage ids (passage-level recall, reported beside and labelled)."""

    id: str
    text: str
    answers: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    gold: frozenset[str] = frozenset()
    match: str = "any"  # how several answer strings count (meve.evaluate.metrics.ANSWER_MATCHES)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _strings(value: Any, field: str, line: int) -> tuple[str, ...]:
    """A non-empty list of non-blank strings (``field`` of line ``line``), or a refusal naming both."""
    if not isinstance(value, list) or not value:
        raise InputError(f"line {line}: field {field!r}: {value!r} is not allowed: expected a non-empty list of strings")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise InputError(f"line {line}: field {field!r}: item {item!r} is not allowed: expected a non-blank string")
    return tuple(value)


def _question(raw: Any, line: int) -> Question:
    """One line's object as a Question (its checks, in the order a reader fixes them)."""
    if not isinstance(raw, dict):
        raise InputError(f"line {line}: expected a JSON object with a 'question' field, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        near = difflib.get_close_matches(unknown[0], FIELDS, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise InputError(f"line {line}: field {unknown[0]!r} is not known ({hint}allowed: {', '.join(FIELDS)})")
    if "question" not in raw:
        raise InputError(f"line {line}: field 'question' is missing")
    text = raw["question"]
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"line {line}: field 'question': {text!r} is not allowed: expected a non-empty string")
    qid = raw.get("id")
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip()):
        raise InputError(f"line {line}: field 'id': {qid!r} is not allowed: expected a non-empty string or an int")
    given = {f: _strings(raw[f], f, line) for f in EVIDENCE if f in raw}
    if not given:
        raise InputError(f"line {line}: no evidence field: give at least one of 'answers', 'evidence_ids' or 'evidence_sentences'")
    return Question(text=text, id="" if qid is None else str(qid), line=line, **given)


def parse_questions(lines: Iterable[str]) -> list[Question]:
    """Questions from JSONL lines (blank lines skipped, still counted): each line's checks, then
    duplicate ids across lines."""
    out: list[Question] = []
    seen: dict[str, int] = {}
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {n}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        q = _question(raw, n)
        if q.id and q.id in seen:
            raise InputError(f"line {n}: field 'id': {q.id!r} was already given on line {seen[q.id]}; give each question its own id")
        seen[q.id] = n
        out.append(q)
    if not out:
        raise InputError("no questions: expected one JSON object a line with a 'question' field")
    return out


def load_questions(path: str | os.PathLike[str]) -> list[Question]:
    """Questions from a JSONL file; a refusal names the file, the line and the field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such questions file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: cannot be read as UTF-8 text ({exc})") from None
    try:
        return parse_questions(text.splitlines())
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None


def as_questions(questions: str | os.PathLike[str] | Sequence[Question | Mapping[str, Any]]) -> list[Question]:
    """A path to a JSONL file, Question records, or dicts shaped as the file's lines."""
    if isinstance(questions, str | os.PathLike):
        return load_questions(questions)
    records = [q for q in questions if isinstance(q, Question)]
    if questions and len(records) == len(questions):
        return records  # already checked, and they keep their file's line numbers
    return parse_questions(json.dumps(_as_line(q) if isinstance(q, Question) else q) for q in questions)


def _as_line(q: Question) -> dict[str, Any]:
    line: dict[str, Any] = {"id": q.id, "question": q.text} if q.id else {"question": q.text}
    line.update({f: list(getattr(q, f)) for f in EVIDENCE if getattr(q, f)})
    return line


def _records(ids: Collection[str]) -> dict[str, list[str]]:
    """Record id -> its chunk ids, for the ids ``meve index`` gives chunks (``<record>#<j>@<digest>``)."""
    out: dict[str, list[str]] = {}
    for pid in ids:
        head, sep, tail = pid.rpartition("#")
        if sep and "@" in tail:
            out.setdefault(head, []).append(pid)
    return out


def passage_ids(questions: Sequence[Question], known: Collection[str]) -> dict[str, str]:
    """Each evidence id as a passage id of the corpus: itself, or the one chunk ``meve index`` cut
    its record into. Refuses, naming the line, an id the corpus lacks and a record cut into
    several chunks (whose chunk ids must then be given)."""
    records: dict[str, list[str]] | None = None
    out: dict[str, str] = {}
    for q in questions:
        where = f"line {q.line}: " if q.line else f"question {q.name!r}: "
        for pid in q.evidence_ids:
            if pid in known:
                out[pid] = pid
                continue
            records = _records(known) if records is None else records
            chunks = records.get(pid, [])
            if len(chunks) == 1:
                out[pid] = chunks[0]
            elif chunks:
                raise InputError(f"{where}field 'evidence_ids': {pid!r} was cut into {len(chunks)} chunks ({chunks[0]!r}, ...): give the chunk ids")
            else:
                raise InputError(f"{where}field 'evidence_ids': {pid!r} is not a passage id of the corpus ({len(known)} passages)")
    return out


def check_evidence_ids(questions: Sequence[Question], known: Collection[str]) -> None:
    """Refuse the first evidence id that names no passage of the corpus (:func:`passage_ids`)."""
    passage_ids(questions, known)


def targets(questions: Sequence[Question], passage_text: Mapping[str, str], match: str = "any") -> list[Target]:
    """Each question's evidence as text: its evidence sentences, then each evidence passage's
    (:func:`passage_evidence`); ``match``: how its answer strings count ("any" or "all")."""
    ids = passage_ids(questions, passage_text)
    return [
        Target(
            q.name,
            q.text,
            q.answers,
            (*q.evidence_sentences, *(e for p in q.evidence_ids for e in passage_evidence(passage_text[ids[p]], q.answers))),
            frozenset(ids[p] for p in q.evidence_ids),
            match,
        )
        for q in questions
    ]


def passage_evidence(text: str, answers: Sequence[str]) -> list[str]:
    """What of an evidence passage must stand in the context: its sentences that hold an answer
    string, for a question that has answers (so a passage pruned to its answer sentence keeps its
    evidence, and ``tune`` can choose pruning for users who label by id); else its whole text."""
    held = [text[a:b] for a, b in sentence_spans(text) if answer_in(answers, text[a:b])] if answers else []
    return held or [text]


def split_of(question: Question) -> str:
    """ "dev" when the sha256 of the question's id (its text when it has none) is even, else "test":
    fixed, independent of the file's order and of the other questions."""
    return "dev" if int(_digest(question.key), 16) % 2 == 0 else "test"


def split_questions(questions: Sequence[Question]) -> tuple[list[Question], list[Question]]:
    """(dev, test) by :func:`split_of`, each in the file's order."""
    return [q for q in questions if split_of(q) == "dev"], [q for q in questions if split_of(q) == "test"]
