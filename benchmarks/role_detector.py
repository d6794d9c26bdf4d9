"""The role cue's precision and reach on labelled dev questions (issue 48, sixth run), and its record.

``role_cue=True`` (:func:`meve.memory.decide.decide_role`) halves the fused score of every turn by
another role than the one a query in one grammatical person asks about. No set labels a question's
person, but every set labels its evidence turns, and their roles are known. So, per set, on dev
questions only:

* ``flagged``: the share of questions the cue fires on (user or assistant);
* ``precision``: of those, the share whose evidence turns are all by the cued role (the cue
  discounts none of the question's evidence);
* ``discounts_evidence``: the flagged questions with an evidence turn by another role (what the cue
  can cost; each such turn still competes at half its score).

The cue was shaped by reading LongMemEval's dev misses and kept by a rule over every set's dev split,
so every set's dev questions are recorded as what it saw (``benchmarks/fitted/role_cue.json``); no
test question was read.

    python -m benchmarks.role_detector [--data DIR]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.conversations import MEMORY_SETS
from benchmarks.harness.splits import detector_cli
from benchmarks.memory_lodo import conversations
from meve.memory.decide import decide_role

# The fitted record: its name, the knob it describes, and the command that writes it.
RECORD = (
    "role_cue",
    "meve.memory.decide.decide_role (role_cue=True, ROLE_DISCOUNT 0.5), shaped and kept on dev questions",
    "python -m benchmarks.role_detector",
)


def measure(data: Path) -> tuple[dict[str, Any], list[str]]:
    """Per set: how often the cue fires on dev questions, and how often it spares their evidence."""
    items: list[str] = []
    stats: dict[str, Any] = {}
    sets = conversations(data)
    for name in MEMORY_SETS:
        flagged = spared = 0
        total = 0
        for conv in sets[name]["dev"]:
            role_of = {t.id: t.role for t in conv.turns}
            for q in conv.questions:
                items.append(q.id)
                total += 1
                role = decide_role(True, q.text)[0]
                if role is None:
                    continue
                flagged += 1
                spared += all(role_of[e] == role for e in q.evidence)
        stats[name] = {
            "questions": total,
            "flagged": round(flagged / max(1, total), 3),
            "precision": round(spared / max(1, flagged), 3),
            "discounts_evidence": flagged - spared,
        }
    return stats, items


def main(argv: list[str] | None = None) -> None:
    detector_cli(argv, __doc__ or "", measure, RECORD)


if __name__ == "__main__":
    main()
