"""The `meve` command as a user meets it: one-line errors, read-only commands that create nothing, --replace."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from meve.cli import main
from meve.memory.session import list_sessions
from meve.retrieval.chroma import chroma_client

pytestmark = pytest.mark.integration


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    return err


def test_version(capsys):
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("meve 0.")


def test_index_errors_name_the_file_and_the_fix(tmp_path, capsys):
    db = tmp_path / "db"
    assert main(["index", str(tmp_path / "missing.md"), "--db", str(db)]) == 2
    assert "missing.md: no such file" in _err(capsys)
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\xff\xfe\x00")
    assert main(["index", str(binary), "--db", str(db)]) == 2
    assert "blob.txt: not UTF-8 text" in _err(capsys)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["index", str(bad), "--db", str(db)]) == 2
    assert "bad.json: invalid JSON at line 1" in _err(capsys)
    assert not db.exists()  # every file is read before anything is written
    a_file = tmp_path / "file-not-dir"
    a_file.write_text("x")
    notes = tmp_path / "notes.md"
    notes.write_text("Tyres last about 5000 km.")
    assert main(["index", str(notes), "--db", str(a_file)]) == 2
    assert "is a file, not a directory" in _err(capsys)


def test_read_only_commands_create_nothing(tmp_path, capsys):
    missing = tmp_path / "nothing-here"
    assert main(["query", "chain", "--db", str(missing)]) == 2
    assert "no Chroma directory" in _err(capsys)
    assert main(["memory", "list", "--db", str(missing), "--session", "u1"]) == 2
    _err(capsys)
    assert main(["memory", "reconstruct", "chain", "--db", str(missing), "--session", "u1"]) == 2
    _err(capsys)
    assert not missing.exists()


def test_unknown_session_is_an_error_unless_allow_empty(tmp_path, capsys):
    db = str(tmp_path / "db")
    assert main(["memory", "add", "My bike is a green Brompton.", "--db", db, "--session", "u1"]) == 0
    capsys.readouterr()
    assert main(["memory", "list", "--db", db, "--session", "typo"]) == 2
    assert "no session 'typo'" in (err := _err(capsys)) and "'u1'" in err
    assert main(["memory", "reconstruct", "bike", "--db", db, "--session", "typo"]) == 2
    _err(capsys)
    assert main(["memory", "list", "--db", db, "--session", "typo", "--allow-empty"]) == 0
    assert "0 turn(s)" in capsys.readouterr().out
    assert list_sessions(chroma_client(db)) == ["u1"]  # reading did not create "typo"
    assert main(["memory", "list", "--db", db, "--session", "u1"]) == 0
    assert "green Brompton" in capsys.readouterr().out


def test_reindexing_a_changed_file_needs_replace(tmp_path, capsys):
    db = str(tmp_path / "db")
    notes = tmp_path / "notes.md"
    notes.write_text("Chain lubrication keeps the drivetrain quiet. " * 30 + "\n\n" + "Tyres last about 5000 km. " * 30)
    assert main(["index", str(notes), "--db", db, "--chunk-tokens", "60"]) == 0
    capsys.readouterr()
    before = chroma_client(db).get_collection("meve").count()
    assert before > 1
    assert main(["index", str(notes), "--db", db]) == 2
    assert "--replace" in _err(capsys)
    notes.write_text("Brakes need new pads every season.")
    assert main(["index", str(notes), "--db", db, "--replace"]) == 0
    assert f"replacing {before} old chunk(s)" in capsys.readouterr().out
    col = chroma_client(db).get_collection("meve")
    assert col.count() == 1 and col.get()["documents"] == ["Brakes need new pads every season."]


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(tmp_path, capsys, monkeypatch):
    import meve.cli

    def boom(args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(meve.cli, "cmd_query", boom)
    assert main(["query", "x", "--db", str(tmp_path)]) == 1
    assert "RuntimeError: disk on fire (run again with --debug" in _err(capsys)
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["query", "x", "--db", str(tmp_path), "--debug"])


def test_memory_list_loads_no_model(tmp_path):
    db = str(tmp_path / "db")
    assert main(["memory", "add", "hello", "--db", db, "--session", "u1"]) == 0
    code = (
        "import sys\nfrom meve.cli import main\n"
        f"assert main(['memory', 'list', '--db', {db!r}, '--session', 'u1']) == 0\n"
        "print('LOADED', sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=Path(db).parent)
    assert "LOADED []" in out.stdout and "hello" in out.stdout


def test_a_process_using_meve_prints_nothing_of_its_own(tmp_path):
    code = (
        "from meve import MeVe, MomentaryMemory\n"
        "m = MeVe.from_texts(['Karl Drais built a running machine in 1817.', 'Sourdough needs wild yeast.'])\n"
        "m.run('Who built the running machine?')\n"
        "mem = MomentaryMemory('quiet', path='db')\n"
        "mem.add('My bike is green.')\n"
        "mem.reconstruct('bike colour')\n"
        "print('DONE')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MEVE_VERBOSE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True, cwd=tmp_path, env=env)
    assert out.stdout == "DONE\n" and out.stderr == "", out.stderr


def test_meve_shares_a_directory_a_users_own_chroma_client_opened(tmp_path):
    import chromadb

    from meve import MomentaryMemory
    from tests.fakes import FakeEmbedder

    path = str(tmp_path / "shared-db")
    theirs = chromadb.PersistentClient(path=path)  # default settings, unlike meve's
    theirs.get_or_create_collection("their-data").add(ids=["a"], documents=["x"], embeddings=[[0.1, 0.2, 0.3]])
    mem = MomentaryMemory("u1", path=path, embedders=[FakeEmbedder()])
    mem.add("hello")
    names = {c.name for c in theirs.list_collections()}
    assert names == {"their-data", mem._store.collections[0].name, mem._store.heads.name}  # one instance on the directory: each sees the other's data


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root bypasses file permissions, so a read-only directory cannot be made")
def test_a_read_only_directory_is_a_clear_error(tmp_path):
    from meve import StoreError

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="not readable and writable"):
            chroma_client(str(ro))
    finally:
        ro.chmod(0o755)


BAD_ARGUMENTS = [
    (["index", "n.md", "--db", ""], "argument --db: '' is not allowed: expected a directory path"),
    (["index", "n.md", "--db", "d", "--chunk-tokens", "0"], "argument --chunk-tokens: 0 is not allowed: expected an int in [8, 100000]"),
    (["index", "n.md", "--db", "d", "--chunk-tokens", "-5"], "argument --chunk-tokens: -5 is not allowed"),
    (["index", "n.md", "--db", "d", "--collection", ""], "argument --collection: '' is not allowed: expected 3-512 letters"),
    (["query", "", "--db", "d"], "argument query: '' is not allowed: expected a non-empty question"),
    (["query", "q", "--db", "d", "--t-max", "0"], "argument --t-max: 0 is not allowed: expected an int >= 1"),
    (["query", "q", "--db", "d", "--tau", "1.5"], "argument --tau: '1.5' is not allowed: expected a number in [0.0, 1.0]"),
    (["calibrate", "--db", "d", "--target", "0"], "argument --target: '0' is not allowed: expected a number in (0.0, 1.0]"),
    (["calibrate", "--db", "d", "--queries", "3"], "argument --queries: 3 is not allowed: expected an int in [10, 100000]"),
    (["query", "q", "--db", "d", "--calibration", "n.md"], "argument --calibration: 'n.md' is not a calibration file"),
    (["memory", "list", "--db", "d", "--session", "s", "--last", "-1"], "argument --last: -1 is not allowed: expected an int >= 0"),
    (["memory", "reconstruct", "q", "--db", "d", "--session", "s", "--show", "-2"], "argument --show: -2 is not allowed"),
    (["memory", "reconstruct", "q", "--db", "d", "--session", "s", "--l-max", "0"], "argument --l-max: 0 is not allowed: expected an int >= 1"),
    (["memory", "add", "", "--db", "d", "--session", "s"], "argument text: '' is not allowed"),
    (["memory", "add", "hi", "--db", "d", "--session", "s", "--role", "boss"], "argument --role: 'boss' is not allowed: expected one of user, assistant"),
    (["memory", "add", "hi", "--db", "d", "--session", "s", "--timestamp", "2024-01-01"], "has no timezone"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGUMENTS, ids=[" ".join(a)[:60] for a, _ in BAD_ARGUMENTS])
def test_bad_arguments_are_refused_in_one_line_before_anything_loads_or_is_written(tmp_path, argv, message):
    (tmp_path / "n.md").write_text("A note about bicycles.")
    probe = "import sys, runpy; sys.argv = ['meve', *sys.argv[1:]]; from meve.cli import main; code = main()"
    heavy = "; import sys; print(','.join(m for m in ('torch', 'sentence_transformers', 'chromadb') if m in sys.modules)); raise SystemExit(code)"
    out = subprocess.run([sys.executable, "-c", probe + heavy, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    err = out.stderr.strip()
    assert message in err and err.count("\n") == 0 and "Traceback" not in err, err
    assert out.stdout.strip() == ""  # refused while parsing: no model or Chroma module was even imported
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]  # nothing written


def _stored(db: Path) -> dict[str, str]:
    """Every file under ``db`` by its sha256: what \"changes nothing on disk\" is checked against."""
    return {str(f.relative_to(db)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(db.rglob("*")) if f.is_file()}


def test_read_only_commands_change_no_stored_data(tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("Chains last longer when they are cleaned and oiled every few hundred kilometres.")
    db = tmp_path / "db"
    assert main(["index", str(notes), "--db", str(db)]) == 0
    assert main(["memory", "add", "I ride a green Brompton.", "--db", str(db), "--session", "u1"]) == 0
    capsys.readouterr()
    before = _stored(db)
    commands = [
        ["query", "How do I look after the chain?", "--db", str(db), "--json"],
        ["memory", "list", "--db", str(db), "--session", "u1"],
        ["memory", "reconstruct", "bike colour", "--db", str(db), "--session", "u1", "--json"],
        ["memory", "list", "--db", str(db), "--session", "nobody", "--allow-empty"],
    ]
    # A fresh process, as a user runs them: Chroma writes whenever a process opens the directory
    # (a lock row, index flushes), so the read-only commands must read a copy.
    script = f"from meve.cli import main; raise SystemExit(max(main(argv) for argv in {commands!r}))"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert _stored(db) == before


def test_calibrate_writes_a_file_that_query_applies(tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text(
        "\n\n".join(
            f"Note {i}. Chains last longer when they are cleaned and oiled every {100 * (i + 1)} kilometres. "
            f"Tyre pressure {i} should be checked weekly. Brakes {i} need new pads after wet rides."
            for i in range(12)
        )
    )
    db, cal = tmp_path / "db", tmp_path / "cal.json"
    assert main(["index", str(notes), "--db", str(db), "--chunk-tokens", "40"]) == 0
    before = _stored(db)
    assert main(["calibrate", "--db", str(db), "--queries", "10", "--out", str(cal)]) == 0
    assert _stored(db) == before  # calibrate only reads the index
    chosen = json.loads(cal.read_text())["config"]
    assert set(chosen) >= {"tau", "cut"}
    capsys.readouterr()
    assert main(["query", "How often should I oil the chain?", "--db", str(db), "--calibration", str(cal), "--json"]) == 0
    used = json.loads(capsys.readouterr().out)["config"]
    assert (used["tau"], used["cut"]) == (chosen["tau"], chosen["cut"])
    assert main(["query", "How often should I oil the chain?", "--db", str(db), "--calibration", str(cal), "--tau", "0.9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["tau"] == 0.9  # a flag given on the command line wins
