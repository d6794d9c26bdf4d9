"""Shared benchmark plumbing: data paths, an on-disk embedding cache, timing, machine facts."""

from __future__ import annotations

import hashlib
import os
import platform
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CACHE = ROOT / "benchmarks" / ".cache"


def data_dir(option: str | None) -> Path:
    path = Path(option or os.environ.get("MEVE_DATA") or ROOT.parent / "shared" / "data")
    if not path.exists():
        raise SystemExit(f"benchmark data not found at {path}: pass --data DIR (the folder holding hotpotqa/, locomo/, wikipedia/)")
    return path


class DiskCachedEmbedder:
    """Embeds each distinct text once, ever: vectors persist in benchmarks/.cache between runs."""

    def __init__(self, inner: Any, tag: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = CACHE / f"emb-{tag}.npz"
        self._lock = threading.Lock()
        self._index: dict[str, int] = {}
        self._rows: list[np.ndarray] = []
        self._dirty = False
        self.computed = 0
        if self.path.exists():
            data = np.load(self.path)
            for i, key in enumerate(data["keys"].tolist()):
                self._index[key] = i
            self._rows = list(data["vecs"])

    @property
    def dimension(self) -> int:
        return int(getattr(self.inner, "dimension", 384))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        with self._lock:
            missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in self._index))
        if missing:
            vecs = self.inner.encode([t for _, t in missing])
            with self._lock:
                for (k, _), v in zip(missing, vecs, strict=True):
                    if k not in self._index:
                        self._index[k] = len(self._rows)
                        self._rows.append(np.asarray(v, dtype=np.float32))
                self.computed += len(missing)
                self._dirty = True
        with self._lock:
            return np.stack([self._rows[self._index[k]] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32)

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            CACHE.mkdir(parents=True, exist_ok=True)
            keys = np.array(sorted(self._index, key=self._index.__getitem__))
            np.savez(self.path, keys=keys, vecs=np.stack(self._rows))
            self._dirty = False


_embedder: DiskCachedEmbedder | None = None


def embedder() -> DiskCachedEmbedder:
    global _embedder
    if _embedder is None:
        from meve import SentenceTransformerEmbedder

        _embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(), "all-MiniLM-L6-v2")
    return _embedder


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def machine() -> dict[str, Any]:
    import chromadb
    import torch

    import meve

    info = {
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "chromadb": chromadb.__version__,
        "meve": meve.__version__,
        "device": "cpu",
    }
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
        info["cpu"] = model
    except OSError:
        pass
    return info
