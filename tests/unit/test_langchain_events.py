"""MeVeRetriever's phase events: sent to listeners, and not built at all when nobody listens
(building them was measurable per-query overhead). Fake models (tests/fakes.py), real Chroma."""

from langchain_core.callbacks import BaseCallbackHandler

from langchain_meve import MeVeRetriever
from meve.core.records import PhaseRecord
from tests.fakes import FakeEmbedder, FakeScorer

TEXTS = ["The Eiffel Tower is in Paris.", "Bananas are yellow.", "Paris is the capital of France."]


class Collect(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[dict] = []

    def on_custom_event(self, name, data, **kwargs):
        self.events.append(data)


def count_payloads(monkeypatch) -> list[int]:
    calls = [0]
    original = PhaseRecord.to_dict

    def counting(self):
        calls[0] += 1
        return original(self)

    monkeypatch.setattr(PhaseRecord, "to_dict", counting)
    return calls


def test_events_only_built_for_listeners(monkeypatch):
    r = MeVeRetriever.from_texts(TEXTS, embedder=FakeEmbedder(), scorer=FakeScorer())
    calls = count_payloads(monkeypatch)
    assert r.invoke("Eiffel Tower Paris")
    assert calls[0] == 0
    listener = Collect()
    r.invoke("Eiffel Tower Paris", config={"callbacks": [listener]})
    assert calls[0] == 6 and [e["phase"] for e in listener.events] == ["retrieve", "verify", "fallback", "prioritise", "prune", "budget"]


async def test_async_events_only_built_for_listeners(monkeypatch):
    r = MeVeRetriever.from_texts(TEXTS, embedder=FakeEmbedder(), scorer=FakeScorer())
    calls = count_payloads(monkeypatch)
    assert await r.ainvoke("Eiffel Tower Paris")
    assert calls[0] == 0
    listener = Collect()
    await r.ainvoke("Eiffel Tower Paris", config={"callbacks": [listener]})
    assert calls[0] == 6 and len(listener.events) == 6
