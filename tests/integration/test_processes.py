"""Several processes on one Chroma directory, as docs/scaling.md promises ("Several processes on one
directory"): a long-lived reader beside a writer, two writers (one killed), and SIGKILL at chosen
points of ingestion and of memory adds. Every process is real and so is Chroma; the models are
fakes (named as such): the subject is storage, and MiniLM would cost ~10 s per process."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meve import MeVe, MomentaryMemory
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder, FakeScorer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import json, os, signal, sys
from meve import MeVe, MeVeConfig, MomentaryMemory
from meve.retrieval.chroma import chroma_client
from meve.retrieval.store import ChromaStore
from meve.memory.session import SessionStore
from tests.fakes import FakeEmbedder, FakeScorer


def die_after(owner, name, calls):
    """SIGKILL this process as the calls-th call of owner.name returns: a crash at a chosen point."""
    real, seen = getattr(owner, name), [0]

    def wrapper(*args, **kwargs):
        out = real(*args, **kwargs)
        seen[0] += 1
        if seen[0] == calls:
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(owner, name, wrapper)


def die_on_file(owner, name, arg, match, nth, after):
    """SIGKILL this process at the nth call of owner.name whose file (args[arg], a path or an open
    file, a temporary name counting as its target's) is named match: before the call or after it."""
    real, seen = getattr(owner, name), [0]

    def wrapper(*args, **kwargs):
        target = args[arg]
        hit = os.path.basename(str(getattr(target, "name", target))).split(".tmp-")[0] == match
        seen[0] += hit
        if hit and seen[0] == nth and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        out = real(*args, **kwargs)
        if hit and seen[0] == nth and after:
            os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(owner, name, wrapper)


def passage(prefix, i):
    return f"The {prefix}{i} lighthouse stands on cape {prefix} number {i}."


def corpus(db):
    col = chroma_client(db).get_collection("shared")
    return MeVe.from_chroma(col, embedder=FakeEmbedder(), scorer=FakeScorer(), config=MeVeConfig(k_init=20, t_max=4000))


mode, db = sys.argv[1], sys.argv[2]
kill = os.environ.get("KILL", "")
if kill.startswith("chroma-add:"):
    die_after(ChromaStore, "add", int(kill.split(":")[1]))
if kill.startswith("memory-write:"):
    die_after(SessionStore, "write", int(kill.split(":")[1]))
if kill.startswith("snapshot-arrays:"):  # the nth snapshot save dies once its last array is written (terms, ids, CURRENT are not)
    import numpy

    die_on_file(numpy, "save", 0, "lengths.npy", int(kill.split(":")[1]), after=True)
if kill.startswith("current-rename:"):  # the nth snapshot save dies just before CURRENT's rename
    die_on_file(os, "replace", 1, "CURRENT", int(kill.split(":")[1]), after=False)
if mode == "reader":
    m = corpus(db)
    print("READY", flush=True)
    for line in sys.stdin:
        try:
            r = m.run(line.strip(), candidates="hybrid")
            print(json.dumps({"ids": [d.id for d in r.documents], "rows": len(m.lexical)}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
elif mode == "writer":
    prefix, n, batch = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    m = corpus(db)
    for start in range(0, n, batch):
        ids = [f"{prefix}-{i}" for i in range(start, start + batch)]
        m.add_texts([passage(prefix, i) for i in range(start, start + batch)], ids=ids)
        print("ACK " + " ".join(ids), flush=True)
elif mode == "default-ids":
    fake = dict(embedder=FakeEmbedder(), scorer=FakeScorer(), client=chroma_client(db), collection_name="shared")
    try:
        MeVe.from_texts([passage(sys.argv[3], i) for i in range(3)], **fake)
        print("STORED", flush=True)
    except Exception as exc:
        print(f"REFUSED {type(exc).__name__}: {exc}", flush=True)
        m = MeVe.from_texts([passage(sys.argv[3], 9)], ids=[f"{sys.argv[3]}-9"], **fake)
        print("THEN " + json.dumps([d.id for d in m.run(passage(sys.argv[3], 9)).documents]), flush=True)
elif mode == "ingest":
    fake = dict(embedder=FakeEmbedder(), scorer=FakeScorer(), client=chroma_client(db), collection_name="shared")
    m = MeVe.from_texts([passage("alpha", i) for i in range(20)], ids=[f"alpha-{i}" for i in range(20)], **fake)
    print("ACK " + " ".join(f"alpha-{i}" for i in range(20)), flush=True)
    m.add_texts([passage("beta", i) for i in range(20)], ids=[f"beta-{i}" for i in range(20)])
    print("ACK " + " ".join(f"beta-{i}" for i in range(20)), flush=True)
elif mode == "memory":
    m = MomentaryMemory("s", path=db, embedders=[FakeEmbedder(), FakeEmbedder(name="fake-two")])
    for i in range(int(sys.argv[3])):
        m.add(f"turn {i} about the lighthouse", "user", turn_id=f"t{i}")
        print(f"ACK t{i}", flush=True)
'''


def _spawn(tmp_path: Path, *args: str, kill: str = "", stdin: bool = False) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    if not script.exists():
        script.write_text(CHILD)
    env = {**os.environ, "KILL": kill, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """The child's next line of output, or a failure with its stderr (bounded in time)."""
    assert proc.stdout is not None
    # poll, not select: select refuses a descriptor numbered past 1024, which a long suite's process reaches
    poller = select.poll()
    poller.register(proc.stdout, select.POLLIN)
    line = proc.stdout.readline() if poller.poll(timeout * 1000) else ""
    if not line:
        proc.kill()
        pytest.fail(f"no output from the child in {timeout} s; stderr: {proc.communicate()[1][-2000:]}")
    return line.strip()


def _acks(proc: subprocess.Popen[str]) -> list[str]:
    out, _ = proc.communicate(timeout=120)
    return [pid for line in out.splitlines() if line.startswith("ACK ") for pid in line.split()[1:]]


def _seed(db: str, n: int = 5, *, ids: bool = True) -> MeVe:
    texts = [f"The seed{i} lighthouse stands on cape seed number {i}." for i in range(n)]
    fakes = {"embedder": FakeEmbedder(), "scorer": FakeScorer(), "client": chroma_client(db), "collection_name": "shared"}
    return MeVe.from_texts(texts, ids=[f"seed-{i}" for i in range(n)] if ids else None, **fakes)


def _reopened(db: str) -> MeVe:
    """The corpus as a new process would open it: a fresh look at the directory."""
    return MeVe.from_chroma(chroma_client(db).get_collection("shared"), embedder=FakeEmbedder(), scorer=FakeScorer())


def _check_whole(m: MeVe, acked: list[str]) -> list[str]:
    """Every acknowledged id stored once, readable with its embedding, and in BM25; returns the stored ids."""
    col = m.store.collection  # type: ignore[union-attr]
    stored = col.get(include=[])["ids"]
    assert len(stored) == len(set(stored))
    assert set(acked) <= set(stored)
    assert len(col.get(ids=stored, include=["embeddings"])["embeddings"]) == len(stored)  # "Error finding id" broke this
    assert set(m.lexical.ids) == set(stored)
    return list(stored)


def test_a_long_lived_reader_sees_a_writers_rows_on_its_next_call(chroma_dir, tmp_path):
    _seed(chroma_dir)
    reader = _spawn(tmp_path, "reader", chroma_dir, stdin=True)
    assert _line(reader) == "READY"
    assert reader.stdin is not None

    def ask(query: str) -> dict:
        reader.stdin.write(query + "\n")
        reader.stdin.flush()
        return json.loads(_line(reader))

    assert "error" not in ask("The zeppelin3 lighthouse") and ask("The zeppelin3 lighthouse")["rows"] == 5
    writer = _spawn(tmp_path, "writer", chroma_dir, "zeppelin", "60", "10")
    answers, deadline = [], time.time() + 60
    while writer.poll() is None and time.time() < deadline and len(answers) < 200:  # reads while the writer writes
        answers.append(ask("The zeppelin7 lighthouse stands on cape zeppelin number 7."))
    acked = _acks(writer)
    assert writer.returncode == 0 and len(acked) == 60
    assert [a for a in answers if "error" in a] == []
    rows = [a["rows"] for a in answers]
    assert rows == sorted(rows) and all(5 <= r <= 65 for r in rows)

    after = ask("The zeppelin42 lighthouse stands on cape zeppelin number 42.")  # the first call after the writer's last rows
    assert after.get("error") is None and after["rows"] == 65 and after["ids"][0] == "zeppelin-42"
    reader.stdin.close()
    reader.wait(timeout=30)


def test_three_writers_one_killed_after_chroma_stored_its_batch_one_with_clashing_default_ids(chroma_dir, tmp_path):
    seed = _seed(chroma_dir, ids=False)  # ids doc-0 ... doc-4
    steady = _spawn(tmp_path, "writer", chroma_dir, "alpha", "80", "10")
    killed = _spawn(tmp_path, "writer", chroma_dir, "beta", "80", "10", kill="chroma-add:4")
    clashing = _spawn(tmp_path, "default-ids", chroma_dir, "gamma")
    refused, then = _line(clashing), _line(clashing)
    acked = _acks(steady) + _acks(killed)
    assert steady.returncode == 0 and killed.returncode == -signal.SIGKILL
    assert sum(a.startswith("beta-") for a in acked) == 30  # the 4th batch was stored, then the process died
    assert refused.startswith("REFUSED InputError") and "with another text: ['doc-0', 'doc-1', 'doc-2']" in refused
    assert then.startswith("THEN ") and json.loads(then[5:])[0] == "gamma-9"  # its later calls work
    assert clashing.wait(timeout=30) == 0

    m = _reopened(chroma_dir)
    stored = _check_whole(m, acked)
    assert {f"beta-{i}" for i in range(30, 40)} <= set(stored)  # stored by Chroma though never acknowledged
    assert len(stored) == 5 + 80 + 40 + 1
    assert m.store.collection.metadata["meve:complete"] is False  # the killed writer's ingestion is still open
    # The same call again (what a restarted writer does): the stored rows are skipped, not refused.
    m.add_texts([f"The beta{i} lighthouse stands on cape beta number {i}." for i in range(30, 40)], ids=[f"beta-{i}" for i in range(30, 40)])
    assert m.store.count() == len(stored) and chroma_client(chroma_dir).get_collection("shared").metadata["meve:complete"] is True
    assert m.run("The beta35 lighthouse stands on cape beta number 35.").documents[0].id == "beta-35"
    assert seed.run("The alpha55 lighthouse stands on cape alpha number 55.").documents[0].id == "alpha-55"  # the first writer, still open


def test_writers_killed_while_saving_the_bm25_snapshot_lose_nothing(tmp_path):
    kills = ("snapshot-arrays:2", "current-rename:2")  # mid-snapshot, and before CURRENT names it
    dirs = {kill: str(tmp_path / kill.replace(":", "-")) for kill in kills}
    children = {kill: _spawn(tmp_path, "ingest", d, kill=kill) for kill, d in dirs.items()}
    for kill, child in children.items():
        acked = _acks(child)
        assert child.returncode == -signal.SIGKILL and len(acked) == 20, kill  # alpha acknowledged; beta stored, then killed in its save
        bm25 = Path(dirs[kill]) / "meve" / "shared" / "bm25"
        assert len([p for p in bm25.iterdir() if p.name not in ("lock", "CURRENT")]) >= 2  # the last snapshot and the killed save's leftovers
        m = _reopened(dirs[kill])
        assert len(_check_whole(m, acked)) == 40  # the first snapshot, corrected with the 20 rows stored after it
        assert m.lexical.search("beta17 lighthouse", 1)[0][0] == "beta-17"
        assert sorted(p.name for p in bm25.iterdir() if p.name not in ("lock", "CURRENT")) == [(bm25 / "CURRENT").read_text()], kill  # leftovers removed


def test_memory_writers_killed_mid_add_lose_no_acknowledged_turn(tmp_path):
    # Two embedders: each add writes the primary collection, then the second, then its heads row;
    # one writer dies after the primary (write 3), the other before its heads row (write 4).
    dirs = {kill: str(tmp_path / kill.replace(":", "-")) for kill in ("memory-write:3", "memory-write:4")}
    two = [FakeEmbedder(), FakeEmbedder(name="fake-two")]
    readers = {kill: MomentaryMemory("s", path=d, embedders=two) for kill, d in dirs.items()}  # opened before the writers: long-lived
    children = {kill: _spawn(tmp_path, "memory", d, "5", kill=kill) for kill, d in dirs.items()}
    for kill, child in children.items():
        assert _acks(child) == ["t0"] and child.returncode == -signal.SIGKILL
        assert [t.id for t in readers[kill].turns()] == ["t0", "t1"]  # the killed add reached the primary collection: stored, once
        assert readers[kill].reconstruct("turn 1 lighthouse").turns[-1].id == "t1"
        again = MomentaryMemory("s", path=dirs[kill], embedders=two)
        assert [c.count() for c in again._store.collections] == [2, 2]  # the second collection is repaired on open
        assert again.add("turn 1 about the lighthouse", "user", turn_id="t1").id == "t1" and len(again.turns()) == 2
