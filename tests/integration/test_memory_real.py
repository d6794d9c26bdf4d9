"""MomentaryMemory with the real MiniLM model, an embedded PersistentClient and a real Chroma server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from meve import MemoryConfig, MomentaryMemory

pytestmark = pytest.mark.integration

CHAT = [
    ("user", "Hi! I just adopted a beagle puppy called Biscuit."),
    ("assistant", "Congratulations on Biscuit! Beagles are friendly and curious."),
    ("user", "I'm training for the Lyon half marathon in October."),
    ("assistant", "Good luck with the half marathon training."),
    ("user", "My sister Ana lives in Porto and works as an architect."),
    ("assistant", "Porto has beautiful architecture."),
    ("user", "I'm allergic to peanuts, so I avoid satay."),
    ("assistant", "Noted: no peanuts."),
    ("user", "Can you suggest a dinner recipe for tonight?"),
]


def _stamps(n):
    t0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
    return [t0 + timedelta(minutes=5 * i) for i in range(n)]


def _fill(mem):
    mem.add_many([{"role": r, "text": t, "timestamp": ts} for (r, t), ts in zip(CHAT, _stamps(len(CHAT)), strict=True)])


def test_real_minilm_recalls_the_relevant_turn_under_budget(minilm, chroma_dir):
    mem = MomentaryMemory("alice", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=60))
    _fill(mem)
    ctx = mem.reconstruct("Can you suggest a dinner recipe for tonight? Remember my allergy.")
    texts = [t.text for t in ctx.turns]
    assert texts[-1] == CHAT[-1][1]
    assert CHAT[6][1] in texts  # the peanut allergy
    assert ctx.token_count <= 60
    again = MomentaryMemory("alice", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=60))
    assert again.reconstruct("Can you suggest a dinner recipe for tonight? Remember my allergy.").turns == ctx.turns


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    yield client
    proc.terminate()
    proc.wait(timeout=20)


def test_same_api_against_a_real_chroma_server(minilm, chroma_server):
    mem = MomentaryMemory("bob", client=chroma_server, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=80))
    _fill(mem)
    other = MomentaryMemory("carol", client=chroma_server, embedders=[minilm])
    other.add("carol's private note about peanuts")
    ctx = mem.reconstruct("Where does my sister live?", fusion="rrf")
    texts = [t.text for t in ctx.turns]
    assert CHAT[4][1] in texts and texts[-1] == CHAT[-1][1]
    assert all("carol" not in t for t in texts)
    reopened = MomentaryMemory("bob", client=chroma_server, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=80))
    assert len(reopened) == len(CHAT)
    assert reopened.reconstruct("Where does my sister live?", fusion="rrf").turns == ctx.turns


def test_memory_cli(tmp_path, minilm, capsys):
    from meve.cli import main

    db = str(tmp_path / "db")
    assert main(["memory", "add", "My bike is a green Brompton.", "--db", db, "--session", "s"]) == 0
    assert main(["memory", "add", "The weather is nice.", "--db", db, "--session", "s", "--role", "assistant"]) == 0
    assert main(["memory", "add", "What colour is my bike?", "--db", db, "--session", "s"]) == 0
    capsys.readouterr()
    assert main(["memory", "list", "--db", db, "--session", "s"]) == 0
    assert "3 turn(s)" in capsys.readouterr().out
    assert main(["memory", "reconstruct", "bike colour", "--db", db, "--session", "s", "--top-k", "1", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert [t["text"] for t in out["turns"]] == ["My bike is a green Brompton.", "What colour is my bike?"]
    assert any(tr["included"] is False and "outside top_k" in tr["reason"] for tr in out["trace"])
    assert main(["memory", "add", "  ", "--db", db, "--session", "s"]) == 2
