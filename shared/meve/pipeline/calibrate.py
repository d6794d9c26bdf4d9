"""Calibration on a user's own corpus, with no labels: choose tau and the adaptive cut for a
stated evidence-recall target.

The recipe: take a sentence out of a passage; it is a pseudo-question whose evidence is the rest
of that passage (the passage less the sentence, so the answer is not found by copying the
question). For each, retrieve the corpus's candidates as MeVe would, swap the source passage for
its remainder, and score them with the MeVe's scorer. Each verification rule (tau alone at a
range of values, the score-gap cut, the ratio cut) then keeps a known share of the evidence and a
known number of passages; the chosen rule is the one that keeps the fewest passages while keeping
the evidence for at least ``target`` of the pseudo-questions. Bounded: ``queries`` pseudo-questions,
each one retrieval and one scoring of ``k_init`` passages.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from meve.core.durable import write_atomically
from meve.core.errors import ConfigError, InputError
from meve.core.formats import FORMATS, found_format
from meve.core.text import sentence_spans
from meve.pipeline.phases import head_threshold

if TYPE_CHECKING:
    from meve.pipeline.meve import MeVe

__all__ = ["CorpusCalibration", "calibrate", "pseudo_queries"]

TAUS = tuple(round(t, 2) for t in np.arange(0.05, 0.96, 0.05))
CUTS = (("gap", 0.8), ("ratio", 0.5), ("ratio", 0.8))


@dataclass(frozen=True)
class CorpusCalibration:
    """What :func:`calibrate` chose and measured: ``config`` holds the MeVeConfig fields to use
    (``MeVeConfig(**c.config)``, or ``meve.run(q, **c.config)``); ``options`` every rule tried with
    the share of pseudo-questions whose evidence it kept and the passages it kept on average."""

    config: dict[str, Any]
    target: float
    recall: float
    kept: float
    queries: int
    options: list[dict[str, Any]] = field(default_factory=list)
    scorer: str = ""

    def save(self, path: str | Path) -> Path:
        """Write it as JSON, whole or not at all, with its format (read back with :meth:`load`)."""
        out = Path(path)
        write_atomically(out, (json.dumps({"format": FORMATS["config_file"], **asdict(self)}, indent=1) + "\n").encode("utf-8"))
        return out

    @classmethod
    def load(cls, path: str | Path) -> CorpusCalibration:
        """A calibration :meth:`save` wrote (one without ``format`` predates the marker: the same fields)."""
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        found_format("config_file", raw.pop("format", None), where=str(path))
        return cls(**raw)


def pseudo_queries(ids: Sequence[str], texts: Sequence[str], n: int, seed: int = 0, min_words: int = 6) -> list[tuple[str, str, str]]:
    """Up to ``n`` (passage id, pseudo-question, the passage less that sentence): one sentence of
    at least ``min_words`` words from a passage of at least three sentences, chosen with ``seed``."""
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    out = []
    for i in order:
        spans = sentence_spans(texts[i])
        usable = [j for j, (a, b) in enumerate(spans) if len(texts[i][a:b].split()) >= min_words]
        if len(spans) < 3 or not usable:
            continue
        j = rng.choice(usable)
        a, b = spans[j]
        rest = " ".join(texts[i][x:y] for k, (x, y) in enumerate(spans) if k != j)
        out.append((ids[i], texts[i][a:b], rest))
        if len(out) >= n:
            break
    return out


def _rule_stats(scores: list[np.ndarray], tau: float, cut: str, ratio: float) -> tuple[float, float]:
    """(share of pseudo-questions whose evidence, scores[q][0], is kept; mean passages kept)."""
    hits, kept = 0, 0
    for s in scores:
        head = head_threshold(s.tolist(), cut, ratio)
        floor = max(tau, head[0] if head is not None else -np.inf)
        keep = s >= floor
        hits += bool(keep[0])
        kept += int(keep.sum())
    return hits / len(scores), kept / len(scores)


def calibrate(meve: MeVe, *, target: float = 0.9, queries: int = 200, seed: int = 0, show_progress: bool = False) -> CorpusCalibration:
    """Choose tau and the cut for ``meve``'s corpus and scorer (module docstring). ``target``: the
    share of pseudo-questions whose evidence must be kept, in (0, 1]."""
    from tqdm.auto import tqdm

    if isinstance(target, bool) or not isinstance(target, int | float) or not 0.0 < target <= 1.0:
        raise ConfigError("target", target, "a number in (0.0, 1.0]: the share of pseudo-questions whose evidence must be kept")
    if isinstance(queries, bool) or not isinstance(queries, int) or not 10 <= queries <= 100_000:
        raise ConfigError("queries", queries, "an int in [10, 100000] (pseudo-questions drawn from the corpus)")
    if meve.store is None:
        raise InputError("calibrate needs a flat passage store; this MeVe was built with from_documents")
    ids, texts = meve.store.documents()
    pairs = pseudo_queries(ids, texts, queries, seed)
    if len(pairs) < 10:
        raise InputError(f"the corpus yields {len(pairs)} pseudo-questions (passages of 3+ sentences); calibration needs at least 10")
    scorer, k = meve.scorer, meve.config.k_init
    scores = []
    for pid, question, rest in tqdm(pairs, desc="meve: calibrating", unit="question", disable=not show_progress):
        others = [p.text for p in meve.store.query(meve.embedder.encode([question])[0], k + 1) if p.id != pid][: k - 1]
        scores.append(np.asarray(scorer.score(question, [rest, *others]), dtype=np.float64))
    options: list[dict[str, Any]] = [{"tau": float(t), "cut": "none", "cut_ratio": 0.8} for t in TAUS] + [
        {"tau": t, "cut": c, "cut_ratio": r} for c, r in CUTS for t in (0.05, 0.1, 0.2)
    ]
    for o in options:
        o["recall"], o["kept"] = (round(x, 4) for x in _rule_stats(scores, o["tau"], o["cut"], o["cut_ratio"]))
    meeting = [o for o in options if o["recall"] >= target]
    best = min(meeting, key=lambda o: (o["kept"], -o["recall"])) if meeting else max(options, key=lambda o: (o["recall"], -o["kept"]))
    config = {"tau": best["tau"], "cut": best["cut"], "cut_ratio": best["cut_ratio"]}
    return CorpusCalibration(config, target, best["recall"], best["kept"], len(pairs), options, scorer.name)
