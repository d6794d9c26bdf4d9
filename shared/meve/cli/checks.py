"""Argument types for the ``meve`` command: every value is checked while the arguments are parsed,
before any model loads or any Chroma client opens, and a refusal is one line naming the value and
what is allowed (exit code 2). Nothing here imports a heavy dependency."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "calibration_file",
    "collection_name",
    "config_file",
    "integer",
    "nonblank",
    "out_file",
    "out_folder",
    "path_text",
    "questions_file",
    "role",
    "session",
    "share",
    "timestamp",
    "unit",
]


def integer(low: int, high: int | None = None, what: str = "") -> Callable[[str], int]:
    """An int in [low, high] (``what`` says what it counts)."""
    allowed = f"an int >= {low}" if high is None else f"an int in [{low}, {high}]"
    allowed += f" ({what})" if what else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected {allowed}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not allowed: expected {allowed}")
        return value

    return parse


def unit(text: str) -> float:
    """A number in [0, 1] (a threshold on the scorer's scale)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected a number in [0.0, 1.0] (the scorer's P(relevant) scale)")
    return value


def nonblank(what: str) -> Callable[[str], str]:
    """A text that is not empty or whitespace."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected a non-empty {what}")
        return text

    return parse


def path_text(text: str) -> str:
    """A directory path that says something (an empty one would mean the working directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected a directory path (an empty path would write into the working directory)")
    return text


def _creatable(path: Path, what: str) -> None:
    """Refuse ``path`` unless it can be made (:func:`meve.core.durable.unwritable_ancestor`)."""
    from meve.core.durable import unwritable_ancestor

    parent = unwritable_ancestor(path)
    if parent is not None:
        where = str(parent)
        raise argparse.ArgumentTypeError(f"{str(path)!r} is not allowed: {where!r} is not a folder this user can write to, so {what} cannot go there")


def out_folder(text: str) -> str:
    """A folder for report files (written, or replaced, inside it), checked before anything runs:
    not a file, and writable (or creatable)."""
    path = Path(path_text(text)).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: it is a file; give a folder for report.json, report.md, report.html and report.png")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed: this user cannot write into that folder")
        return str(path)
    _creatable(path, "the report")
    return str(path)  # written where it was checked: a quoted '--out=~/x' is not expanded by the shell


def out_file(text: str) -> str:
    """A file to write (an existing one is replaced), checked before anything runs: not a folder,
    and in a folder this user can write (or create)."""
    path = Path(path_text(text)).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: it is a folder; give the path of the config file to write (e.g. {str(path / 'config.json')!r})"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: this user cannot write that file")
    _creatable(path, "the file and its report")
    return str(path)  # written where it was checked: a quoted '--out=~/x' is not expanded by the shell (issue 78)


def collection_name(text: str) -> str:
    """A Chroma collection name (the API's rule: :func:`meve.retrieval.chroma.check_collection_name`)."""
    from meve.retrieval.chroma import COLLECTION_RULE, check_collection_name

    try:
        return check_collection_name(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected {COLLECTION_RULE}") from None


def role(text: str) -> str:
    """One of the chat roles memory stores."""
    from meve.memory.records import ROLES

    if text not in ROLES:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected one of {', '.join(ROLES)}")
    return text


def session(text: str) -> str:
    """A session id memory accepts."""
    from meve.core.errors import InputError
    from meve.memory.session import validate_session_id

    try:
        return validate_session_id(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def timestamp(text: str) -> Any:
    """An ISO-8601 timestamp with a timezone."""
    from meve.core.errors import InputError
    from meve.memory.session import parse_timestamp

    try:
        return parse_timestamp(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def calibration_file(text: str) -> Any:
    """A calibration ``meve calibrate --out`` wrote."""
    from meve.pipeline.calibrate import CorpusCalibration

    try:
        return CorpusCalibration.load(text)
    except (OSError, ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a calibration file `meve calibrate --out` wrote ({type(exc).__name__}: {exc})") from None


def share(text: str) -> float:
    """A share in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected a number in (0.0, 1.0] (the share of pseudo-questions whose evidence is kept)")
    return value


def questions_file(text: str) -> Any:
    """A questions file (one JSON object a line), every line checked (:mod:`meve.evaluate.questions`)."""
    from meve.core.errors import InputError
    from meve.evaluate.questions import load_questions

    try:
        return QuestionsFile(text, load_questions(text))
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class QuestionsFile(list):  # type: ignore[type-arg]
    """The questions of a file, and its path (a later refusal, e.g. an evidence id the index lacks, names it)."""

    def __init__(self, path: str, questions: list[Any]) -> None:
        """``questions`` read from ``path``."""
        super().__init__(questions)
        self.path = path


def config_file(text: str) -> Any:
    """A JSON file of MeVeConfig fields (what `meve tune --out` writes)."""
    from meve.core.errors import MeVeError
    from meve.pipeline.config_file import read_config

    try:
        return read_config(text)
    except MeVeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
