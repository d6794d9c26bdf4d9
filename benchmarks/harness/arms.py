"""The systems compared, each mapping a question to (passage ids, the context as the model reads
it), and their evaluation on a split: moved into the library (:mod:`meve.evaluate.arms`). Every
system's context is rendered the same way: passages joined by a blank line (MeVe's separator),
counted by the same token counter."""

from __future__ import annotations

from meve.evaluate.arms import BASELINES, KS, SEP, System, meve_system, topk_system
from meve.evaluate.arms import score as evaluate

__all__ = ["BASELINES", "KS", "SEP", "System", "evaluate", "meve_system", "topk_system"]
