"""Where models run: "auto" by default, decided at load, and bad names refused before any load."""

from __future__ import annotations

import pytest

from meve import CrossEncoderScorer, SentenceTransformerEmbedder
from meve.core.errors import ConfigError
from meve.scoring.batching import CPU_BATCH_TOKENS
from meve.scoring.devices import check_device, resolve_device
from meve.scoring.meve_cross_encoder import MeveCrossEncoderScorer


@pytest.mark.parametrize(("cuda", "mps", "expected"), [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_auto_takes_cuda_then_mps_then_the_cpu(cuda, mps, expected):
    assert resolve_device("auto", cuda=cuda, mps=mps) == expected


@pytest.mark.parametrize("named", ["cpu", "cuda", "cuda:1", "mps"])
def test_a_named_device_is_kept_whatever_is_there(named):
    assert resolve_device(named, cuda=True, mps=True) == named


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "CUDA", "", "cpu ", 0, None])
def test_an_unknown_device_is_refused_naming_it(bad):
    with pytest.raises(ConfigError, match="device") as err:
        check_device(bad)
    assert "auto" in str(err.value)


def test_auto_is_every_models_default_and_resolves_on_this_machine():
    import torch

    here = "cuda" if torch.cuda.is_available() else "cpu"  # this project's CI has no GPU; a lent one would say cuda
    emb = SentenceTransformerEmbedder()
    ce = CrossEncoderScorer("some/cross-encoder")
    mce = MeveCrossEncoderScorer()
    assert emb.requested_device == ce.requested_device == mce.requested_device == "auto"
    assert emb.device == ce.device == mce.device == resolve_device("auto")
    assert emb.device.startswith(here)


def test_the_cpu_batching_cap_applies_only_on_a_cpu():
    # batch_tokens="auto" follows the resolved device; nothing loads to decide it.
    assert CrossEncoderScorer("x", device="cpu").batch_tokens == CPU_BATCH_TOKENS
    assert CrossEncoderScorer("x", device="cuda").batch_tokens is None
    assert CrossEncoderScorer("x", device="cuda", batch_tokens=512).batch_tokens == 512


def test_bad_devices_are_refused_by_every_model_at_construction():
    with pytest.raises(ConfigError, match="device"):
        SentenceTransformerEmbedder(device="gpu")
    with pytest.raises(ConfigError, match="device"):
        CrossEncoderScorer("x", device="tpu")
    # PyTorch's dynamic int8 runs on the CPU only: an int8 network on a GPU is refused, not moved.
    with pytest.raises(ConfigError, match="int8"):
        MeveCrossEncoderScorer.shipped("meve-cross-encoder-l3", device="cuda")
    assert MeveCrossEncoderScorer.shipped("meve-cross-encoder-l3").device == "cpu"
