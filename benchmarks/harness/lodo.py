"""Leave-one-dataset-out: the frontier, margins and intervals moved into the library
(:mod:`meve.evaluate.frontier`); the benchmarks import them from here as before."""

from meve.evaluate.frontier import TIE, Scores, choose, envelope_at, frontier_at, gain_interval, margin, margin_interval, tokens_for

__all__ = ["TIE", "Scores", "choose", "envelope_at", "frontier_at", "gain_interval", "margin", "margin_interval", "tokens_for"]
