"""Where a model runs. ``"auto"`` (every model's default) takes CUDA, then Apple's MPS, then the
CPU, decided when the model loads, so building a component never imports torch."""

from __future__ import annotations

import re

from meve.core.errors import ConfigError

__all__ = ["DEVICES", "PRECISIONS", "check_device", "check_precision", "is_cpu", "resolve_device"]

DEVICES = '"auto" (CUDA, then Apple MPS, then the CPU), "cpu", "cuda", "cuda:N" or "mps"'
_DEVICE = re.compile(r"(auto|cpu|mps|cuda(:\d{1,3})?)")
#: What a model's ``precision`` may be: int8 runs on the CPU only (PyTorch's int8 kernels).
PRECISIONS = ("float32", "int8")


def check_device(value: object) -> str:
    """``value`` as a device name, or a :class:`ConfigError` naming it."""
    if not isinstance(value, str) or not _DEVICE.fullmatch(value):
        raise ConfigError("device", value, DEVICES)
    return value


def resolve_device(device: str, *, cuda: bool | None = None, mps: bool | None = None) -> str:
    """The device ``device`` means on this machine: itself, or for ``"auto"`` the first of CUDA,
    MPS and the CPU that is there. ``cuda``/``mps`` say whether each is there (default: ask torch)."""
    if check_device(device) != "auto":
        return device
    if cuda is None or mps is None:
        import torch

        if cuda is None:
            cuda = bool(torch.cuda.is_available())
        if mps is None:
            backend = getattr(torch.backends, "mps", None)
            mps = bool(backend is not None and backend.is_available())
    if cuda:
        return "cuda"
    return "mps" if mps else "cpu"


def is_cpu(device: str) -> bool:
    """Whether ``device`` (resolved) is the CPU, where padded positions cost as much as real ones."""
    return device.startswith("cpu")


def check_precision(value: object, device: str) -> str:
    """``value`` as a precision for a model on ``device`` (a checked device name), or a
    :class:`ConfigError` naming it: int8 runs on the CPU, so it takes "auto" (then the CPU) or "cpu"."""
    if not isinstance(value, str) or value not in PRECISIONS:
        raise ConfigError("precision", value, " or ".join(f'"{p}"' for p in PRECISIONS) + " (int8: the linear layers in int8, on the CPU)")
    if value == "int8" and device not in ("auto", "cpu"):
        raise ConfigError("device", device, '"auto" or "cpu" for precision="int8" (PyTorch\'s int8 kernels run on the CPU only)')
    return value
