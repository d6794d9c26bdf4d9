"""Sentence-level evidence pruning inside kept passages: a pure phase over given sentence scores."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from meve.core.records import Dropped, Passage
from meve.pipeline.phases import PhaseOutput, rankable

__all__ = ["ANAPHOR", "GAP_MARK", "cut_to_fit", "prune_sentences", "word_windows"]

# A sentence holding a third-person pronoun, or opening with a demonstrative, leans on the one
# before it for its subject.
ANAPHOR = re.compile(r"\b(he|she|it|they|him|her|his|hers|its|their|theirs|them)\b|^\W*(this|these|those|that|such|the latter|the former)\b", re.IGNORECASE)
GAP_MARK = " … "


def prune_sentences(
    candidates: Sequence[Passage],
    spans: Sequence[Sequence[tuple[int, int]]],
    scores: Sequence[Sequence[float] | np.ndarray],
    ratio: float,
    gate: float = 0.0,
) -> PhaseOutput:
    """Sentence-level evidence pruning inside each kept passage.

    Only a passage whose best sentence scores >= ``gate`` is pruned: below it the scorer has
    located no evidence in the passage (one kept for query coverage, say), and a ratio to so low
    a best would choose among noise, so the passage stays whole and is listed in
    ``info["whole_below_gate"]``. A pruned passage keeps its best sentence and every sentence
    scoring >= ``ratio`` x that best, plus, for a kept sentence that holds a third-person pronoun
    or opens with a demonstrative (:data:`ANAPHOR`), the sentences before it back to one that does
    not, so its subject stays in view. Sentences are never split; kept runs keep their order and
    original text, and non-adjacent runs are joined by :data:`GAP_MARK`. Each removed sentence is
    recorded as ``"<id>@<start>-<end>"`` with its score, and ``info["sentences"]`` lists every
    scored sentence per passage as ``[start, end, score, kept]``, so a wrong answer can be traced
    to a sentence pruning removed.
    """
    kept: list[Passage] = []
    dropped: list[Dropped] = []
    below_gate: list[str] = []
    sentences: dict[str, list[list[Any]]] = {}
    n_in = n_kept = n_context = 0
    for cand, sp, sc in zip(candidates, spans, scores, strict=True):
        if len(sp) != len(sc):
            raise ValueError(f"passage {cand.id!r}: {len(sc)} scores for {len(sp)} sentences")
        n_in += len(sp)
        best = float(rankable(sc).max(initial=-np.inf)) if len(sc) else 0.0  # a NaN sentence score ranks lowest
        if len(sp) > 1 and best < gate:
            below_gate.append(cand.id)
        if len(sp) <= 1 or best < gate:
            kept.append(cand)
            n_kept += len(sp)
            sentences[cand.id] = [[a, b, round(float(s), 4), True] for (a, b), s in zip(sp, sc, strict=True)]
            continue
        keep, added = _kept_sentences(cand.text, sp, sc, ratio)
        n_context += added
        runs = _runs(sp, keep)
        for i, (a, b) in enumerate(sp):
            if i not in keep:
                snippet = cand.text[a:b][:60]
                dropped.append(Dropped(f"{cand.id}@{a}-{b}", f"sentence relevance {sc[i]:.3f} < {ratio} x passage best {best:.3f}: {snippet!r}", float(sc[i])))
        n_kept += len(keep)
        sentences[cand.id] = [[a, b, round(float(s), 4), i in keep] for i, ((a, b), s) in enumerate(zip(sp, sc, strict=True))]
        if len(keep) == len(sp):
            kept.append(cand)
        else:
            kept.append(cand.with_(text=GAP_MARK.join(cand.text[a:b] for a, b in runs), spans=tuple(runs), tokens=None))
    info = {"sentences_in": n_in, "sentences_kept": n_kept, "kept_for_context": n_context, "gate": gate, "whole_below_gate": below_gate, "sentences": sentences}
    return PhaseOutput(tuple(kept), tuple(dropped), info)


def _kept_sentences(text: str, sp: Sequence[tuple[int, int]], sc: Sequence[float] | np.ndarray, ratio: float) -> tuple[set[int], int]:
    """Indices of the sentences to keep, and how many of them were added only as context for an anaphor."""
    ranked = rankable(sc)  # NaN ranks lowest: np.argmax would pick it, and it would be the passage's best
    best = float(ranked.max())
    keep = {i for i, s in enumerate(ranked) if s >= ratio * best} | {int(np.argmax(ranked))}
    added = 0
    for i in sorted(keep):
        j = i
        while j > 0 and ANAPHOR.search(text[sp[j][0] : sp[j][1]]):
            j -= 1
            if j not in keep:
                keep.add(j)
                added += 1
    return keep, added


def _runs(sp: Sequence[tuple[int, int]], keep: set[int]) -> list[tuple[int, int]]:
    """Adjacent kept sentences merged into (start, end) runs, in order."""
    runs: list[tuple[int, int]] = []
    for i in sorted(keep):
        if runs and i - 1 in keep:
            runs[-1] = (runs[-1][0], sp[i][1])
        else:
            runs.append(sp[i])
    return runs


#: Characters beyond which a run with no whitespace is not a word (English's longest in common use are under 30).
_RUN = 32


def word_windows(text: str, spans: Sequence[tuple[int, int]], counts: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """``spans`` with each one over ``limit`` tokens (``counts``) split at whitespace into about
    equal parts that fit: a sentence longer than the budget (a table, code, text with no full
    stop) can then still be cut to. A run of text with no whitespace longer than any word of a
    language that spaces its words (:data:`_RUN`: Chinese, Japanese, an inline base64 image) is
    split into pieces of characters first, each about half the limit at the span's tokens per
    character (issue 78 #5: such text was never cut); a word is never split."""
    out: list[tuple[int, int]] = []
    for (a, b), n in zip(spans, counts, strict=True):
        if n <= limit:
            out.append((a, b))
            continue
        chars = max(1, (b - a) * max(1, limit // 2) // max(n, 1))
        words = [
            (i, min(i + step, m.end() + a))
            for m in re.finditer(r"\S+", text[a:b])
            for step in [chars if m.end() - m.start() > _RUN else m.end() - m.start()]
            for i in range(m.start() + a, m.end() + a, step)
        ]
        per = max(1, len(words) * max(1, limit // 2) // max(n, 1))  # about half the limit per part, in words
        out += [(words[i][0], words[min(i + per, len(words)) - 1][1]) for i in range(0, len(words), per)]
    return out


def cut_to_fit(cand: Passage, spans: Sequence[tuple[int, int]], scores: Sequence[float] | np.ndarray, limit: int, count: Any) -> Passage | None:
    """``cand`` cut to the run of sentences around its best one (``scores``, the verifier's) that
    fits in ``limit`` tokens (``count``: text -> tokens): from the best sentence the run grows
    by the better-scored neighbour, before or after, while it fits. One contiguous excerpt, so a
    sentence keeps what it leans on (a table's header row, the subject of "it"); None if not even
    the best sentence fits. Each sentence is counted once, with the whitespace before it, and the
    run's cost summed from those (growing by recounting the whole run was quadratic: 2.8 s at
    t_max 8192); the chosen run is then counted whole, and trimmed at its lower-scored end in the
    rare case its joins tokenise longer than the sum."""
    ranked = rankable(scores)
    best = int(np.argmax(ranked))
    text = cand.text
    bare = [count(text[a:b]) for a, b in spans]
    if bare[best] > limit:
        return None
    with_gap = np.cumsum([0] + [count(text[spans[i - 1][1] : spans[i][1]]) for i in range(1, len(spans))])

    def cost(lo: int, hi: int) -> int:  # sentence lo bare, then each later one with the gap before it
        return int(bare[lo] + with_gap[hi] - with_gap[lo])

    lo = hi = best
    while True:
        options = [j for j in (lo - 1, hi + 1) if 0 <= j < len(spans)]
        fits = [j for j in sorted(options, key=lambda j: -ranked[j]) if cost(min(lo, j), max(hi, j)) <= limit]
        if not fits:
            break
        lo, hi = min(lo, fits[0]), max(hi, fits[0])
    while (tokens := count(text[spans[lo][0] : spans[hi][1]])) > limit and lo < hi:
        lo, hi = (lo + 1, hi) if lo < best and (hi == best or ranked[lo] <= ranked[hi]) else (lo, hi - 1)
    start, end = spans[lo][0], spans[hi][1]
    return cand.with_(text=text[start:end], spans=in_stored_text(cand, start, end), tokens=tokens)


def in_stored_text(cand: Passage, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """Characters ``start:end`` of ``cand.text`` as spans of the stored text: the same span for a
    whole passage; for one pruning already cut (its text the kept spans joined by :data:`GAP_MARK`),
    the parts of those spans the range covers (issue 78 #6: they were offsets into the pruned text)."""
    if cand.spans is None:
        return ((start, end),)
    out: list[tuple[int, int]] = []
    pos = 0
    for i, (a, b) in enumerate(cand.spans):
        pos += len(GAP_MARK) if i else 0
        lo, hi = max(start, pos), min(end, pos + b - a)
        if lo < hi:
            out.append((a + lo - pos, a + hi - pos))
        pos += b - a
    return tuple(out)
