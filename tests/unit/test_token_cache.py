"""The verifier's on-disk token cache (meve.scoring.token_cache): what is kept is read back the same
by another handle (a later process), a crash's cut record is ignored, the size bound starts the
files afresh, a folder of another model or a newer format is refused, and two checkpoints in
folders of one name never share vectors (issue 78 #4)."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest

from meve.core.errors import ConfigError, StoreError
from meve.core.formats import FormatError
from meve.scoring.late_interaction import TokenVectorCache, dequantize, quantize
from meve.scoring.token_cache import DiskTokens, cache_root, max_bytes, model_identity

DIM = 8


def _entry(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q, scale = quantize(rng.normal(size=(rows, DIM)).astype(np.float32))
    return q, scale, rng.normal(size=DIM).astype(np.float32)


def _key(i: int) -> str:
    return f"{i:040x}"


def test_what_one_handle_keeps_another_reads_back_exactly(tmp_path):
    first = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    items = [(_key(i), *_entry(i, 3 + i)) for i in range(5)]
    first.put_many(items)
    second = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    got = second.get_many([_key(2), _key(9), _key(4)])
    assert got[1] is None
    for hit, i in ((got[0], 2), (got[2], 4)):
        assert hit is not None
        q, scale, vec = hit
        np.testing.assert_array_equal(q, items[i][1])
        np.testing.assert_array_equal(scale, items[i][2])
        np.testing.assert_array_equal(vec, items[i][3])
    first.put_many([(_key(7), *_entry(7, 2))])
    assert second.get_many([_key(7)])[0] is not None  # appended by another handle after this one opened


def test_a_record_whose_data_a_crash_cut_is_ignored_and_the_next_write_repairs(tmp_path):
    store = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    store.put_many([(_key(1), *_entry(1, 4)), (_key(2), *_entry(2, 4))])
    data = tmp_path / "data.bin"
    data.write_bytes(data.read_bytes()[:-10])  # the second entry's tail never reached the disk
    fresh = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    first, second = fresh.get_many([_key(1), _key(2)])
    assert first is not None and second is None
    fresh.put_many([(_key(3), *_entry(3, 2))])
    again = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    hits = again.get_many([_key(1), _key(3)])
    assert all(h is not None for h in hits)
    np.testing.assert_array_equal(hits[1][0], _entry(3, 2)[0])


def test_past_the_size_bound_the_files_start_afresh_and_other_handles_notice(tmp_path):
    entry_bytes = 4 * (DIM + 2) + DIM * 4
    writer = DiskTokens(tmp_path, identity="m-1", dimension=DIM, limit=3 * entry_bytes)
    reader = DiskTokens(tmp_path, identity="m-1", dimension=DIM, limit=3 * entry_bytes)
    writer.put_many([(_key(i), *_entry(i, 4)) for i in range(3)])
    assert reader.get_many([_key(0)])[0] is not None
    writer.put_many([(_key(9), *_entry(9, 4))])  # a fourth would pass the bound
    assert (tmp_path / "data.bin").stat().st_size == entry_bytes
    hits = reader.get_many([_key(0), _key(9)])
    assert hits[0] is None and hits[1] is not None
    np.testing.assert_array_equal(hits[1][2], _entry(9, 4)[2])


def test_another_models_folder_or_a_newer_format_is_refused(tmp_path):
    DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    with pytest.raises(StoreError, match="MEVE_CACHE_DIR"):
        DiskTokens(tmp_path, identity="m-2", dimension=DIM)
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(FormatError, match="newer meve"):
        DiskTokens(tmp_path, identity="m-1", dimension=DIM)


def _checkpoint(folder, weights: bytes):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(weights)
    return str(folder)


def test_two_checkpoints_in_folders_of_one_name_have_different_identities(tmp_path):
    # Issue 78 #4: the shared cache was keyed by the display name, so a/model and b/model scored with each other's vectors.
    a = _checkpoint(tmp_path / "a" / "model", b"\x01" * 3_000_000)
    b = _checkpoint(tmp_path / "b" / "model", b"\x01" * 2_999_999 + b"\x02")
    same = _checkpoint(tmp_path / "c" / "model", b"\x01" * 3_000_000)
    assert model_identity(a, "float32") != model_identity(b, "float32")
    assert model_identity(a, "float32") == model_identity(same, "float32")  # the same weights elsewhere share their vectors
    assert model_identity(a, "float32") != model_identity(a, "int8")
    # A fine-tune that changes only middle layers (LoRA merged into attention): same head and tail bytes.
    middle = _checkpoint(tmp_path / "d" / "model", b"\x01" * 1_400_000 + b"\x03" * 200_000 + b"\x01" * 1_400_000)
    assert model_identity(middle, "float32") != model_identity(a, "float32")
    assert model_identity(a, "float32").startswith("model-") and model_identity(None, "float32") is None


def test_the_cache_folder_and_bound_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MEVE_CACHE_DIR", "off")
    assert cache_root() is None
    monkeypatch.setenv("MEVE_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("MEVE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "meve"
    monkeypatch.setenv("MEVE_CACHE_MAX_BYTES", "2G")
    assert max_bytes() == 2 * 2**30
    for bad in ("lots", "0", "512K"):
        monkeypatch.setenv("MEVE_CACHE_MAX_BYTES", bad)
        with pytest.raises(ConfigError, match="MEVE_CACHE_MAX_BYTES"):
            max_bytes()


def test_the_memory_cache_reads_what_memory_lacks_from_disk_and_writes_both(tmp_path):
    disk = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    first = TokenVectorCache(disk=lambda: disk)
    q, scale, vec = _entry(1, 5)
    first.keep([_key(1)], [(q, scale)], vec[None, :])
    later = TokenVectorCache(disk=lambda: DiskTokens(tmp_path, identity="m-1", dimension=DIM))  # a new process's
    (tokens,) = later.get_many([_key(1)])
    assert tokens is not None
    np.testing.assert_array_equal(tokens, dequantize(q, scale))  # the rows the first process scored
    np.testing.assert_array_equal(later.vectors([_key(1)])[_key(1)], vec)
    assert _key(1) in later and later.get_many([_key(2)]) == [None]


def _append_many(path: str, start: int) -> None:
    store = DiskTokens(path, identity="m-1", dimension=DIM)
    for i in range(start, start + 20):
        store.put_many([(_key(i), *_entry(i, 1 + i % 5))])


def test_processes_appending_at_once_leave_every_entry_whole(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), s)) for s in (0, 100, 200)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    keys = [_key(i) for s in (0, 100, 200) for i in range(s, s + 20)]
    got = store.get_many(keys)
    for key, hit in zip(keys, got, strict=True):
        i = int(key, 16)
        assert hit is not None
        np.testing.assert_array_equal(hit[0], _entry(i, 1 + i % 5)[0])


def test_a_handle_that_only_wrote_never_reads_another_generations_rows_even_when_inodes_are_reused(tmp_path):
    # Review of issue 75: rotation was detected by index.bin's inode, which ext4 reuses, so a handle that held
    # no mapping could read another passage's rows at its old offsets. Every hit must be the key's own entry.
    entry_bytes = 4 * (DIM + 2) + DIM * 4
    writer = DiskTokens(tmp_path, identity="m-1", dimension=DIM, limit=3 * entry_bytes)
    other = DiskTokens(tmp_path, identity="m-1", dimension=DIM, limit=3 * entry_bytes)
    for round_ in range(20):
        mine, theirs = range(100 * round_, 100 * round_ + 3), range(100 * round_ + 50, 100 * round_ + 53)
        writer.put_many([(_key(i), *_entry(i, 4)) for i in mine])
        other.put_many([(_key(i), *_entry(i, 4)) for i in theirs])  # past the bound: afresh, then its three
        for i, hit in zip([*mine, *theirs], writer.get_many([_key(i) for i in [*mine, *theirs]]), strict=True):
            assert hit is None or np.array_equal(hit[0], _entry(i, 4)[0]), f"round {round_}: key {i} read another entry's rows"
        assert all(h is not None for h in writer.get_many([_key(i) for i in theirs]))


def test_a_disk_tier_that_cannot_open_is_said_once_and_every_thread_waits_for_the_first_opening(tmp_path, caplog):
    # Review of issue 75: the factory was dropped before it ran, so a failed opening was silent from then on,
    # and a second thread saw no disk tier while the first was still opening it.
    import threading
    import time

    DiskTokens(tmp_path, identity="m-1", dimension=DIM)
    calls = []

    def other_models_folder() -> DiskTokens:
        calls.append(1)
        time.sleep(0.2)
        return DiskTokens(tmp_path, identity="m-2", dimension=DIM)  # another model's folder: refused

    cache = TokenVectorCache(disk=other_models_folder)
    seen: list[object] = []
    with caplog.at_level("WARNING", logger="meve"):
        threads = [threading.Thread(target=lambda: seen.append(cache.disk)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == [None, None, None] and calls == [1]
    assert sum("token-vector cache is off" in r.getMessage() for r in caplog.records) == 1
    fine = TokenVectorCache(disk=lambda: DiskTokens(tmp_path, identity="m-1", dimension=DIM))
    assert fine.disk is not None and fine.disk is fine.disk


KILLED = """
import sys
sys.path[:0] = [{root!r}, {shared!r}]
from meve.scoring import token_cache
from tests.crash import die_halfway
from meve.scoring.token_cache import DiskTokens
from tests.unit.test_token_cache import DIM, _entry, _key

store = DiskTokens({folder!r}, identity="m-1", dimension=DIM)
for i in range(3):
    store.put_many([(_key(i), *_entry(i, 2 + i))])
    print(f"ACK {{i}}", flush=True)
die_halfway(token_cache, {name!r})
store.put_many([(_key(99), *_entry(99, 4))])
"""


@pytest.mark.parametrize("name", ["data.bin", "index.bin"])
def test_a_writer_killed_mid_append_costs_only_its_unfinished_entry_and_a_reader_beside_it_reads_on(tmp_path, name):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    reader = DiskTokens(tmp_path, identity="m-1", dimension=DIM)  # open before the writer, in this process
    code = KILLED.format(root=str(root), shared=str(root / "shared"), folder=str(tmp_path), name=name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert out.returncode == -9 and out.stdout.split() == ["ACK", "0", "ACK", "1", "ACK", "2"], out.stderr[-2000:]
    for handle in (reader, DiskTokens(tmp_path, identity="m-1", dimension=DIM)):
        got = handle.get_many([_key(0), _key(1), _key(2), _key(99)])
        assert got[3] is None
        for i in range(3):
            hit = got[i]
            assert hit is not None
            np.testing.assert_array_equal(hit[0], _entry(i, 2 + i)[0])
    reader.put_many([(_key(7), *_entry(7, 3))])  # the next append starts where the last whole entry ends
    again = DiskTokens(tmp_path, identity="m-1", dimension=DIM).get_many([_key(7), _key(2)])
    assert again[0] is not None and again[1] is not None
    np.testing.assert_array_equal(again[0][0], _entry(7, 3)[0])
