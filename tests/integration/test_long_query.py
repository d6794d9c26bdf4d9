"""A very long query (issue 77 #5: 5,000 words took 35-49 s, every window of it read by the
verifier) is read as one window of the scorer's model, with a WARNING that says so without the
query's words, a note in the trace, and a shortened title where the command line shows it."""

from __future__ import annotations

import logging
import random
import subprocess
import sys

import pytest

import meve.core.logs
from meve import MeVe

pytestmark = pytest.mark.integration

TEXTS = [
    "Karl Drais built a running machine in 1817, the first two-wheeled vehicle steered by its rider.",
    "Chain lubrication keeps the drivetrain quiet and makes the chain last longer.",
    "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
    "Tyre pressure should be checked weekly, and more often in cold weather.",
]
WORDS = ["bicycle", "chain", "wheel", "history", "drais", "saddle", "brake", "tyre", "bread", "yeast", "river", "mountain", "quiet", "long"]


def _words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(meve.core.logs, "_warned", set())  # the warning is once per scorer in a process


@pytest.fixture(scope="module")
def core(minilm):
    with MeVe.from_texts(TEXTS, embedder=minilm) as m:
        yield m


def test_a_5000_word_query_warns_once_without_its_words_and_the_trace_notes_the_cut(core, caplog, fresh_warnings):
    query = "Who built the first running machine? " + _words(5000, 1)
    with caplog.at_level(logging.DEBUG, logger="meve"):
        result = core.run(query)
        again = core.run(query + " and more")
    cut = result.phase("verify").info["query_cut"]
    assert cut["read"] == 254 and cut["pieces"] > 5000  # MiniLM reads 256 pieces, [CLS] and [SEP] among them
    assert again.phase("verify").info["query_cut"]["pieces"] > cut["pieces"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "query_cut" in r.getMessage()]
    assert len(warnings) == 1 and "is scored on its first 254 of" in warnings[0]
    above_debug = " ".join(r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG)
    assert query[:40] not in above_debug and _words(5000, 1)[:40] not in above_debug
    assert any(query in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)  # the words go to DEBUG alone


def test_only_the_first_window_of_a_long_query_is_read(core):
    head = "Who built the first running machine? " + _words(400, 2)  # past one window of MiniLM
    one, two = core.run(head + " " + _words(3000, 3)), core.run(head + " " + _words(3000, 4))
    assert one.phase("verify").scores == two.phase("verify").scores  # what follows the first window changes nothing


def test_a_query_that_fits_has_no_cut_and_no_warning(core, caplog, fresh_warnings):
    with caplog.at_level(logging.WARNING, logger="meve"):
        result = core.run("Who built the first running machine?")
    assert "query_cut" not in result.phase("verify").info
    assert not [r for r in caplog.records if "query_cut" in r.getMessage()]


def test_the_framework_path_notes_the_cut_too(minilm, fresh_warnings):
    from langchain_core.documents import Document

    from langchain_meve import MeVeCompressor

    result = MeVeCompressor(embedder=minilm).run([Document(page_content=t) for t in TEXTS], "Who built it? " + _words(3000, 5))
    assert result.phase("verify").info["query_cut"]["read"] == 254


def test_the_command_line_shortens_a_long_query_in_its_titles(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("\n\n".join(TEXTS))
    query = "Who built the first running machine? " + _words(5000, 6)
    code = "import sys\nfrom meve.cli import main\nraise SystemExit(main(sys.argv[1:]))"
    run = [sys.executable, "-c", code]
    assert subprocess.run([*run, "index", str(notes), "--db", "db"], cwd=tmp_path, capture_output=True, timeout=300).returncode == 0
    for argv in (["query", query, "--db", "db"], ["demo", "--query", query]):
        out = subprocess.run([*run, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        assert f"… ({len(query)} characters)" in " ".join(out.stdout.split()), argv[0]  # rich wraps a long title
        assert len(out.stdout) < len(query) // 2, argv[0]  # the query is not printed whole
        assert query[:40] not in out.stderr and "is scored on its first 254 of" in out.stderr


def test_meves_cross_encoder_reads_the_head_of_a_long_query_instead_of_failing(minilm, fresh_warnings, caplog):
    # Its tokenizer refused a pair whose query alone passed the model's length ("Truncation error").
    with MeVe.from_texts(TEXTS, embedder=minilm, scorer="meve-cross-encoder") as m, caplog.at_level(logging.WARNING, logger="meve"):
        result = m.run("Who built the first running machine? " + _words(600, 7))
    cut = result.phase("verify").info["query_cut"]
    assert cut["pieces"] > 600 and 150 < cut["read"] <= 256 - 3 - 64  # a quarter of the pair is kept for the passage
    assert any("meve-cross-encoder" in r.getMessage() and "query_cut" in r.getMessage() for r in caplog.records)
