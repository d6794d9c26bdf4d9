"""One question set over one index: the top-k curves, each MeVe setting's row, its margin over
the frontier at its own tokens and the margin's paired bootstrap interval, as a :class:`Report`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meve.core.durable import write_atomically
from meve.core.tokens import TokenCounter
from meve.evaluate import frontier
from meve.evaluate.arms import BASELINES, KS, Rankings, Scorable, meve_system, score, topk_system

__all__ = ["METRIC", "Points", "Report", "arm_summary", "measure_arm", "measure_curves"]

METRIC = (
    "evidence kept, counted on the text of the context: the share of a question's evidence (its evidence sentences and the texts of its "
    "evidence passages) that stands in the context; a question with answer strings only counts 1 when an answer occurs in the context as "
    "whole normalised words"
)
#: each ranking's (k, per-question (evidence, tokens)) points
Points = dict[str, list[tuple[int, list[tuple[float, float]]]]]
Curves = dict[str, list[dict[str, Any]]]


def measure_curves(
    rankings: Rankings,
    questions: Sequence[Scorable],
    counter: TokenCounter,
    *,
    ks: Sequence[int] = KS,
    baselines: Sequence[str] = BASELINES,
    points: Points | None = None,
    tick: Callable[[], Any] | None = None,
) -> Curves:
    """Every top-k curve (``points`` collects each point's per-question scores, for intervals)."""
    out: Curves = {}
    for name in baselines:
        out[name] = []
        for k in ks:
            scores: list[tuple[float, float]] = []
            out[name].append({"k": k, **score(topk_system(rankings, name, k), questions, counter, scores=scores, tick=tick)})
            if points is not None:
                points.setdefault(name, []).append((k, scores))
    return out


def measure_arm(
    rankings: Rankings, questions: Sequence[Scorable], counter: TokenCounter, setting: Mapping[str, Any], *, tick: Callable[[], Any] | None = None
) -> tuple[dict[str, Any], list[tuple[float, float]]]:
    """MeVe with ``setting`` (MeVeConfig fields over the MeVe's own config): its row (the setting,
    its means, the share of empty contexts) and each question's (evidence, tokens)."""
    scores: list[tuple[float, float]] = []
    kept: list[Any] = []
    row = {**setting, **score(meve_system(rankings, setting), questions, counter, keep=kept, scores=scores, tick=tick)}
    row["empty_rate"] = round(sum(not r.documents for r in kept) / max(1, len(kept)), 4)
    return row, scores


def arm_summary(arm: Mapping[str, Any], curves: Curves, reference: float, interval: tuple[float, float] | None = None) -> dict[str, Any]:
    """A row with its margin over the frontier (and the margin's paired bootstrap interval, when
    given) and the tokens the frontier needs for its evidence; ``reference``: the dense top-3's tokens."""
    need = frontier.tokens_for(curves, arm["evidence"])
    return {
        **arm,
        "frontier_at_tokens": round(frontier.frontier_at(curves, arm["tokens"]), 4),
        "margin": round(frontier.margin(arm, curves), 4),
        **({} if interval is None else {"margin_ci95": [round(interval[0], 4), round(interval[1], 4)]}),
        "frontier_tokens_for_same_evidence": None if need is None else round(need, 1),
        "token_saving_at_equal_evidence": None if need is None or need == 0 else round(1 - arm["tokens"] / need, 4),
        "tokens_vs_dense_top3": round(arm["tokens"] / reference, 4) if reference else None,
    }


def reference_tokens(curves: Curves) -> float:
    """The token scale of the choice's tie-break: the dense top-3's mean tokens (its largest k below 3 when shorter)."""
    rows = [r for r in curves.get("dense", []) if r["k"] <= 3] or next(iter(curves.values()))
    return float(rows[-1]["tokens"]) or 1.0


@dataclass
class Report:
    """What :func:`meve.evaluate.evaluate` measured: ``curves`` (each top-k ranking's rows, k =
    1..10), ``arms`` (each MeVe setting's row with ``margin`` over the frontier and its
    ``margin_ci95``), the number of questions and passages, and notes (why a default was kept,
    what was split). :meth:`save` writes it as JSON, Markdown, HTML and the frontier PNG."""

    questions: int
    passages: int
    curves: Curves
    arms: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def verdict(self, arm: str | None = None) -> str:
        """One sentence on what the figures mean for ``arm`` (default the first): better, no better,
        or worse than top-k at equal tokens, and how sure (its margin's 95% interval)."""
        label = arm if arm is not None else next(iter(self.arms))
        row = self.arms[label]
        m = float(row["margin"])
        lo, hi = row.get("margin_ci95") or (m, m)
        if lo > 0:
            word, sure = "better than", "the 95% interval lies wholly above zero"
        elif hi < 0:
            word, sure = "worse than", "the 95% interval lies wholly below zero"
        else:
            word, sure = "no better or worse than", "the 95% interval spans zero: these questions cannot tell the two apart"
        return (
            f"MeVe ({label}) is {word} top-k at equal tokens on these {self.questions} questions: it keeps {row['evidence']:.3f} of the "
            f"evidence in {row['tokens']:.0f} tokens where the best top-k curve keeps {row['frontier_at_tokens']:.3f}, a margin of "
            f"{m:+.3f} (95% interval {lo:+.3f} to {hi:+.3f}); {sure}."
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data, led by :meth:`verdict`."""
        return {
            "verdict": self.verdict() if self.arms else None,
            "metric": METRIC,
            "questions": self.questions,
            "passages": self.passages,
            "arms": self.arms,
            "curves": self.curves,
            "notes": list(self.notes),
            **self.extra,
        }

    def on_or_above_frontier(self, arm: str) -> bool:
        """Whether ``arm``'s margin over the frontier is >= 0."""
        return float(self.arms[arm]["margin"]) >= 0.0

    def to_markdown(self) -> str:
        """The tables (arms against the frontier; the top-k curves) as Markdown."""
        from meve.evaluate.render import markdown

        return markdown(self.to_dict())

    def save(self, folder: str | os.PathLike[str], stem: str = "report") -> dict[str, Path]:
        """Write ``<stem>.json``, ``<stem>.md``, ``<stem>.html`` (self-contained: the tables and
        the plot inline) and, with matplotlib installed (``pip install "meve[plot]"``),
        ``<stem>.png`` into ``folder``; returns what was written, by kind."""
        from meve.evaluate.render import html, plot_png

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        written = {"json": out / f"{stem}.json", "md": out / f"{stem}.md", "html": out / f"{stem}.html"}
        write_atomically(written["json"], (json.dumps(data, indent=1, default=str) + "\n").encode("utf-8"))
        write_atomically(written["md"], markdown_bytes(data))
        png = plot_png(data, required=False)
        if png is not None:
            written["png"] = out / f"{stem}.png"
            write_atomically(written["png"], png)
        write_atomically(written["html"], html(data, png).encode("utf-8"))
        return written


def markdown_bytes(data: Mapping[str, Any]) -> bytes:
    """:func:`meve.evaluate.render.markdown` as UTF-8."""
    from meve.evaluate.render import markdown

    return markdown(data).encode("utf-8")
