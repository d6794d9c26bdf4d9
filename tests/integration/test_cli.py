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
from meve.core.text import chunk_text
from meve.core.tokens import get_token_counter
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
    ids = set(_rows(db))
    assert main(["index", str(notes), "--db", db, "--chunk-tokens", "60", "--replace"]) == 0
    assert f"indexed 0 chunks from 1 file(s) into {db} (collection 'meve', {before} in all, {before} unchanged)" in capsys.readouterr().out
    assert set(_rows(db)) == ids  # unchanged chunks keep their rows: nothing re-embedded, nothing deleted
    notes.write_text("Brakes need new pads every season.")
    assert main(["index", str(notes), "--db", db]) == 2  # a changed file's chunks have new ids, but its source is indexed
    assert "already in collection 'meve'" in (err := _err(capsys)) and f"{notes.resolve()} ({before} chunks)" in err
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


def test_a_read_only_directory_is_a_clear_error(read_only_dir):
    from meve import StoreError

    with pytest.raises(StoreError, match="not readable and writable"):
        chroma_client(str(read_only_dir))


BAD_ARGUMENTS = [
    (["index", "n.md", "--db", ""], "argument --db: '' is not allowed: expected a directory path"),
    (["index", "n.md", "--db", "d", "--chunk-tokens", "0"], "argument --chunk-tokens: 0 is not allowed: expected an int in [8, 100000]"),
    (["index", "n.md", "--db", "d", "--chunk-tokens", "-5"], "argument --chunk-tokens: -5 is not allowed"),
    (["index", "n.md", "--db", "d", "--collection", ""], "argument --collection: '' is not allowed: expected 3-512 letters"),
    (["index", "n.md", "--db", "d", "--precision", "int4"], "argument --precision: invalid choice: 'int4'"),
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


def test_calibrate_writes_a_file_that_query_applies(tmp_path, capsys, bike_notes):
    notes = bike_notes
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


def _rows(db: Path | str) -> dict[str, tuple[str, str]]:
    """Every chunk in the CLI's collection: id -> (source file, text)."""
    got = chroma_client(str(db)).get_collection("meve").get(include=["documents", "metadatas"])
    return {i: (m["source"], d) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def test_replace_adds_the_new_chunks_before_deleting_the_old_even_when_the_bm25_snapshot_lags(tmp_path, capsys):
    # Issue 52 #3: the BM25 snapshot is saved when the index has grown by 5% since the last one,
    # so rows added after it (here 2 of 64) are only in the collection. --replace used to delete
    # the file's chunks, reopen that stale snapshot (which still held their ids), refuse with
    # "ids already in collection" and leave the file unindexed, on every retry.
    db = tmp_path / "db"
    notes, big, extra = tmp_path / "notes.md", tmp_path / "big.md", tmp_path / "extra.md"
    notes.write_text("Chain lubrication keeps the drivetrain quiet.\n\nTyres last about 5000 km.")
    big.write_text("\n\n".join(f"Fact {i}: spoke number {i} holds {i * 7} newtons of tension on a wheel." for i in range(60)))
    extra.write_text("Brake pads wear faster in the rain.\n\nSaddles come in many widths.")
    assert main(["index", str(notes), str(big), "--db", str(db), "--chunk-tokens", "20"]) == 0
    assert main(["index", str(extra), "--db", str(db), "--chunk-tokens", "20"]) == 0
    capsys.readouterr()
    others = {pid: row for pid, row in _rows(db).items() if row[0] != str(notes.resolve())}
    notes.write_text("Chain lubrication keeps the drivetrain quiet.\n\nTyres now last about 8000 km.")
    for _ in range(2):  # a retry must behave the same
        assert main(["index", str(notes), "--db", str(db), "--chunk-tokens", "20", "--replace"]) == 0, capsys.readouterr().err
        capsys.readouterr()
        rows = _rows(db)
        mine = " ".join(text for source, text in rows.values() if source == str(notes.resolve()))
        assert "8000 km" in mine and "5000" not in mine
        assert {pid: row for pid, row in rows.items() if row[0] != str(notes.resolve())} == others


def test_replace_that_cannot_add_the_new_chunks_deletes_nothing(tmp_path, capsys):
    # The collection was built by another embedder (e.g. an application sharing --db): the new
    # chunks cannot go in, so the file's chunks stored there must stay (they used to be deleted first).
    import chromadb

    notes = tmp_path / "notes.md"
    notes.write_text("Chain lubrication keeps the drivetrain quiet.")
    db = tmp_path / "db"
    theirs = chroma_client(str(db)).create_collection("meve", metadata={"hnsw:space": "cosine", "meve:embedder": "their-model"})
    theirs.add(ids=["notes#0"], documents=["An older note."], metadatas=[{"source": str(notes.resolve()), "chunk": 0}], embeddings=[[0.1, 0.2, 0.3]])
    del theirs, chromadb
    assert main(["index", str(notes), "--db", str(db), "--replace"]) == 2
    assert "their-model" in _err(capsys)
    assert _rows(db) == {"notes#0": (str(notes.resolve()), "An older note.")}


def test_files_with_the_same_name_in_two_folders_keep_their_own_chunks(tmp_path, capsys):
    # Issue 52 #6: chunk ids came from the file stem, so a/notes.txt and b/notes.txt clashed, and
    # the --replace the error suggested deleted the other file's chunks.
    db = tmp_path / "db"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "notes.txt", tmp_path / "b" / "notes.txt"
    a.write_text("Chain lubrication keeps the drivetrain quiet.")
    b.write_text("Sourdough rises thanks to wild yeast.")
    assert main(["index", str(a), str(tmp_path / "b" / ".." / "a" / "notes.txt"), "--db", str(db)]) == 2
    assert "given more than once" in _err(capsys) and not db.exists()
    assert main(["index", str(a), str(b), "--db", str(db)]) == 0, _err(capsys)
    c = tmp_path / "c"
    c.mkdir()
    (c / "notes.txt").write_text("A third folder's note about saddles.")
    assert main(["index", str(c / "notes.txt"), "--db", str(db)]) == 0, _err(capsys)
    capsys.readouterr()
    a.write_text("Chain wax keeps the drivetrain clean.")
    assert main(["index", str(a), "--db", str(db), "--replace"]) == 0, _err(capsys)
    capsys.readouterr()
    assert sorted(_rows(db).values()) == sorted(
        [
            (str(a.resolve()), "Chain wax keeps the drivetrain clean."),
            (str(b.resolve()), "Sourdough rises thanks to wild yeast."),
            (str((c / "notes.txt").resolve()), "A third folder's note about saddles."),
        ]
    )


def test_a_file_whose_folder_moved_is_recognised_not_stored_again(tmp_path, capsys):
    # Issue 66: the chunk ids hash the resolved path, so the same file indexed from its new folder was stored a second time.
    db, old, new = tmp_path / "db", tmp_path / "docs", tmp_path / "moved" / "docs"
    old.mkdir()
    (old / "notes.md").write_text("Chain lubrication keeps the drivetrain quiet. " * 30 + "\n\n" + "Tyres last about 5000 km. " * 30)
    (old / "other.md").write_text("A deleted file that happened to share nothing.")
    assert main(["index", str(old / "notes.md"), "--db", str(db), "--chunk-tokens", "60"]) == 0
    rows = _rows(db)
    new.parent.mkdir()
    old.rename(new)
    assert main(["index", str(new / "notes.md"), "--db", str(db), "--chunk-tokens", "60"]) == 0, _err(capsys)
    out = capsys.readouterr().out
    assert f"indexed 0 chunks from 1 file(s) into {db} (collection 'meve', {len(rows)} in all, {len(rows)} unchanged" in out
    assert "its chunks now name the new path" in out
    assert _rows(db) == {pid: (str((new / "notes.md").resolve()), text) for pid, (_, text) in rows.items()}  # the same rows, the new path
    assert main(["index", str(new / "notes.md"), "--db", str(db), "--chunk-tokens", "60"]) == 2  # now indexed at its path, as any file
    assert "--replace" in _err(capsys)
    edited = "Chain lubrication keeps the drivetrain quiet. " * 30 + "\n\n" + "Tyres last about 5000 km. " * 26 + "Brakes need new pads every season."
    (new / "notes.md").write_text(edited)
    new.rename(tmp_path / "docs")  # moved back, and its end edited (most chunks unchanged: the same file; issue 78 #2)
    back = str((tmp_path / "docs" / "notes.md").resolve())
    assert main(["index", back, "--db", str(db), "--chunk-tokens", "60"]) == 2
    assert "its text changed; add --replace" in _err(capsys)
    assert main(["index", back, "--db", str(db), "--chunk-tokens", "60", "--replace"]) == 0, _err(capsys)
    now = _rows(db)
    assert {src for src, _ in now.values()} == {back} and any("Brakes need new pads" in t for _, t in now.values())
    assert sorted(t for _, t in now.values()) == sorted(chunk_text(edited, 60, get_token_counter()))  # the stale chunks deleted
    assert len(set(now) & set(rows)) == 8  # the unchanged chunks kept their rows


def test_a_new_file_named_like_a_deleted_one_is_indexed_beside_it(tmp_path, capsys):
    db, a = tmp_path / "db", tmp_path / "a"
    a.mkdir()
    (a / "notes.md").write_text("Chain lubrication keeps the drivetrain quiet.")
    assert main(["index", str(a / "notes.md"), "--db", str(db)]) == 0
    (a / "notes.md").unlink()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.md").write_text("Sourdough rises thanks to wild yeast.")
    assert main(["index", str(tmp_path / "b" / "notes.md"), "--db", str(db)]) == 0, _err(capsys)
    assert sorted(t for _, t in _rows(db).values()) == ["Chain lubrication keeps the drivetrain quiet.", "Sourdough rises thanks to wild yeast."]


def test_a_namesake_sharing_one_boilerplate_chunk_is_not_taken_for_a_moved_file(tmp_path, capsys):
    # Issue 78 #2: a file name and one shared chunk made another document "moved", and --replace deleted the first one's chunks.
    db, tmpdir, docs = tmp_path / "db", tmp_path / "tmp", tmp_path / "docs"
    tmpdir.mkdir()
    docs.mkdir()
    footer = "Copyright the Example Project authors, all rights reserved."
    first = "\n\n".join([footer] + [f"Section {i} of the first guide covers chain lubrication step {i}." for i in range(6)])
    (tmpdir / "page.md").write_text(first)
    assert main(["index", str(tmpdir / "page.md"), "--db", str(db), "--chunk-tokens", "20"]) == 0, _err(capsys)
    before = _rows(db)
    assert len(before) > 3
    (tmpdir / "page.md").unlink()
    tmpdir.rmdir()
    second = "\n\n".join([footer] + [f"Part {i} of another page is about sourdough and wild yeast {i}." for i in range(6)])
    (docs / "page.md").write_text(second)
    assert main(["index", str(docs / "page.md"), "--db", str(db), "--chunk-tokens", "20", "--replace"]) == 0, _err(capsys)
    capsys.readouterr()
    after = _rows(db)
    assert {pid: row for pid, row in after.items() if pid in before} == before  # the first document's chunks all stay
    assert any("sourdough" in text for _, text in after.values())


def test_a_two_chunk_namesake_sharing_one_chunk_is_not_taken_for_a_moved_file(tmp_path, capsys):
    # Review of issue 78 #2: half of a 2-chunk file (its footer) was enough to call another document "moved".
    db, tmpdir, docs = tmp_path / "db", tmp_path / "tmp", tmp_path / "docs"
    tmpdir.mkdir()
    docs.mkdir()
    footer = "Copyright the Example Project authors, all rights reserved."
    (tmpdir / "page.md").write_text(footer + "\n\n" + "The first guide covers chain lubrication in wet weather.")
    assert main(["index", str(tmpdir / "page.md"), "--db", str(db), "--chunk-tokens", "20"]) == 0, _err(capsys)
    before = _rows(db)
    assert len(before) == 2
    (tmpdir / "page.md").unlink()
    tmpdir.rmdir()
    (docs / "page.md").write_text(footer + "\n\n" + "Another page is about sourdough and wild yeast.")
    assert main(["index", str(docs / "page.md"), "--db", str(db), "--chunk-tokens", "20", "--replace"]) == 0, _err(capsys)
    after = _rows(db)
    assert {pid: row for pid, row in after.items() if pid in before} == before


def test_a_moved_tree_with_two_files_of_one_name_is_recognised_file_by_file(tmp_path, capsys):
    # Issue 78 #2: two README.md in a moved tree were matched by name alone: a false "its text changed", and --replace left a duplicate.
    db, old, new = tmp_path / "db", tmp_path / "tree", tmp_path / "moved" / "tree"
    for sub, topic in (("a", "chain lubrication"), ("b", "sourdough starters")):
        (old / sub).mkdir(parents=True)
        (old / sub / "README.md").write_text("\n\n".join(f"Note {i} on {topic}: detail number {i} of several." for i in range(5)))
    files = [str(old / "a" / "README.md"), str(old / "b" / "README.md")]
    assert main(["index", *files, "--db", str(db), "--chunk-tokens", "20"]) == 0, _err(capsys)
    rows = _rows(db)
    new.parent.mkdir()
    old.rename(new)
    moved = [str(new / "a" / "README.md"), str(new / "b" / "README.md")]
    assert main(["index", *moved, "--db", str(db), "--chunk-tokens", "20"]) == 0, _err(capsys)
    capsys.readouterr()
    now = _rows(db)
    assert set(now) == set(rows)  # the same rows, nothing stored twice
    for pid, (src, text) in rows.items():
        assert now[pid] == (src.replace(str(old.resolve()), str(new.resolve())), text)


def test_replace_deletes_a_corpus_indexed_under_the_former_stem_ids_by_source(tmp_path, capsys):
    # Before issue 52 chunk ids were "<stem>#<j>"; the rows kept the resolved path as "source",
    # which --replace deletes by, so such a corpus is refused without --replace and replaced with it.
    from meve import MeVe

    notes, db = tmp_path / "notes.md", tmp_path / "db"
    notes.write_text("Brakes need new pads every season.")
    source = str(notes.resolve())
    old = ["Chain lubrication keeps the drivetrain quiet.", "Tyres last about 5000 km."]
    MeVe.from_texts(
        old, ids=["notes#0", "notes#1"], metadatas=[{"source": source, "chunk": j} for j in range(2)], client=chroma_client(str(db)), collection_name="meve"
    )
    assert main(["index", str(notes), "--db", str(db)]) == 2
    assert f"{source} (2 chunks)" in _err(capsys)
    assert main(["index", str(notes), "--db", str(db), "--replace"]) == 0
    assert "replacing 2 old chunk(s)" in capsys.readouterr().out
    ((pid, row),) = _rows(db).items()
    assert row == (source, "Brakes need new pads every season.") and pid.startswith("notes.md#0@")


def test_an_int8_index_is_queried_in_int8_and_never_mixed_with_float32_vectors(tmp_path, capsys):
    db = str(tmp_path / "db")
    notes = tmp_path / "notes.md"
    notes.write_text("Chain lubrication keeps the drivetrain quiet. Tyres last about 5000 km.")
    assert main(["index", str(notes), "--db", db, "--precision", "int8"]) == 0
    capsys.readouterr()
    assert chroma_client(db).get_collection("meve").metadata["meve:embedder"] == "all-MiniLM-L6-v2 (int8)"
    assert main(["query", "How long do tyres last?", "--db", db, "--json"]) == 0  # no flag: the index's precision
    result = json.loads(capsys.readouterr().out)
    assert result["documents"] and result["trace"][0]["info"]["embedder"] == "all-MiniLM-L6-v2 (int8)"
    more = tmp_path / "more.md"
    more.write_text("Brakes need new pads every season.")
    assert main(["index", str(more), "--db", db, "--precision", "float32"]) == 2
    assert "all-MiniLM-L6-v2 (int8)" in _err(capsys)
    assert chroma_client(db).get_collection("meve").count() == 1  # refused before anything was added
    assert main(["index", str(more), "--db", db]) == 0  # no flag: the index's precision
    assert chroma_client(db).get_collection("meve").count() == 2
