"""What this CPU can do at most for MiniLM, so each model figure can be stated as a fraction of it.

* :func:`matmul_limit`: float32 GFLOP/s and int8 GOP/s of MiniLM's matrix products (tokens x 384 @
  384 x 384 four times, 384 x 1536 and 1536 x 384 once each: one layer's linear layers, weighted
  as the model runs them). int8 twice: ``torch._int_mm`` (int8 x int8 -> int32, the kernel alone)
  and meve's :class:`~meve.scoring.int8.Int8Linear` (what the int8 model runs: the activation's
  quantisation, the product, the rescale).
* :func:`model_flops`: the FLOPs of one MiniLM pass over texts of given token lengths, from the
  model's config: per token 2 x (4 h^2 + 2 h i) per layer for the linear layers, and 4 L h per
  token per layer for attention's two products over a text of L tokens (softmax, layer norms, GELU
  and the embeddings are left out: they are not matrix products).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["achieved", "matmul_limit", "minilm_shape", "model_flops", "token_lengths"]


def minilm_shape(path: str | None = None) -> dict[str, int]:
    """hidden size, feed-forward size and layers of the bundled MiniLM (its config.json)."""
    from meve.scoring.registry import default_model_path

    config = json.loads((Path(path or default_model_path()) / "config.json").read_text())
    return {"hidden": int(config["hidden_size"]), "intermediate": int(config["intermediate_size"]), "layers": int(config["num_hidden_layers"])}


def model_flops(lengths: Sequence[int], shape: dict[str, int] | None = None) -> float:
    """FLOPs of MiniLM's matrix products over texts of ``lengths`` tokens (no padding)."""
    s = shape or minilm_shape()
    h, i, n = s["hidden"], s["intermediate"], s["layers"]
    linear = 2 * (4 * h * h + 2 * h * i)
    return float(sum(n * (length * linear + 4 * length * length * h) for length in lengths))


def token_lengths(texts: Sequence[str], max_length: int = 256) -> list[int]:
    """Each text's tokens as the bundled MiniLM reads it ([CLS] and [SEP] included, truncated)."""
    from transformers import AutoTokenizer

    from meve.scoring.registry import default_model_path

    tok = AutoTokenizer.from_pretrained(default_model_path())
    return [len(ids) for ids in tok(list(texts), truncation=True, max_length=max_length)["input_ids"]]


def _best(fn: Callable[[], Any], seconds: float) -> float:
    """The fastest of repeated calls over about ``seconds`` (the least disturbed by the shared CPU)."""
    for _ in range(2):
        fn()
    best, spent = float("inf"), 0.0
    while spent < seconds:
        t0 = time.perf_counter()
        fn()
        took = time.perf_counter() - t0
        best, spent = min(best, took), spent + took
    return best


def matmul_limit(tokens: int = 2048, seconds: float = 1.0) -> dict[str, Any]:
    """float32 GFLOP/s and int8 GOP/s of one MiniLM layer's products over ``tokens`` rows, each
    product timed at its fastest over ``seconds``."""
    import torch

    from meve.scoring.int8 import Int8Linear

    s = minilm_shape()
    h, i = s["hidden"], s["intermediate"]
    shapes = {(h, h): 4, (h, i): 1, (i, h): 1}  # (in, out) -> how many per layer
    work = sum(2 * tokens * a * b * n for (a, b), n in shapes.items())
    spent = {"float32": 0.0, "int8_int_mm": 0.0, "int8_linear": 0.0}
    per_shape = {}
    for (a, b), n in shapes.items():
        x, w = torch.randn(tokens, a), torch.randn(a, b)
        xi, wi = torch.randint(-127, 128, (tokens, a), dtype=torch.int8), torch.randint(-127, 128, (a, b), dtype=torch.int8)
        layer = Int8Linear(torch.nn.Linear(a, b))
        times = {
            "float32": _best(partial(torch.matmul, x, w), seconds),
            "int8_int_mm": _best(partial(torch._int_mm, xi, wi), seconds),
            "int8_linear": _best(partial(layer, x), seconds),
        }
        for k, t in times.items():
            spent[k] += n * t
        per_shape[f"{tokens}x{a}@{a}x{b}"] = {k: round(2 * tokens * a * b / t / 1e9, 1) for k, t in times.items()}
    return {
        "tokens": tokens,
        "threads": torch.get_num_threads(),
        "gflops_float32": round(work / spent["float32"] / 1e9, 1),
        "gops_int8_int_mm": round(work / spent["int8_int_mm"] / 1e9, 1),
        "gops_int8_linear": round(work / spent["int8_linear"] / 1e9, 1),
        "per_shape": per_shape,
        "minilm": s,
    }


def achieved(flops: float, seconds: float, limit: dict[str, Any], precision: str) -> dict[str, float]:
    """A model figure as GFLOP/s and as a fraction of the limit of its precision (int8: of the
    int8 kernel alone and of meve's int8 layer; attention and the rest stay float32 in both)."""
    rate = flops / seconds / 1e9
    if precision == "int8":
        return {
            "gflops": round(rate, 1),
            "of_int8_int_mm": round(rate / limit["gops_int8_int_mm"], 3),
            "of_int8_linear": round(rate / limit["gops_int8_linear"], 3),
        }
    return {"gflops": round(rate, 1), "of_float32": round(rate / limit["gflops_float32"], 3)}
