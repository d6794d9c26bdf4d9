"""Platt scaling: one score mapped to P(relevant), fitted by Newton's method, saved as safetensors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from meve.core.errors import ConfigError

__all__ = ["CALIBRATION_PATH", "COMPRESSED_CALIBRATION_PATH", "Calibration", "fit_platt"]

CALIBRATION_PATH = Path(__file__).resolve().parents[1] / "weights" / "late_interaction.safetensors"
# The same scaling refitted on the same pairs with token vectors read back from the 32-byte store:
# compression lowers MaxSim (a centroid is near, not at, each token), so the int8 scaling would read low.
COMPRESSED_CALIBRATION_PATH = CALIBRATION_PATH.with_name("late_interaction_pq32.safetensors")


@dataclass(frozen=True)
class Calibration:
    """Platt scaling: ``P(relevant) = sigmoid(a * raw + b)``."""

    a: float
    b: float

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        return np.asarray(1.0 / (1.0 + np.exp(-(self.a * np.asarray(raw, dtype=np.float64) + self.b))), dtype=np.float64)

    def save(self, path: str | Path, metadata: dict[str, str] | None = None) -> None:
        from safetensors.numpy import save_file

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_file({"platt": np.array([self.a, self.b], dtype=np.float64)}, str(path), metadata=metadata or {})

    @classmethod
    def load(cls, path: str | Path = CALIBRATION_PATH) -> Calibration:
        from safetensors.numpy import load_file

        try:
            a, b = (float(x) for x in load_file(str(path))["platt"])
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError("calibration", str(path), f"a safetensors file with a 'platt' tensor [a, b] (loading failed: {exc})") from exc
        return cls(a, b)


def fit_platt(raw: np.ndarray, labels: np.ndarray, iterations: int = 100, l2: float = 1e-6) -> Calibration:
    """Logistic regression of labels on one score (Newton's method; two parameters need nothing more)."""
    x = np.asarray(raw, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2 or len(set(y.tolist())) != 2:
        raise ValueError("fit_platt needs matching 1-d scores and 0/1 labels with both classes present")
    design = np.stack([x, np.ones_like(x)], axis=1)
    w = np.zeros(2)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        grad = design.T @ (p - y) + l2 * w
        hess = design.T @ (design * (p * (1 - p))[:, None]) + l2 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return Calibration(float(w[0]), float(w[1]))
