"""benchmarks/memory_ranker.py end to end on three tiny synthetic sets and a hashing embedder (no
model, no data set): every setting gets its left-out rows, the rule chooses as its docstring says,
the final step and the saved ranker work."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, timezone

import numpy as np

from benchmarks import memory_ranker as mr
from benchmarks.harness.conversations import Conversation, MemoryQuestion
from meve.memory.ranker import Ranker
from meve.memory.records import Turn

DAY0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


class HashEmbedder:
    """Bag of words hashed into 64 dimensions, unit length: cosines that mean something, no model."""

    name = "hash-64"

    def encode(self, texts):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for r, text in enumerate(texts):
            for w in re.findall(r"\w+", text.lower()):
                out[r, int(hashlib.sha256(w.encode()).hexdigest(), 16) % 64] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


FACTS = ["my sister lives in Porto", "I am allergic to peanuts", "my dog is called Biscuit", "I drive a 2014 Ford Focus"]
ASKS = ["Where does my sister live?", "What am I allergic to?", "What is my dog's name?", "Which car do I drive?"]


def conversation(name: str, shift: int) -> Conversation:
    turns, qs = [], []
    for k in range(24):
        fact = FACTS[(k // 6 + shift) % 4]
        user = f"By the way, {fact}." if k % 6 == 0 else f"Tell me about topic {k} and the weather on day {k}."
        turns.append(("user", user))
        turns.append(("assistant", f"Noted about topic {k}; here are a few words of reply {k}."))
    made = [Turn(f"{name}/{i}", role, text, DAY0 + timedelta(hours=i), i) for i, (role, text) in enumerate(turns)]
    for j, ask in enumerate(ASKS):
        ev = tuple(t.id for t in made if FACTS[j] in t.text)
        qs.append(MemoryQuestion(f"locomo:0:{name}/{j}", ask, ev, "single-hop"))
    return Conversation(name, made, qs)


SETS = {f"set{s}": {"dev": [conversation(f"s{s}-dev", s)], "test": [conversation(f"s{s}-test", s + 1)]} for s in range(3)}


def test_the_dev_step_replays_every_setting_left_out_and_the_rule_chooses(monkeypatch, tmp_path):
    out, preps = mr.dev_step(SETS, emb=HashEmbedder())
    assert out["rule"]["settings_tried"] == 1 + len(mr.SETTINGS) == 13 == len(out["settings"]) and out["settings"][0] == mr.SHIPPED
    assert out["rule"]["chosen"] in out["settings"]
    for n in SETS:
        assert out["evidence_among_candidates"][n] == 1.0  # every question's evidence is a candidate
        for b in ("256", "512", "1024"):
            row = out["dev"][n][b]
            assert set(out["settings"]) <= set(row) and row[mr.SHIPPED]["vs_shipped_ci95"] == [0.0, 0.0]
    assert set(out["weights_left_out"]["set0"]) == {"l2=0.0001", "l2=0.001", "l2=0.01", "l2=0.001 listwise", "l2=0.01 listwise"}
    chosen = next(name for name in out["settings"] if name != mr.SHIPPED)
    test = mr.final_step(SETS, preps, chosen, emb=HashEmbedder())
    assert set(test["set1"]["512"]) == {"best_fill", mr.SHIPPED, chosen}
    recorded = {}
    monkeypatch.setattr(mr, "write_fitted", lambda *a, **k: recorded.update(items=a[2]))
    model = Ranker.load(mr.save_chosen(preps, chosen, tmp_path / "memory_ranker.json"))
    assert model.about["sets"] == list(SETS) and model.about["embedder"] == "hash-64"
    assert sorted(recorded["items"]) == sorted(q.id for s in SETS.values() for c in s["dev"] for q in c.questions)
    two = Ranker.load(mr.save_chosen(preps, chosen, tmp_path / "two.json", ["set0", "set2"]))
    assert two.about["sets"] == ["set0", "set2"]
    assert sorted(recorded["items"]) == sorted(q.id for n in ("set0", "set2") for q in SETS[n]["dev"][0].questions)


def row(margin: float, lo: float, hi: float) -> dict[str, object]:
    return {"margin": margin, "vs_shipped_ci95": [lo, hi]}


def test_the_rule_vetoes_only_a_row_wholly_below_the_shipped_setting():
    order = [mr.SHIPPED, "a", "b", "c"]
    dev = {
        "x": {"256": {mr.SHIPPED: row(0.0, 0, 0), "a": row(0.30, 0.1, 0.4), "b": row(0.10, -0.2, 0.05), "c": row(0.05, 0.0, 0.1)}},
        "y": {"256": {mr.SHIPPED: row(0.0, 0, 0), "a": row(-0.10, -0.3, -0.01), "b": row(0.05, -0.1, 0.2), "c": row(0.05, 0.0, 0.1)}},
    }
    got = mr.choose(dev, order)
    assert got["verdicts"]["a"]["vetoed_by"] == ["y at 256"]  # the best mean, but one row wholly below
    assert got["verdicts"]["b"]["vetoed_by"] == [] and got["chosen"] == "b"  # lower rows whose intervals reach 0 do not veto
    tie = mr.choose({"x": {"256": {mr.SHIPPED: row(0.05, 0, 0), "c": row(0.05, -0.1, 0.1)}}}, [mr.SHIPPED, "c"])
    assert tie["chosen"] == mr.SHIPPED  # a tie goes to the earlier setting
