"""meve's Chroma clients beside an app's own in one process, as an app runs: no environment
variable set (the Makefile's ANONYMIZED_TELEMETRY=False hid the clash from the suite), either order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, chromadb
from meve import MeVe
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder, FakeScorer

order, where = sys.argv[1], sys.argv[2]

def app_memory():
    from langchain_chroma import Chroma
    from langchain_core.embeddings import FakeEmbeddings
    store = Chroma(collection_name="app-notes", embedding_function=FakeEmbeddings(size=16))
    store.add_texts(["the app's own note"])
    return store.similarity_search("note", k=1)[0].page_content

def meve_memory():
    m = MeVe.from_texts(["Karl Drais built a running machine in 1817."], embedder=FakeEmbedder(), scorer=FakeScorer())
    return m.run("running machine").documents[0].text

def app_disk():
    col = chromadb.PersistentClient(path=where).get_or_create_collection("app-rows")
    col.upsert(ids=["a"], embeddings=[[0.1, 0.2]], documents=["the app's row"])
    return col.get(ids=["a"])["documents"][0]

def meve_disk():
    client = chroma_client(where)
    m = MeVe.from_texts(["Dunlop made the pneumatic tyre."], embedder=FakeEmbedder(), scorer=FakeScorer(), client=client, collection_name="meve-rows")
    return m.run("pneumatic tyre").documents[0].text

steps = {"app-first": [app_memory, meve_memory, app_disk, meve_disk], "meve-first": [meve_memory, app_memory, meve_disk, app_disk]}[order]
print([step() for step in steps])
"""


@pytest.mark.parametrize("order", ["app-first", "meve-first"])
def test_an_apps_own_chroma_clients_and_meves_share_one_process(tmp_path, order):
    env = {k: v for k, v in os.environ.items() if k != "ANONYMIZED_TELEMETRY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared"), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-c", SCRIPT, order, str(tmp_path / "db")]
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout.strip().splitlines()[-1]
    for text in ("the app's own note", "Karl Drais built a running machine in 1817.", "the app's row", "Dunlop made the pneumatic tyre."):
        assert text in out


CLOSE = """
import sys, chromadb
from chromadb.config import Settings
from meve.memory.memory import MomentaryMemory
from tests.fakes import FakeEmbedder

where, settings = sys.argv[1], sys.argv[2]
memory = MomentaryMemory("s1", path=where, embedders=[FakeEmbedder()])
memory.add("The office door code is 4412.", role="user")
given = {"default": Settings(), "telemetry-off": Settings(anonymized_telemetry=False), "reset": Settings(allow_reset=True)}[settings]
try:
    app = chromadb.PersistentClient(path=where, settings=given)
except ValueError as exc:
    print("refused:", exc)
    raise SystemExit(0)
col = app.get_or_create_collection("app-rows")
col.upsert(ids=["a"], embeddings=[[0.1, 0.2]], documents=["the app's row"])
memory.close()
col.upsert(ids=["b"], embeddings=[[0.3, 0.4]], documents=["written after meve closed"])
print(sorted(app.get_collection("app-rows").get()["documents"]), app.heartbeat() > 0)
"""


@pytest.mark.parametrize("settings", ["default", "telemetry-off"])
def test_closing_meve_leaves_the_apps_client_on_the_same_directory_working(tmp_path, settings):
    # Issue 78 #1: meve's last handle stopped the Chroma instance the app's client shared ('RustBindingsAPI' object
    # has no attribute 'bindings'), and an app passing Settings(anonymized_telemetry=False) after meve was refused.
    env = {k: v for k, v in os.environ.items() if k != "ANONYMIZED_TELEMETRY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", CLOSE, str(tmp_path / "db"), settings], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[\"the app's row\", 'written after meve closed'] True"


def test_an_app_client_whose_settings_change_what_is_stored_gets_meves_error_naming_the_fix(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ANONYMIZED_TELEMETRY"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "shared"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", CLOSE, str(tmp_path / "db"), "reset"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout.strip().splitlines()[-1]
    assert out.startswith("refused: meve opened Chroma at") and "allow_reset" in out and "create your client before meve's" in out
