"""`meve evaluate` and `meve tune` over the index a user already has (issue 77 #3): a LlamaIndex
persist dir, or a Chroma collection langchain-chroma wrote, evaluated over its own chunks; the
report leads with one sentence saying what the figures mean and says how answer strings count."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from meve.cli import main

pytestmark = pytest.mark.integration


def _corpus() -> list[dict[str, str]]:
    return json.loads(resources.files("meve").joinpath("data/demo_corpus.json").read_text(encoding="utf-8"))["passages"]


def _answer_questions(tmp_path: Path) -> Path:
    """The demo questions by their answer strings alone: evidence ids name meve's demo passages, not the app's chunks."""
    lines = resources.files("meve").joinpath("data/demo_questions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [{"id": q["id"], "question": q["question"], "answers": q["answers"]} for q in map(json.loads, lines) if q.get("answers")]
    path = tmp_path / "qs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_evaluate_reads_a_llamaindex_persist_dir_over_its_own_nodes(tmp_path, capsys):
    from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage

    from llamaindex_meve import MeVeEmbedding

    docs = [Document(text=p["text"], metadata={"title": p.get("title", "")}) for p in _corpus()]
    index = VectorStoreIndex.from_documents(docs, embed_model=MeVeEmbedding())
    index.storage_context.persist(persist_dir=str(tmp_path / "storage"))
    nodes = load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path / "storage")), embed_model=MeVeEmbedding()).docstore.docs
    qs = _answer_questions(tmp_path)
    assert main(["evaluate", "--llamaindex", str(tmp_path / "storage"), "--questions", str(qs), "--out", str(tmp_path / "ev")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert report["passages"] == len(nodes) and report["questions"] == len(qs.read_text().splitlines())
    assert report["verdict"].startswith("MeVe (this config) is ") and "top-k at equal tokens" in report["verdict"]
    # The first thing the user reads (LlamaIndex before 0.14.5 prints its own "Loading ..." line as it loads the docstore)
    assert next(line for line in printed.splitlines() if not line.startswith("Loading llama_index")) == report["verdict"]
    assert "LlamaIndex persist dir" in report["notes"][0] and "embedded again" in report["notes"][0]
    assert any(n.startswith("answers: a question's answer strings are alternatives") for n in report["notes"])
    md = (tmp_path / "ev" / "report.md").read_text()
    assert md.splitlines()[2] == report["verdict"]


def test_evaluate_reads_a_langchain_chroma_collection_and_counts_all_answers_when_asked(tmp_path, capsys):
    from langchain_chroma import Chroma

    from langchain_meve import MeVeEmbeddings

    corpus = _corpus()
    store = Chroma(collection_name="app", embedding_function=MeVeEmbeddings(), persist_directory=str(tmp_path / "db"))
    store.add_texts([p["text"] for p in corpus])
    qs = tmp_path / "both.jsonl"
    # Two strings, one in the corpus and one nowhere: "any" counts the question, "all" half of it.
    line = {"question": "Who built the running machine?", "answers": ["Karl Drais", "zqxv nowhere"]}
    qs.write_text("".join(json.dumps({"id": f"q{i}", **line}) + "\n" for i in range(3)))
    curves = {}
    for match in ("any", "all"):
        out = tmp_path / match
        assert main(["evaluate", "--db", str(tmp_path / "db"), "--collection", "app", "--questions", str(qs), "--answers", match, "--out", str(out)]) == 0
        report = json.loads((out / "report.json").read_text())
        assert report["passages"] == len(corpus) and "Chroma collection 'app'" in report["notes"][0]
        assert f"(answers='{match}'" in " ".join(report["notes"])
        curves[match] = [r["evidence"] for name in ("dense", "bm25", "hybrid") for r in report["curves"][name]]
    assert max(curves["any"]) == 1.0  # the running machine's builder is found
    assert curves["all"] == pytest.approx([e / 2 for e in curves["any"]], abs=1e-4)  # one string of two, wherever "any" found one
    capsys.readouterr()


def test_a_persist_dir_without_a_docstore_is_refused_naming_what_to_pass(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    qs = _answer_questions(tmp_path)
    assert main(["evaluate", "--llamaindex", str(tmp_path / "empty"), "--questions", str(qs)]) == 2
    assert "no docstore.json there" in capsys.readouterr().err
