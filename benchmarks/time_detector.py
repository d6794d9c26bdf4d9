"""The time detector's precision and recall on labelled dev questions (issue 48), and its fitted record.

``dates="auto"`` dates a rebuilt context only for a query :func:`meve.core.config.asks_about_time`
flags. Its words were narrowed by reading LoCoMo's and MemoryBank's dev questions (their temporal
labels: LoCoMo's category 2, a MemoryBank question that names a day or asks for a date), so those
items are recorded as what it was fitted on (``benchmarks/fitted/time_detector.json``); no test
question was read.

    python -m benchmarks.time_detector [--data DIR]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.conversations import locomo, memorybank
from benchmarks.harness.splits import detector_cli
from meve.core.config import asks_about_time

# The fitted record: its name, the knob it describes, and the command that writes it.
RECORD = ("time_detector", "meve.core.config.asks_about_time (dates='auto'), narrowed on labelled dev questions", "python -m benchmarks.time_detector")


def measure(data: Path) -> tuple[dict[str, Any], list[str]]:
    """Per set: precision and recall of the detector against the temporal label, on dev only."""
    items: list[str] = []
    stats: dict[str, Any] = {}
    for name, sets in (("locomo", locomo(data)), ("memorybank", memorybank())):
        qs = [q for c in sets["dev"] for q in c.questions]
        items += [q.id for q in qs]
        tp = sum(q.category == "temporal" and asks_about_time(q.text) for q in qs)
        fp = sum(q.category != "temporal" and asks_about_time(q.text) for q in qs)
        fn = sum(q.category == "temporal" and not asks_about_time(q.text) for q in qs)
        stats[name] = {"precision": round(tp / max(1, tp + fp), 3), "recall": round(tp / max(1, tp + fn), 3), "questions": len(qs), "temporal": tp + fn}
    return stats, items


def main(argv: list[str] | None = None) -> None:
    detector_cli(argv, __doc__ or "", measure, RECORD)


if __name__ == "__main__":
    main()
