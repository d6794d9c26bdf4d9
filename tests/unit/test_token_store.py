"""The on-disk token-vector store: product quantisation, persistence across opens and processes,
and recovery from a writer that died mid-append (no model: vectors are random unit rows)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from meve.core.errors import ConfigError, StoreError
from meve.scoring.late_interaction import text_key
from meve.scoring.token_store import CODEBOOK_PATH, ProductQuantizer, TokenStore


def _unit(rng: np.random.Generator, n: int, d: int = 384) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def pq() -> ProductQuantizer:
    return ProductQuantizer.fit(_unit(np.random.default_rng(0), 2000), m=32, k=16, iters=3)


def test_a_vector_made_of_centroids_decodes_to_itself(pq):
    codes = np.random.default_rng(1).integers(0, pq.k, size=(5, pq.m)).astype(np.uint8)
    vectors = pq.centroids[np.arange(pq.m), codes].reshape(5, -1)
    assert np.array_equal(pq.encode(vectors), codes)
    decoded = pq.decode(codes)
    np.testing.assert_allclose(np.linalg.norm(decoded, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(decoded, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), rtol=1e-5)


def test_the_shipped_codebook_keeps_a_real_shape():
    shipped = ProductQuantizer.load(CODEBOOK_PATH)
    assert (shipped.m, shipped.k, shipped.dimension) == (32, 256, 384)


def test_bad_shapes_are_refused(pq):
    with pytest.raises(ConfigError, match="vectors"):
        pq.encode(np.zeros((3, 100), np.float32))
    with pytest.raises(ConfigError, match="m"):
        ProductQuantizer.fit(np.zeros((300, 10), np.float32), m=3)


def test_vectors_survive_a_reopen_and_are_found_by_another_handle(pq, tmp_path):
    rng = np.random.default_rng(2)
    a = TokenStore(tmp_path / "tok", pq)
    b = TokenStore(tmp_path / "tok", pq)  # opened before anything was written: another replica
    items = [(text_key(f"passage {i}"), _unit(rng, 3 + i)) for i in range(4)]
    a.put_many(items)
    for key, tokens in items:
        got = b.get(key)
        assert got is not None and got.shape == tokens.shape
        np.testing.assert_array_equal(got, pq.decode(pq.encode(tokens)))
    reopened = TokenStore(tmp_path / "tok", pq)
    assert len(reopened) == 4 and items[2][0] in reopened
    assert reopened.get(text_key("never stored")) is None


def test_a_digest_ending_in_a_zero_byte_is_found(pq, tmp_path):
    text = next(f"t{i}" for i in range(10_000) if text_key(f"t{i}").endswith("00"))
    TokenStore(tmp_path / "tok", pq).put_many([(text_key(text), _unit(np.random.default_rng(5), 3))])
    again = TokenStore(tmp_path / "tok", pq)
    assert text_key(text) in again and again.get(text_key(text)).shape == (3, 384)


def test_putting_a_key_twice_keeps_the_first(pq, tmp_path):
    rng = np.random.default_rng(3)
    s = TokenStore(tmp_path / "tok", pq)
    key = text_key("same text")
    first = _unit(rng, 4)
    s.put_many([(key, first)])
    s.put_many([(key, _unit(rng, 9))])
    assert s.get(key).shape == (4, 384)
    assert (tmp_path / "tok" / "codes.bin").stat().st_size == 4 * pq.m


def test_a_crash_mid_append_loses_only_the_unfinished_entry(pq, tmp_path):
    rng = np.random.default_rng(4)
    s = TokenStore(tmp_path / "tok", pq)
    kept = (text_key("kept"), _unit(rng, 5))
    s.put_many([kept])
    with open(tmp_path / "tok" / "codes.bin", "ab") as fh:  # rows of an entry whose record never came
        fh.write(b"\x07" * (pq.m * 3 + 5))
    with open(tmp_path / "tok" / "index.bin", "ab") as fh:  # half a record
        fh.write(b"\x01" * 10)
    again = TokenStore(tmp_path / "tok", pq)
    assert len(again) == 1
    late = (text_key("after the crash"), _unit(rng, 2))
    again.put_many([late])
    fresh = TokenStore(tmp_path / "tok", pq)
    np.testing.assert_array_equal(fresh.get(kept[0]), pq.decode(pq.encode(kept[1])))
    np.testing.assert_array_equal(fresh.get(late[0]), pq.decode(pq.encode(late[1])))
    assert (tmp_path / "tok" / "codes.bin").stat().st_size == 7 * pq.m


def test_a_folder_written_with_another_codebook_is_refused(pq, tmp_path):
    TokenStore(tmp_path / "tok", pq)
    other = ProductQuantizer(pq.centroids * 2)
    with pytest.raises(StoreError, match="tok"):
        TokenStore(tmp_path / "tok", other)


def _writer(folder: str, centroids: np.ndarray, worker: int) -> None:
    pq = ProductQuantizer(centroids)
    store = TokenStore(folder, pq)
    rng = np.random.default_rng(100 + worker)
    for i in range(20):
        store.put_many([(text_key(f"w{worker}-{i}"), _unit(rng, 2 + i % 5))])


def test_processes_appending_at_once_never_interleave(pq, tmp_path):
    folder = str(tmp_path / "tok")
    TokenStore(folder, pq)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(folder, pq.centroids, w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = TokenStore(folder, pq)
    assert len(s) == 60
    for w in range(3):
        rng = np.random.default_rng(100 + w)
        for i in range(20):
            expected = _unit(rng, 2 + i % 5)
            np.testing.assert_array_equal(s.get(text_key(f"w{w}-{i}")), pq.decode(pq.encode(expected)))
    assert os.path.getsize(os.path.join(folder, "codes.bin")) == sum(2 + i % 5 for i in range(20)) * 3 * pq.m


@pytest.mark.parametrize("meta", [b"", b'{"format": 1, "m": 3'], ids=["emptied", "cut-short"])
def test_an_unreadable_meta_is_replaced_and_the_vectors_beside_it_dropped(pq, tmp_path, caplog, meta):
    rng = np.random.default_rng(5)
    folder = tmp_path / "tok"
    TokenStore(folder, pq).put_many([(text_key("old"), _unit(rng, 3))])
    (folder / "meta.json").write_bytes(meta)
    (folder / "meta.json.tmp-0badf00d").write_bytes(b'{"form')  # what a process killed while writing it left
    with caplog.at_level("WARNING", logger="meve"):
        s = TokenStore(folder, pq)
    # Which codebook wrote the old vectors cannot be known: they are dropped (re-encoded when a query needs them).
    assert "cannot be read" in caplog.text and len(s) == 0 and s.get(text_key("old")) is None
    assert json.loads((folder / "meta.json").read_text())["codebook"] == pq.digest
    assert sorted(p.name for p in folder.iterdir()) == ["lock", "meta.json"]
    fresh = _unit(rng, 2)
    s.put_many([(text_key("new"), fresh)])
    np.testing.assert_array_equal(TokenStore(folder, pq).get(text_key("new")), pq.decode(pq.encode(fresh)))


KILLED_MID_APPEND = """
import sys
import numpy as np
sys.path[:0] = [{root!r}, {shared!r}]
from meve.scoring import token_store
from tests.crash import die_halfway
from meve.scoring.token_store import ProductQuantizer, TokenStore

pq = ProductQuantizer(np.load({centroids!r}))
store = TokenStore({folder!r}, pq)
rng = np.random.default_rng(7)
for i in range(3):
    store.put_codes([(f"{{i:040x}}", rng.integers(0, pq.k, size=(4, pq.m), dtype=np.uint8))])
    print(f"ACK {{i}}", flush=True)
die_halfway(token_store, {name!r})
store.put_codes([("f" * 40, rng.integers(0, pq.k, size=(4, pq.m), dtype=np.uint8))])
"""


@pytest.mark.parametrize("name", ["codes.bin", "index.bin"])
def test_a_writer_killed_mid_append_loses_only_its_unfinished_entry(pq, tmp_path, name):
    import subprocess
    import sys

    np.save(tmp_path / "c.npy", pq.centroids)
    root = Path(__file__).resolve().parents[2]
    code = KILLED_MID_APPEND.format(root=str(root), shared=str(root / "shared"), centroids=str(tmp_path / "c.npy"), folder=str(tmp_path / "tok"), name=name)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9 and out.stdout.split() == ["ACK", "0", "ACK", "1", "ACK", "2"], out.stderr[-2000:]
    rng = np.random.default_rng(7)
    expected = [rng.integers(0, pq.k, size=(4, pq.m), dtype=np.uint8) for _ in range(3)]
    s = TokenStore(tmp_path / "tok", pq)
    assert len(s) == 3 and ("f" * 40) not in s
    for i, codes in enumerate(expected):
        np.testing.assert_array_equal(s.get(f"{i:040x}"), pq.decode(codes))
    s.put_codes([("e" * 40, expected[0])])  # the next append starts where the last whole entry ends
    again = TokenStore(tmp_path / "tok", pq)
    np.testing.assert_array_equal(again.get("e" * 40), pq.decode(expected[0]))
    assert (tmp_path / "tok" / "codes.bin").stat().st_size == 4 * 4 * pq.m


def _format_1_store(folder: Path, pq: ProductQuantizer, items: list[tuple[str, np.ndarray]]) -> None:
    """A token store as meve before 0.2.0 wrote it: the same files, meta.json saying format 1 (the
    code of that time kept at most 254 vectors per passage; the layout was the same)."""
    folder.mkdir(parents=True)
    meta = {"format": 1, "m": pq.m, "dimension": pq.dimension, "codebook": pq.digest}
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    record = np.dtype([("key", "V20"), ("start", "<u8"), ("rows", "<u4")])
    records, codes, start = np.zeros(len(items), dtype=record), [], 0
    for i, (key, tokens) in enumerate(items):
        records[i] = (bytes.fromhex(key), start, len(tokens))
        codes.append(pq.encode(tokens))
        start += len(tokens)
    (folder / "codes.bin").write_bytes(np.concatenate(codes).tobytes())
    (folder / "index.bin").write_bytes(records.tobytes())


def test_a_format_1_store_keeps_its_whole_passages_and_drops_the_ones_that_may_be_cut(pq, tmp_path, caplog):
    rng = np.random.default_rng(7)
    short, cut, after = (text_key(t) for t in ("short passage", "long passage", "long too"))
    _format_1_store(tmp_path / "tok", pq, [(short, _unit(rng, 40)), (cut, _unit(rng, 254)), (after, _unit(rng, 254))])
    with caplog.at_level("WARNING", logger="meve"):
        store = TokenStore(tmp_path / "tok", pq)
    assert short in store and cut not in store and after not in store  # 254 rows: maybe truncated, encoded again on demand
    assert store.get(short) is not None and store.get(short).shape == (40, pq.dimension)
    assert "format 1" in caplog.text and "2 passage(s)" in caplog.text
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["format"] == 2
    whole = _unit(rng, 600)
    store.put_many([(cut, whole)])  # what a query re-encodes now: every piece
    reopened = TokenStore(tmp_path / "tok", pq)
    assert reopened.get(cut).shape == (600, pq.dimension) and reopened.get(short).shape == (40, pq.dimension)


KILLED_MID_MIGRATION = """
import os, signal, sys
import numpy as np
sys.path[:0] = [{shared!r}]
from meve.core.durable import TMP_MARK
from meve.scoring import token_store
from meve.scoring.token_store import ProductQuantizer, TokenStore

real = token_store.write_atomically

def die_at(path, write):  # the chosen point of the migration: index.bin half written, or whole but meta.json not yet
    if path.name == "index.bin" and {point!r} == "half":
        path.with_name(path.name + TMP_MARK + "deadbeef").write_bytes(write[: len(write) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    real(path, write)
    if path.name == "index.bin":
        os.kill(os.getpid(), signal.SIGKILL)

token_store.write_atomically = die_at
TokenStore({folder!r}, ProductQuantizer(np.load({centroids!r})))
"""


@pytest.mark.parametrize("point", ["half", "whole"])
def test_a_migration_killed_midway_runs_again_and_loses_nothing_it_keeps(pq, tmp_path, point):
    import subprocess
    import sys

    rng = np.random.default_rng(8)
    keep, drop = text_key("a"), text_key("b")
    kept = _unit(rng, 3)
    _format_1_store(tmp_path / "tok", pq, [(keep, kept), (drop, _unit(rng, 254))])
    np.save(tmp_path / "c.npy", pq.centroids)
    shared = str(Path(__file__).resolve().parents[2] / "shared")
    code = KILLED_MID_MIGRATION.format(shared=shared, centroids=str(tmp_path / "c.npy"), folder=str(tmp_path / "tok"), point=point)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9, out.stderr[-2000:]
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["format"] == 1  # killed before the migration was marked
    store = TokenStore(tmp_path / "tok", pq)  # a new process's open: the migration runs again
    assert keep in store and drop not in store and len(store) == 1
    np.testing.assert_array_equal(store.get(keep), pq.decode(pq.encode(kept)))
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["format"] == 2
    assert not [p.name for p in (tmp_path / "tok").iterdir() if ".tmp-" in p.name]  # the half-written file was cleaned away


def test_a_store_from_a_newer_meve_is_refused_not_read(pq, tmp_path):
    TokenStore(tmp_path / "tok", pq)
    meta = json.loads((tmp_path / "tok" / "meta.json").read_text())
    (tmp_path / "tok" / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(StoreError, match="newer meve"):
        TokenStore(tmp_path / "tok", pq)
    assert json.loads((tmp_path / "tok" / "meta.json").read_text())["format"] == 99  # left as it was
