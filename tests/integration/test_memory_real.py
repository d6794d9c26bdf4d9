"""MomentaryMemory with the real MiniLM model, an embedded PersistentClient and a real Chroma server."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from meve import MemoryConfig, MomentaryMemory
from tests.conftest import _SERVERS, _stop_server

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
    assert mem.token_counter.count(ctx.text) == ctx.token_count <= 60  # the rendered text, counted
    again = MomentaryMemory("alice", path=chroma_dir, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=60))
    assert again.reconstruct("Can you suggest a dinner recipe for tonight? Remember my allergy.").turns == ctx.turns


def test_same_api_against_a_real_chroma_server(minilm, chroma_server):
    mem = MomentaryMemory("bob", client=chroma_server, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=80, keep_recent=True))
    _fill(mem)
    other = MomentaryMemory("carol", client=chroma_server, embedders=[minilm])
    other.add("carol's private note about peanuts")
    ctx = mem.reconstruct("Where does my sister live?", fusion="rrf")
    texts = [t.text for t in ctx.turns]
    assert CHAT[4][1] in texts and texts[-1] == CHAT[-1][1]
    assert all("carol" not in t for t in texts)
    reopened = MomentaryMemory("bob", client=chroma_server, embedders=[minilm], config=MemoryConfig(top_k=2, l_max=80, keep_recent=True))
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
    assert main(["memory", "reconstruct", "bike colour", "--db", db, "--session", "s", "--top-k", "1", "--json", "--keep-recent", "always"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["recent_reason"].startswith("keep_recent=True")
    # The latest exchange (the last two turns) goes in first; top_k 1 recalls the bike turn.
    assert [t["text"] for t in out["turns"]] == ["My bike is a green Brompton.", "The weather is nice.", "What colour is my bike?"]
    reasons = [tr["reason"] for tr in out["trace"] if tr["included"]]
    # The bike turn ranks first, and is what the user said nearest the query: it goes in as that.
    assert reasons == [
        "most recent turn (always kept)",
        "most recent turn (always kept)",
        "the user's statement nearest the query (cosine 0.60, at least follow_up_cosine 0.3)",
    ]
    assert main(["memory", "reconstruct", "bike colour", "--db", db, "--session", "s", "--top-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recent_reason"].startswith("the query is short (2 words")  # the default
    # With "auto" a standalone query lets the latest turns compete: with top_k 1 the one most like
    # the query goes in, and its partner (the reply before it) comes with it.
    assert main(["memory", "reconstruct", "bike colour", "--db", db, "--session", "s", "--top-k", "1", "--json", "--keep-recent", "auto"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert [t["text"] for t in auto["turns"]] == ["The weather is nice.", "What colour is my bike?"]
    assert auto["recent_reason"] == "the query stands alone: the most recent turns compete by relevance"
    assert main(["memory", "add", "  ", "--db", db, "--session", "s"]) == 2


WORKER = """
import sys, time
import chromadb
from chromadb.config import Settings
from meve import MomentaryMemory
from tests.fakes import FakeEmbedder

port, name, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
mem = MomentaryMemory("team", client=client, embedders=[FakeEmbedder()])
for i in range(n):
    mem.add(f"{name} turn {i} mentions keyword{name}", "user")
    print(f"ACK {name} {i}", flush=True)
    time.sleep(0.01)
ctx = mem.reconstruct(" ".join(f"keyword{other}" for other in ("w0", "w1", "w2") if other != name), l_max=4000)
print("FOUND", sorted({t.text.split()[0] for t in ctx.turns}), flush=True)
"""


def test_three_worker_processes_share_one_session_through_a_chroma_server(chroma_server, tmp_path):
    port = chroma_server.get_settings().chroma_server_http_port
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    root = Path(__file__).resolve().parents[2]
    workers = [
        subprocess.Popen([sys.executable, str(script), str(port), f"w{k}", "20"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in range(3)
    ]
    outs = [w.communicate(timeout=300) for w in workers]
    assert all(w.returncode == 0 for w in workers), [err[-2000:] for _, err in outs]
    acked = {line.split(" ", 1)[1] for out, _ in outs for line in out.splitlines() if line.startswith("ACK")}
    assert len(acked) == 60
    from tests.fakes import FakeEmbedder

    reader = MomentaryMemory("team", client=chroma_server, embedders=[FakeEmbedder()])
    texts = [t.text for t in reader.turns()]
    assert len(texts) == len(set(texts)) == 60  # nothing lost, nothing duplicated
    for k in range(3):
        own = [int(t.split()[2]) for t in texts if t.startswith(f"w{k} ")]
        assert own == list(range(20))  # each worker's turns stay in its order
    for out, _ in outs:
        found = next(line for line in out.splitlines() if line.startswith("FOUND"))
        assert found.count("'w") >= 2  # each worker found the others' turns by their keyword


def test_a_server_that_is_down_is_a_store_error_naming_it(minilm, chroma_server):
    from meve import StoreError
    from tests.fakes import FakeEmbedder

    mem = MomentaryMemory("down", client=chroma_server, embedders=[FakeEmbedder()])
    mem.add("stored while the server ran")
    port = chroma_server.get_settings().chroma_server_http_port
    _stop_server(port)
    with pytest.raises(StoreError, match=rf"Chroma server at 127.0.0.1:{port}"):
        mem.add("after the server stopped")
    with pytest.raises(StoreError, match=rf"Chroma server at 127.0.0.1:{port}"):
        mem.reconstruct("anything")


def test_a_frozen_server_fails_after_the_timeout_instead_of_hanging(chroma_server):
    import os
    import signal

    from meve import StoreError
    from meve.retrieval.chroma import chroma_http_client
    from tests.fakes import FakeEmbedder

    port = chroma_server.get_settings().chroma_server_http_port
    client = chroma_http_client("127.0.0.1", port, timeout_s=2.0)
    mem = MomentaryMemory("frozen", client=client, embedders=[FakeEmbedder()])
    mem.add("stored before the freeze")
    proc = _SERVERS[port]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        t0 = time.perf_counter()
        with pytest.raises(StoreError, match=rf"Chroma server at 127.0.0.1:{port}"):
            mem.add("during the freeze")
        assert time.perf_counter() - t0 < 15
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert [t.text for t in mem.turns()] == ["stored before the freeze"]


def test_a_users_own_http_client_without_a_timeout_is_named_once_in_the_log(chroma_server, caplog):
    from meve import MeVe
    from meve.retrieval.chroma import chroma_http_client
    from tests.fakes import FakeEmbedder

    with caplog.at_level("WARNING", logger="meve"):
        MomentaryMemory("plain-client", client=chroma_server, embedders=[FakeEmbedder()])
        MeVe.from_texts(["a passage"], client=chroma_server, embedder=FakeEmbedder(), scorer="cosine")
    assert sum("no request timeout" in r.getMessage() for r in caplog.records) == 1
    caplog.clear()
    timed = chroma_http_client("127.0.0.1", chroma_server.get_settings().chroma_server_http_port, timeout_s=5)
    with caplog.at_level("WARNING", logger="meve"):
        MomentaryMemory("timed-client", client=timed, embedders=[FakeEmbedder()])
    assert not any("no request timeout" in r.getMessage() for r in caplog.records)


RECIPE = (
    "Try a lemon chicken traybake: roast thighs with potatoes, garlic and lemon for forty minutes, then add green beans for the last ten. It is peanut-free."
)


@pytest.mark.parametrize(
    "follow_up", ["Could you make that one a bit more friendly for a beginner?", "Is that something I could cook after a long day of work?"]
)
def test_a_long_follow_up_near_nothing_said_before_keeps_the_reply(minilm, follow_up):
    # Over six words, and its words were said before ("more", "work"), but no earlier turn is near it
    # in meaning (real MiniLM cosine under 0.3): it is about the reply just given (0.4.0 let the reply
    # compete and lose at this budget).
    from meve.retrieval.chroma import chroma_client

    mem = MomentaryMemory("dana", client=chroma_client(), embedders=[minilm], config=MemoryConfig(l_max=60), collection_prefix=f"r{time.time_ns()}")
    rows = [*CHAT, ("assistant", RECIPE)]
    mem.add_many([{"role": r, "text": t, "timestamp": ts} for (r, t), ts in zip(rows, _stamps(len(rows)), strict=True)])
    ctx = mem.reconstruct(follow_up)
    assert RECIPE in ctx.text and ctx.recent_reason.startswith("no turn before the latest exchange is near the query"), ctx.recent_reason
    subject = mem.reconstruct("Where does my sister Ana live, and what is her job there?")
    assert subject.recent_reason.endswith("carries its own subject: the most recent turns compete by relevance")
    assert CHAT[4][1] in subject.text
