"""int8 inference on the CPU for a model's linear layers (``SentenceTransformerEmbedder(precision="int8")``).

Weights are quantised once, per output channel, symmetric, to 7 bits ([-63, 63]); activations are
quantised per call, per tensor, to the full 8 bits (PyTorch's dynamic quantisation kernels,
``torch.ops.quantized.linear_dynamic``). Why 7-bit weights: x86 int8 kernels without VNNI add
pairs of uint8 x int8 products in int16, which saturates unless one side gives up a bit.
PyTorch's stock dynamic quantisation takes it from the activations (``reduce_range=True``);
MiniLM's activations have outliers (the feed-forward output's input above all) and weights have
none, so the bit is cheaper on the weights' side. Measured on 64 SQuAD paragraphs, sentence
vectors against float32: cosine 0.983 mean with the stock 7-bit activations, 0.994 with 7-bit
weights, at the same speed (BENCHMARKS.md, "int8 on the CPU", has the dev-split figures).

Activation ranges are per call, so a text's int8 vectors depend on the texts batched with it
about as much as on the quantisation itself (cosine ~0.995 to its vectors encoded alone); meve
keeps vectors by text, so a passage scores the same on every query once encoded.

Imports torch: the embedder imports this module only when it loads a model.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

__all__ = ["WEIGHT_LEVELS", "Int8Linear", "quantize_linears"]

#: The largest weight magnitude after quantisation (7 bits, symmetric): see the module docstring.
WEIGHT_LEVELS = 63


class Int8Linear(torch.nn.Module):
    """A ``torch.nn.Linear`` run in int8: weights quantised once (per output channel, 7 bits),
    activations per call (8 bits), output in the input's dtype."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        scale = (weight.abs().amax(dim=1) / WEIGHT_LEVELS).clamp(min=1e-12).double()
        zero = torch.zeros(weight.shape[0], dtype=torch.long)
        with warnings.catch_warnings():
            # torch 2.13 marks quantized tensor creation deprecated (PyTorch's roadmap, moving to
            # torchao); nothing a caller can change, so the warning stays here.
            warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor", category=UserWarning)
            q = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        bias = linear.bias.detach().float() if linear.bias is not None else None
        self.packed: Any = torch.ops.quantized.linear_prepack(q, bias)
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T + b`` with W in int8 and ``x`` quantised to 8 bits over its whole range."""
        y = torch.ops.quantized.linear_dynamic(x.float(), self.packed, reduce_range=False)
        return y.to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_linears(module: torch.nn.Module) -> int:
    """Replace every ``torch.nn.Linear`` inside ``module`` by an :class:`Int8Linear`, in place;
    returns how many were replaced. The module must be on the CPU (the kernels are CPU-only)."""
    found = [(name, child) for name, child in module.named_modules() if isinstance(child, torch.nn.Linear)]
    for name, child in found:
        if child.weight.device.type != "cpu":
            raise ValueError(f"int8 layers run on the CPU only; {name} is on {child.weight.device}")
        parent_name, _, attr = name.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        setattr(parent, attr, Int8Linear(child))
    return len(found)
