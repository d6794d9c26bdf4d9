"""int8 on the CPU: the precision is checked before any model loads, and the int8 layer computes
what its design says (7-bit weights per channel, activations over the full 8 bits)."""

from __future__ import annotations

import pytest
import torch

from meve import ConfigError, SentenceTransformerEmbedder
from meve.scoring.devices import check_precision
from meve.scoring.int8 import WEIGHT_LEVELS, Int8Linear, quantize_linears
from meve.scoring.registry import registry


@pytest.mark.parametrize("bad", ["int4", "INT8", "fp32", "", None, 8])
def test_an_unknown_precision_is_refused_naming_it_and_what_is_allowed(bad):
    with pytest.raises(ConfigError, match="precision") as err:
        SentenceTransformerEmbedder(precision=bad)
    assert repr(bad) in str(err.value) and '"float32" or "int8"' in str(err.value)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps"])
def test_int8_on_another_device_than_the_cpu_is_refused_before_loading(device):
    before = registry.loaded()
    with pytest.raises(ConfigError, match="device") as err:
        SentenceTransformerEmbedder(precision="int8", device=device)
    assert "int8" in str(err.value) and "cpu" in str(err.value)
    assert registry.loaded() == before


def test_int8_runs_on_the_cpu_under_auto_and_says_so_in_its_name_without_loading():
    before = registry.loaded()
    emb = SentenceTransformerEmbedder(precision="int8")
    assert (emb.precision, emb.device, emb.name) == ("int8", "cpu", "all-MiniLM-L6-v2 (int8)")
    assert SentenceTransformerEmbedder(precision="int8", device="cpu").device == "cpu"
    assert SentenceTransformerEmbedder("/models/my-minilm/", precision="int8").name == "my-minilm (int8)"
    # float32 keeps the name collections already record
    assert SentenceTransformerEmbedder().name == "all-MiniLM-L6-v2"
    assert registry.loaded() == before


def test_int8_of_a_model_object_the_caller_holds_is_refused():
    class Loaded:  # stands for a SentenceTransformer the caller built: int8 would rewrite it in place
        device = "cpu"

    with pytest.raises(ConfigError, match="precision"):
        SentenceTransformerEmbedder(Loaded(), precision="int8")


def test_check_precision_takes_float32_anywhere():
    assert check_precision("float32", "cuda") == "float32"
    assert check_precision("int8", "auto") == "int8"


def _simulated(linear: torch.nn.Linear, x: torch.Tensor, activation_levels: int) -> torch.Tensor:
    """The int8 layer's arithmetic in float: weights rounded per row to [-63, 63] steps, the input
    to ``activation_levels`` + 1 steps over [min(x, 0), max(x, 0)] (PyTorch's dynamic range)."""
    w = linear.weight.detach()
    step = w.abs().amax(dim=1, keepdim=True) / WEIGHT_LEVELS
    wq = (w / step).round().clamp(-WEIGHT_LEVELS, WEIGHT_LEVELS) * step
    lo, hi = min(x.min().item(), 0.0), max(x.max().item(), 0.0)
    a = (hi - lo) / activation_levels
    zero = round(-lo / a)
    xq = ((x / a).round() + zero).clamp(0, activation_levels)
    return ((xq - zero) * a) @ wq.T + linear.bias.detach()


def test_the_int8_layer_uses_7_bit_weights_and_8_bit_activations():
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(4, 10, 64)
    x[0, 0, 3] = 12.0  # an outlier, as MiniLM's activations have: it sets the range
    layer = Int8Linear(linear)
    weight, _ = torch.ops.quantized.linear_unpack(layer.packed)
    assert weight.qscheme() == torch.per_channel_affine
    assert (weight.int_repr().abs().amax(dim=1) == WEIGHT_LEVELS).all()  # every row uses its 7 bits, none more
    y = layer(x)
    assert y.shape == (4, 10, 32) and y.dtype == torch.float32
    # PyTorch's stock dynamic int8 quantises activations to 7 bits (reduce_range): 0.08 off here.
    assert (y - _simulated(linear, x, 255)).abs().max().item() < 1e-4
    assert (y - _simulated(linear, x, 127)).abs().max().item() > 1e-2


def test_quantize_linears_replaces_every_linear_in_place():
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Sequential(torch.nn.Linear(16, 4)))
    x = torch.randn(5, 8)
    before = net(x)
    assert quantize_linears(net) == 2
    assert not any(isinstance(m, torch.nn.Linear) for m in net.modules())
    assert sum(isinstance(m, Int8Linear) for m in net.modules()) == 2
    after = net(x)
    assert torch.nn.functional.cosine_similarity(before, after, dim=1).min().item() > 0.99
