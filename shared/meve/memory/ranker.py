"""A learned ranking of a chat memory's candidate turns (issue 76): logistic regression over the
per-query features of :mod:`meve.memory.features`, fitted with an L2 penalty by Newton's method
(deterministic: no random start, no sampling), stored as a small JSON file of its feature names,
weights and bias under a format version.

Why logistic regression: seventeen features and a few thousand labelled questions (the memory sets'
dev splits) leave room for a few weights, not for a model that would learn each set's habits; its
weights can be read (what the model does with the latest exchange or the role cue is one number
each), and scoring a candidate pool is one matrix-vector product. Its output is P(the turn is one of
the question's evidence turns), so a turn's worth means the same in every conversation.

No fitted weights ship yet (nothing has been measured): ``benchmarks/memory_ranker.py`` trains and
measures them; shipped weights would be ``meve/weights/memory_ranker.json``
(:data:`SHIPPED`), described by ``meve/weights/MEMORY_RANKER_CARD.md``. Not wired into
:class:`meve.MomentaryMemory`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from meve.core.durable import write_atomically
from meve.core.errors import InputError
from meve.memory.features import NAMES

__all__ = ["FORMAT", "SHIPPED", "VERSION", "Ranker", "fit", "fit_listwise", "order_by_score"]

FORMAT = "meve-memory-ranker"
VERSION = 1
#: Where fitted weights would ship (absent until a measured model is chosen: the module docstring).
SHIPPED = Path(__file__).resolve().parents[1] / "weights" / "memory_ranker.json"
_KEYS = ("format", "version", "features", "weights", "bias", "about")
_ALLOWED = (
    f'a JSON object with "format": "{FORMAT}", "version": {VERSION}, "features" (distinct names among {", ".join(NAMES)}), '
    '"weights" (one finite number per feature), "bias" (a finite number) and optionally "about" (an object)'
)


def _problem(features: Any, weights: Any, bias: Any) -> str | None:
    """What is wrong with a model's parts, or None."""
    if not isinstance(features, list | tuple) or not features or not all(isinstance(f, str) for f in features):
        return f"features {features!r} is not a non-empty list of names"
    unknown = [f for f in features if f not in NAMES]
    if unknown or len(set(features)) != len(features):
        return f"features {unknown or list(features)} are not known or repeat"
    if not isinstance(weights, list | tuple | np.ndarray) or len(weights) != len(features):
        return f"weights must be {len(features)} numbers, one per feature; got {weights!r}"
    if not all(isinstance(w, int | float | np.floating) and not isinstance(w, bool) and math.isfinite(w) for w in weights):
        return f"weights must be finite numbers; got {list(weights)!r}"
    if isinstance(bias, bool) or not isinstance(bias, int | float | np.floating) or not math.isfinite(bias):
        return f"bias must be a finite number; got {bias!r}"
    return None


@dataclass(frozen=True)
class Ranker:
    """A fitted ranker: ``features`` (names of :data:`meve.memory.features.FEATURES`, the columns
    :meth:`score` reads, in order), one weight each, a bias, and ``about`` (what it was fitted on,
    how, and by which command: JSON-ready)."""

    features: tuple[str, ...]
    weights: np.ndarray
    bias: float
    about: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = _problem(list(self.features), list(np.asarray(self.weights, dtype=np.float64).ravel()), self.bias)
        if problem is not None:
            raise InputError(f"Ranker: {problem}; allowed: {_ALLOWED}")
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "weights", np.asarray(self.weights, dtype=np.float64).ravel())
        object.__setattr__(self, "bias", float(self.bias))

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Each row's log-odds of being evidence; ``x``'s columns are :attr:`features`, in order."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.features):
            raise InputError(f"Ranker.score: expected rows of {len(self.features)} features ({', '.join(self.features)}); got shape {x.shape}")
        return np.asarray(x @ self.weights + self.bias)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Each row's probability of being one of the question's evidence turns."""
        return _sigmoid(self.logits(x))

    def relative(self, x: np.ndarray) -> np.ndarray:
        """One query's rows' odds against its best row's, exp(logit - the best logit), in (0, 1]:
        the worth a fill scales to its best candidate, the same for a pointwise or a listwise fit
        (whose logits mean something only within a query)."""
        z = self.logits(x)
        return np.exp(z - z.max()) if len(z) else z

    def to_dict(self) -> dict[str, Any]:
        """The JSON object :meth:`save` writes."""
        out = {"format": FORMAT, "version": VERSION, "features": list(self.features), "weights": self.weights.tolist(), "bias": self.bias}
        return {**out, "about": dict(self.about)}

    def save(self, path: str | Path) -> Path:
        """Write the model to ``path`` (JSON, replaced whole: a crash leaves the old file or the new one)."""
        path = Path(path)
        write_atomically(path, (json.dumps(self.to_dict(), indent=1) + "\n").encode())
        return path

    @classmethod
    def from_dict(cls, raw: Any, where: str = "memory ranker") -> Ranker:
        """A model from the object :meth:`to_dict` gives; ``where`` names it in an error."""
        if not isinstance(raw, dict):
            raise InputError(f"{where}: holds {type(raw).__name__}, not a memory ranker; allowed: {_ALLOWED}")
        extra = sorted(set(raw) - set(_KEYS))
        if extra or raw.get("format") != FORMAT:
            what = f"keys {extra} are not known" if extra else f"format {raw.get('format')!r} is not {FORMAT!r}"
            raise InputError(f"{where}: {what}; allowed: {_ALLOWED}")
        if raw.get("version") != VERSION or isinstance(raw.get("version"), bool):
            raise InputError(f"{where}: version {raw.get('version')!r} is not readable by this meve (it reads version {VERSION}); allowed: {_ALLOWED}")
        problem = _problem(raw.get("features"), raw.get("weights"), raw.get("bias"))
        about = raw.get("about", {})
        if problem is None and not isinstance(about, dict):
            problem = f"about must be an object; got {about!r}"
        if problem is not None:
            raise InputError(f"{where}: {problem}; allowed: {_ALLOWED}")
        return cls(tuple(raw["features"]), np.asarray(raw["weights"], dtype=np.float64), float(raw["bias"]), about)

    @classmethod
    def load(cls, path: str | Path) -> Ranker:
        """Read a model :meth:`save` wrote; a missing, unreadable or malformed file raises
        InputError naming the file and what is allowed."""
        path = Path(path)
        where = f"memory ranker file {path}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{where}: not found; allowed: {_ALLOWED} (Ranker.save writes one)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{where}: not readable as JSON ({exc}); allowed: {_ALLOWED}") from None
        return cls.from_dict(raw, where)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))  # exact, and no overflow for large |z|


def _checked(x: Any, y: Any, names: Sequence[str], l2: float, weight: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64).ravel()
    if x.ndim != 2 or x.shape[1] != len(names) or len(y) != len(x):
        raise ValueError(f"fit: x must be (rows, {len(names)} features) and y one label per row; got {x.shape} and {y.shape}")
    if not np.isfinite(x).all() or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("fit: x must be finite and y 0 or 1")
    if not len(y) or y.min() == y.max():
        raise ValueError("fit: y needs both labels (evidence and not)")
    if not (isinstance(l2, int | float) and math.isfinite(l2) and l2 > 0):
        raise ValueError(f"fit: l2={l2!r} must be a finite number above 0 (without it, separable data has no finite fit)")
    s = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64).ravel()
    if s.shape != y.shape or not np.isfinite(s).all() or (s < 0).any() or not s.sum() > 0:
        raise ValueError("fit: weight must be one finite, non-negative number per row, not all 0")
    return x, y, s / s.sum()


def fit(
    x: Any,
    y: Any,
    *,
    names: Sequence[str] = NAMES,
    l2: float = 1e-3,
    weight: Any = None,
    about: Mapping[str, Any] | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> Ranker:
    """Fit the ranker: minimise the weighted mean log-loss of ``x`` (rows of the ``names``
    features) against ``y`` (1: evidence) plus ``l2``/2 x the squared weights (the bias is not
    penalised), by Newton's method with a backtracking line search, from zero. ``weight``: per row
    (the benchmark gives each data set, and each question within it, the same total). Stops when
    half the Newton decrement falls under ``tol``. Deterministic: the same input gives the same
    weights to the last bit."""
    x, y, s = _checked(x, y, names, l2, weight)
    xa = np.column_stack([x, np.ones(len(x))])
    pen = np.full(xa.shape[1], float(l2))
    pen[-1] = 0.0

    def loss(t: np.ndarray) -> float:
        z = xa @ t
        return float(s @ (np.logaddexp(0.0, z) - y * z) + 0.5 * pen @ (t * t))

    def derivatives(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = _sigmoid(xa @ t)
        return xa.T @ (s * (p - y)) + pen * t, (xa * (s * p * (1.0 - p))[:, None]).T @ xa + np.diag(pen + 1e-12)

    theta, steps = _newton(loss, derivatives, xa.shape[1], max_iter, tol)
    info = {"l2": float(l2), "rows": len(y), "newton_steps": steps, "loss": round(loss(theta), 8)}
    return Ranker(tuple(names), theta[:-1], float(theta[-1]), {**info, **(about or {})})


def fit_listwise(
    x: Any,
    y: Any,
    sizes: Sequence[int],
    *,
    names: Sequence[str] = NAMES,
    l2: float = 1e-3,
    weight: Any = None,
    about: Mapping[str, Any] | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> Ranker:
    """Fit the ranker as a choice among each query's candidates (a conditional logit): ``x``'s rows
    are the queries' candidates one query after another, ``sizes`` how many each has; the loss is
    each query's cross-entropy between the softmax of its logits and its labels spread evenly over
    its evidence turns, weighted by ``weight`` (one per query), plus ``l2``/2 x the squared weights.

    Why: the fill reads only the order within a query, and a pointwise fit spends weights on telling
    one query's level from another's (a long conversation's candidates are rarer evidence). A query
    without an evidence turn among its candidates teaches no order and is left out. No bias (it
    cancels within a query). Newton's method from zero, deterministic."""
    counts = np.asarray(sizes, dtype=np.int64)
    if counts.ndim != 1 or (counts < 1).any():
        raise ValueError("fit_listwise: sizes must be one positive count per query")
    w = np.ones(len(counts)) if weight is None else np.asarray(weight, dtype=np.float64).ravel()
    if w.shape != counts.shape or not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"fit_listwise: weight must be one finite, non-negative number per query ({len(counts)}); got {w.shape}")
    x, y, _ = _checked(x, y, names, l2, None)
    if counts.sum() != len(y):
        raise ValueError(f"fit_listwise: sizes add up to {int(counts.sum())}, not the {len(y)} rows")
    q = _Queries(x, y, counts, w)
    theta, steps = _newton(lambda t: q.value(t, l2), lambda t: q.derivatives(t, l2), x.shape[1], max_iter, tol)
    info = {"l2": float(l2), "objective": "listwise", "rows": len(y), "queries": int((q.w > 0).sum()), "newton_steps": steps}
    return Ranker(tuple(names), theta, 0.0, {**info, "loss": round(q.value(theta, l2), 8), **(about or {})})


def _newton(
    loss: Callable[[np.ndarray], float], derivatives: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], n: int, max_iter: int, tol: float
) -> tuple[np.ndarray, int]:
    """Newton's method from zero with a backtracking line search, for a convex ``loss`` with its
    gradient and Hessian (``derivatives``); stops when half the Newton decrement falls under
    ``tol``. The weights and the steps taken."""
    theta, steps = np.zeros(n), 0
    while steps < max_iter:
        steps += 1
        grad, hess = derivatives(theta)
        step = np.linalg.solve(hess, grad)
        decrement = float(grad @ step)
        if decrement / 2.0 < tol:
            break
        f0, t = loss(theta), 1.0
        while t > 1e-12 and loss(theta - t * step) > f0 - 1e-4 * t * decrement:
            t /= 2.0
        theta = theta - t * step
    return theta, steps


class _Queries:
    """Rows grouped by query for :func:`fit_listwise`: each query's weight (0 for one without
    evidence, normalised to sum 1) and its labels spread over its evidence turns."""

    def __init__(self, x: np.ndarray, y: np.ndarray, counts: np.ndarray, w: np.ndarray) -> None:
        self.x, self.starts = x, np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.gid = np.repeat(np.arange(len(counts)), counts)
        pos = np.add.reduceat(y, self.starts)
        w = np.where(pos > 0, w, 0.0)
        if not w.sum() > 0:
            raise ValueError("fit_listwise: no query with weight has an evidence turn among its candidates")
        self.w, self.ybar = w / w.sum(), y / np.maximum(pos, 1.0)[self.gid]

    def _softmax(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        z = self.x @ t
        zmax = np.maximum.reduceat(z, self.starts)
        e = np.exp(z - zmax[self.gid])
        return z, zmax, e, np.add.reduceat(e, self.starts)

    def value(self, t: np.ndarray, l2: float) -> float:
        """The penalised loss at ``t``."""
        z, zmax, _, tot = self._softmax(t)
        return float(self.w @ (np.log(tot) + zmax - np.add.reduceat(self.ybar * z, self.starts)) + 0.5 * l2 * t @ t)

    def derivatives(self, t: np.ndarray, l2: float) -> tuple[np.ndarray, np.ndarray]:
        """The penalised loss's gradient and Hessian at ``t``."""
        x, w = self.x, self.w
        _, _, e, tot = self._softmax(t)
        p, wr = e / tot[self.gid], w[self.gid]
        m = np.add.reduceat(x * p[:, None], self.starts)
        hess = (x * (wr * p)[:, None]).T @ x - (m * w[:, None]).T @ m + np.eye(len(t)) * (l2 + 1e-12)
        return x.T @ (wr * (p - self.ybar)) + l2 * t, hess


def order_by_score(scores: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Indices of the candidates, best score first; ties to the newer turn (smaller ``age``), then
    to the earlier index."""
    return np.lexsort((np.arange(len(scores)), np.asarray(age), -np.asarray(scores, dtype=np.float64)))
