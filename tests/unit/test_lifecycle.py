"""Explicit lifecycle: what a handle opens it releases on close(), and a closed handle says so."""

from __future__ import annotations

import os
import shutil

import pytest

from meve import MeVe, MomentaryMemory, StoreError
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder, FakeScorer

CYCLES = int(os.environ.get("MEVE_LIFECYCLE_CYCLES", "500"))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts file descriptors through /proc (Linux)")
def test_open_close_cycles_keep_file_descriptors_and_memory_flat(tmp_path):
    emb = FakeEmbedder()
    marks: dict[int, tuple[int, float]] = {}
    for i in range(CYCLES):
        with MomentaryMemory("s", path=str(tmp_path / f"db{i}"), embedders=[emb]) as mem:
            mem.add(f"turn {i}")
        if i in (49, CYCLES - 1):
            marks[i] = (_fds(), _rss_mib())
    (fd0, rss0), (fd1, rss1) = marks[49], marks[CYCLES - 1]
    # Before close() existed each path kept about 12 descriptors and 4 MB.
    assert fd1 - fd0 <= 3, (fd0, fd1)
    assert rss1 - rss0 < 64, (rss0, rss1)


def test_a_closed_memory_refuses_use_and_its_path_can_be_deleted_and_reopened(tmp_path):
    path = str(tmp_path / "db")
    mem = MomentaryMemory("s", path=path, embedders=[FakeEmbedder()])
    mem.add("hello")
    mem.close()
    mem.close()  # idempotent
    with pytest.raises(StoreError, match="was closed"):
        mem.reconstruct("hello")
    shutil.rmtree(path)
    with MomentaryMemory("s", path=path, embedders=[FakeEmbedder()]) as fresh:
        assert len(fresh) == 0
        fresh.add("again")
    with MomentaryMemory("s", path=path, embedders=[FakeEmbedder()]) as reopened:
        assert [t.text for t in reopened.turns()] == ["again"]


def test_closing_one_handle_leaves_another_on_the_same_path_working(tmp_path):
    path = str(tmp_path / "db")
    a = MomentaryMemory("s", path=path, embedders=[FakeEmbedder()])
    b = MomentaryMemory("s", path=path, embedders=[FakeEmbedder()])
    a.add("from a")
    a.close()
    b.add("from b")
    assert [t.text for t in b.turns()] == ["from a", "from b"]
    b.close()


def test_meve_is_a_context_manager_and_drops_the_collection_it_created():
    with MeVe.from_texts(["alpha beta", "gamma delta"], embedder=FakeEmbedder(), scorer=FakeScorer()) as m:
        assert m.run("alpha").documents
        name = m.store.collection.name
    assert name not in {c.name for c in chroma_client().list_collections()}  # in-memory clients share one store
    with pytest.raises(StoreError, match="was closed"):
        m.run("alpha")


def test_warm_up_runs_each_model_once_and_returns_the_handle(tmp_path):
    emb, scorer = FakeEmbedder(), FakeScorer()
    m = MeVe.from_texts(["alpha beta"], embedder=emb, scorer=scorer)
    before = emb.calls
    assert m.warm_up() is m
    assert emb.calls == before + 1 and scorer.calls == [1]
    mem_emb = FakeEmbedder()
    with MomentaryMemory("s", path=str(tmp_path / "db"), embedders=[mem_emb]) as mem:
        assert mem.warm_up() is mem and mem_emb.calls == 1


def test_the_model_registry_loads_each_model_once_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    from meve.scoring.registry import ModelRegistry

    reg = ModelRegistry()
    loads = []

    def factory():
        loads.append(1)
        return object()

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: reg.get("test", "m", "cpu", factory), range(32)))
    assert len(loads) == 1 and all(g is got[0] for g in got)
    assert reg.loaded() == [("test", "m", "cpu")]
    reg.clear()
    assert reg.get("test", "m", "cpu", factory) is not got[0] and len(loads) == 2


class _TwoAtOnceScorer(FakeScorer):
    """FakeScorer (a fake model) that provides its own Scoring; building it waits, up to 2 s, for a
    second thread to be building one too, so two unguarded first calls always overlap."""

    def __init__(self) -> None:
        import threading

        super().__init__()
        self.builds = 0
        self.both = threading.Barrier(2, timeout=2)

    def scoring(self):
        import contextlib
        import threading

        from meve.scoring.protocols import Scoring

        self.builds += 1
        with contextlib.suppress(threading.BrokenBarrierError):  # broken: the other thread waited for this one (serialised)
            self.both.wait()
        return Scoring.of(self)


def test_two_threads_resolving_a_components_scorer_at_once_get_one_scorer():
    from concurrent.futures import ThreadPoolExecutor

    from meve.integration import Models

    scorer = _TwoAtOnceScorer()
    models = Models(FakeEmbedder(), scorer)
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: models.scoring, range(2)))
    assert scorer.builds == 1 and got[0] is got[1]


def test_the_middleware_closes_the_sessions_it_evicts(tmp_path):
    pytest.importorskip("langchain")
    from langchain_meve import MomentaryContextMiddleware
    from meve.retrieval.chroma import open_clients

    db = str(tmp_path / "db")
    key = str((tmp_path / "db").resolve())
    mw = MomentaryContextMiddleware(path=db, embedders=[FakeEmbedder()], max_sessions=2)
    first = mw.memory_for("s0")
    for i in range(1, 5):
        mw.memory_for(f"s{i}")
    assert open_clients()[key] == 2  # two sessions open; the three evicted released their handle on the client
    assert first.closed
    assert mw.memory_for("s0") is not first and not mw.memory_for("s0").closed  # an evicted session reopens from Chroma
    mw.close()
    assert key not in open_clients()
