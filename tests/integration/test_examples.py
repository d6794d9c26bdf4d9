"""The examples run as users would run them (in-process, to reuse the loaded model)."""

from __future__ import annotations

import runpy
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    return runpy.run_path(str(EXAMPLES / name), run_name="example")


def test_langchain_rag_example(minilm, capsys, monkeypatch):
    monkeypatch.delenv("MEVE_CHAT_MODEL", raising=False)
    answer = _load("langchain_rag.py")["main"]()
    assert "fake model" in answer
    assert "MeVe context:" in capsys.readouterr().out


def test_langchain_agent_memory_example_keeps_the_model_input_small(minilm, tmp_path, monkeypatch):
    monkeypatch.delenv("MEVE_CHAT_MODEL", raising=False)
    seen = _load("langchain_agent_memory.py")["main"](200, str(tmp_path / "db"))
    assert len(seen) == 200
    sent, full = seen[-1]
    assert full > 4000 and sent <= 256 + 64  # l_max of memory plus the new message
    assert max(s for s, _ in seen) <= 256 + 64


def test_llamaindex_query_engine_example(minilm, tmp_path):
    response = _load("llamaindex_query_engine.py")["main"](db=str(tmp_path / "db"))
    assert response.source_nodes[0].node.node_id == "dunlop"
    assert sum(n.node.metadata["meve_tokens"] for n in response.source_nodes) <= 128


@pytest.mark.parametrize(("name", "args"), [("langchain_agent_memory.py", (3,)), ("llamaindex_chat_memory.py", (3,)), ("llamaindex_query_engine.py", ())])
def test_examples_leave_no_files_behind(name, args, minilm, tmp_path, monkeypatch):
    monkeypatch.delenv("MEVE_CHAT_MODEL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where their throwaway stores go
    _load(name)["main"](*args)
    assert list(tmp_path.iterdir()) == []


def test_llamaindex_chat_memory_example(minilm, tmp_path):
    full, sent, texts = _load("llamaindex_chat_memory.py")["main"](120, db=str(tmp_path / "db"))
    assert sent <= 256 < full
    assert any("Porto" in t for t in texts) and any("peanuts" in t for t in texts)
