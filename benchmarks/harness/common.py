"""Shared benchmark plumbing: data paths, on-disk caches of embeddings and token vectors, timing,
machine facts, SQuAD helpers. Splits come from :mod:`benchmarks.harness.splits`."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.splits import squad_halves
from meve.core.durable import write_atomically
from meve.scoring.late_interaction import LateInteractionScorer, TokenVectorCache, text_key
from meve.scoring.protocols import Scoring

ROOT = Path(__file__).resolve().parents[2]
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
        self._windows_path = CACHE / f"windows-{tag}.npz"
        self._windows: dict[str, np.ndarray] | None = None  # read on first use
        self._windows_dirty = False
        # The file, then any side files ``emb-<tag>+<what>.npz``: vectors of the same model computed
        # elsewhere (a GPU; DATA.md says which and how they were checked against this CPU's). The next
        # save() folds them into the file.
        for path in [self.path, *sorted(CACHE.glob(f"emb-{tag}+*.npz"))] if CACHE.exists() else []:
            if path.exists():
                data = np.load(path)
                vecs = np.asarray(data["vecs"], dtype=np.float32)
                if vecs.ndim != 2 or (self._rows and vecs.shape[1] != len(self._rows[0])):
                    raise ValueError(f"{path.name}: vectors of shape {vecs.shape}, not rows of {len(self._rows[0]) if self._rows else 'any'} floats")
                for key, vec in zip(data["keys"].tolist(), vecs, strict=True):
                    if key not in self._index:
                        self._index[key] = len(self._rows)
                        self._rows.append(vec)

    @property
    def dimension(self) -> int:
        return int(getattr(self.inner, "dimension", 384))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        with self._lock:
            missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in self._index))
        if missing:
            self._insert([k for k, _ in missing], self.inner.encode([t for _, t in missing]))
            self.computed += len(missing)
        with self._lock:
            return np.stack([self._rows[self._index[k]] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32)

    def encode_windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's later windows' vectors (meve.scoring.token_pass.Pass), as the inner
        embedder makes them, cached on disk in ``windows-<tag>.npz`` (rows, and each text's first
        row and count)."""
        if self._windows is None:
            self._windows = {}
            if self._windows_path.exists():
                data = np.load(self._windows_path)
                rows = np.asarray(data["rows"], dtype=np.float32)
                for key, start, n in zip(data["keys"].tolist(), data["starts"].tolist(), data["counts"].tolist(), strict=True):
                    self._windows[key] = rows[start : start + n]
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts, strict=True) if k not in self._windows))
        if missing:
            for (key, _), w in zip(missing, self.inner.encode_windows([t for _, t in missing]), strict=True):
                self._windows[key] = np.asarray(w, dtype=np.float32)
            self._windows_dirty = True
        return [self._windows[k] for k in keys]

    def put(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        """Vectors of ``texts`` computed elsewhere by the same model (a forward pass that also gave token vectors)."""
        self._insert([hashlib.sha1(t.encode()).hexdigest() for t in texts], vecs)

    def _insert(self, keys: Sequence[str], vecs: np.ndarray) -> None:
        with self._lock:
            for key, v in zip(keys, vecs, strict=True):
                if key not in self._index:
                    self._index[key] = len(self._rows)
                    self._rows.append(np.asarray(v, dtype=np.float32))
                    self._dirty = True

    def save(self) -> None:
        if self._windows is not None and self._windows_dirty:
            names = list(self._windows)
            counts = np.array([len(self._windows[k]) for k in names], dtype=np.int64)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            rows = np.concatenate([self._windows[k] for k in names]) if counts.sum() else np.zeros((0, self.dimension), np.float32)
            CACHE.mkdir(parents=True, exist_ok=True)
            write_atomically(self._windows_path, lambda fh: np.savez(fh, keys=np.array(names), starts=starts, counts=counts, rows=rows))
            self._windows_dirty = False
        with self._lock:
            if not self._dirty:
                return
            CACHE.mkdir(parents=True, exist_ok=True)
            keys = np.array(sorted(self._index, key=self._index.__getitem__))
            vecs = np.stack(self._rows)
            # Atomically: a run killed mid-write, or a second benchmark process reading, sees the old file or the new one.
            write_atomically(self.path, lambda fh: np.savez(fh, keys=keys, vecs=vecs))
            self._dirty = False


_embedder: DiskCachedEmbedder | None = None


def embedder() -> DiskCachedEmbedder:
    global _embedder
    if _embedder is None:
        from meve import SentenceTransformerEmbedder

        _embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(), "all-MiniLM-L6-v2")
    return _embedder


# The MeVeConfig fields a benchmark's grid varies (and that its results report).
MEVE_KNOBS = ("candidates", "tau", "cut", "cut_ratio", "coverage", "coverage_floor", "n_min", "prune", "prune_ratio", "prune_gate", "theta_redundancy")


def acting(cfg: dict[str, Any]) -> dict[str, Any]:
    """The knobs of a MeVe setting that act: cut_ratio only with cut "ratio", prune_ratio only
    with pruning, coverage_floor only with coverage (the grid and MeVeConfig carry different idle values).
    prune_gate 0 is idle too: grids before 2026-11-24 have no gate, which is the same as a gate of 0."""
    idle = {"cut_ratio"} if cfg["cut"] != "ratio" else set()
    idle |= {"prune_ratio", "prune_gate"} if cfg["prune"] == "none" else set()
    idle |= {"prune_gate"} if not cfg.get("prune_gate") else set()
    idle |= {"coverage_floor"} if not cfg.get("coverage") else set()  # grids before 2026-11-24 have no coverage
    return {k: v for k, v in cfg.items() if k not in idle}


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def write_result(name: str, out: dict[str, Any], command: str) -> Path:
    """Write a benchmark's ``out`` to benchmarks/results/<name>.json with its command, the date and the machine."""
    from datetime import datetime, timezone

    path = RESULTS / f"{name}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = {"command": command, "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps({**out, **stamp, "machine": machine()}, indent=2, default=str))
    print(f"wrote {path.relative_to(ROOT)}", flush=True)
    return path


def dev_main(name: str, run: Callable[[Path], dict[str, Any]], doc: str | None, argv: list[str] | None = None) -> Path:
    """The command line of a benchmark that reads the dev splits only: ``--data``, then ``run``'s
    result written to benchmarks/results/<name>.json under the command ``python -m benchmarks.<name>``."""
    args = parser(doc).parse_args(argv)
    return write_result(name, run(data_dir(args.data)), f"python -m benchmarks.{name}")


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A memory benchmark's command line: its docstring's first line, and ``--data`` (the folder
    holding the data sets; default ../shared/data)."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--data", help="folder holding locomo/ (default ../shared/data)")
    return ap


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


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def squad(path: Path) -> list[dict[str, Any]]:
    """A SQuAD-format file (gzip or plain JSON): its list of articles."""
    import gzip
    import json

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data: list[dict[str, Any]] = json.load(fh)["data"]
    return data


def squad_dev_split(titles: Sequence[str]) -> dict[str, str]:
    """The registry's SQuAD halves (:func:`benchmarks.harness.splits.squad_halves`), named as the
    tuning scripts read them: "tune" (the registry's dev) and "test"."""
    return {t: ("tune" if s == "dev" else "test") for t, s in squad_halves(titles).items()}


def squad_pairs(articles: Sequence[dict[str, Any]], n_questions: int, seed: int, negatives: int = 3) -> list[tuple[str, str, int]]:
    """(question, paragraph, label): each sampled question against its own paragraph (1) and
    ``negatives`` other paragraphs of the same article (0), drawn with ``seed``."""
    import random

    rng = random.Random(seed)
    qs = [(ai, pi, q["question"]) for ai, a in enumerate(articles) for pi, p in enumerate(a["paragraphs"]) for q in p["qas"]]
    rng.shuffle(qs)
    out: list[tuple[str, str, int]] = []
    for ai, pi, question in qs[:n_questions]:
        paras = articles[ai]["paragraphs"]
        others = [j for j in range(len(paras)) if j != pi]
        for j in [pi, *rng.sample(others, min(negatives, len(others)))]:
            out.append((question, paras[j]["context"], int(j == pi)))
    return out


# -- the token-vector disk cache (the verifier's, so reruns do not re-encode corpora) -----
#: Token vectors of a text MiniLM truncated (256 pieces less [CLS] and [SEP]): what a cache written
#: before issue 52 (passages read in windows) holds for every longer text.
TRUNCATED_ROWS = 254


class TokenDiskCache:
    def __init__(self, tag: str) -> None:
        self.path = CACHE / f"tokens-{tag}.npz"
        self._on_disk: set[str] = set()

    def load_into(self, cache: TokenVectorCache, stale_rows: int | None = None) -> int:
        """Put every entry of the file into ``cache``, but those of exactly ``stale_rows`` vectors:
        written before long texts were read in windows, they may hold a truncated text's first
        ``stale_rows`` pieces only (a text of exactly that many pieces is encoded again, alike)."""
        if not self.path.exists():
            return 0
        data = np.load(self.path)
        lengths = data["lengths"]
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        q, s = data["q"], data["s"]
        keys = data["keys"].tolist()
        kept = [i for i in range(len(keys)) if lengths[i] != stale_rows]
        for i in kept:
            cache.put_quantized(keys[i], q[bounds[i] : bounds[i + 1]], s[bounds[i] : bounds[i + 1]])
        if len(kept) < len(keys):
            print(f"{self.path.name}: {len(keys) - len(kept)} entries of {stale_rows} token vectors left out (maybe truncated; encoded again)", flush=True)
        self._on_disk = {keys[i] for i in kept}
        return len(kept)

    def save(self, cache: TokenVectorCache) -> bool:
        """Write the cache when it holds texts the file lacks; returns whether it wrote.

        Rewriting an unchanged file is not free (hundreds of MB), and a race rewrote its file just
        before timing an arm. So an unchanged cache is not written, and a
        write is flushed to disk before the caller times anything."""
        rows = cache.quantized()
        keys = {k for k, _, _ in rows}
        if not rows or keys <= self._on_disk:
            return False
        CACHE.mkdir(parents=True, exist_ok=True)
        keys_, lengths = np.array([k for k, _, _ in rows]), np.array([len(q) for _, q, _ in rows])
        q, s = np.concatenate([q for _, q, _ in rows]), np.concatenate([s for _, _, s in rows])
        write_atomically(self.path, lambda fh: np.savez(fh, keys=keys_, lengths=lengths, q=q, s=s))  # old file or new, never half of one
        self._on_disk = keys
        return True


def prime(li: LateInteractionScorer, texts: Sequence[str], label: str, emb: DiskCachedEmbedder | None = None) -> None:
    """One forward pass per text not cached yet gives both its token vectors (the verifier's
    cache) and its dense vector (the embedding cache: ``emb``, default the float32 MiniLM's)."""
    emb = emb if emb is not None else embedder()
    missing = [t for t in dict.fromkeys(texts) if text_key(t) not in li.cache]
    for start in range(0, len(missing), 256):
        batch = missing[start : start + 256]
        emb.put(batch, li.embed_and_cache(batch))
        print(f"{label}: encoded {start + len(batch)}/{len(missing)} texts", flush=True)


def li_verifier(li: LateInteractionScorer) -> Scoring:
    """``li`` as ``MeVe(scorer="late-interaction")`` runs it (sentences scored in their passage's
    context), less the shared pass: the benchmarks' dense vectors come from the embedding cache."""
    return replace(li.scoring(), shared=None)


def default_verifier() -> tuple[LateInteractionScorer, TokenDiskCache]:
    """meve's default verifier with every token vector the benchmarks encoded cached on disk (the
    speed race derives its drawn passages' vectors and keeps them in memory only)."""
    from meve import SentenceTransformerEmbedder

    li = LateInteractionScorer(SentenceTransformerEmbedder(), cache_bytes=8 * 2**30)
    disk = TokenDiskCache("all-MiniLM-L6-v2")
    disk.load_into(li.cache, stale_rows=TRUNCATED_ROWS)
    return li, disk
