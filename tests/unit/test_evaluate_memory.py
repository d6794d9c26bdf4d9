"""evaluate_memory / tune_memory with a fake embedder: the questions' checks, the arms at one
budget, and the gain over the best fill."""

from __future__ import annotations

import pytest

from meve import InputError, MemoryConfig
from meve.evaluate import evaluate_memory
from meve.evaluate.memory import MEMORY_GRID, tune_memory
from tests.fakes import FakeEmbedder

CONV = [
    turn
    for i in range(30)
    for turn in (
        {"id": f"u{i}", "role": "user", "text": f"Topic {i}: my favourite thing number {i} is item{i}."},
        {"id": f"a{i}", "role": "assistant", "text": f"Noted, item{i} for topic {i}."},
    )
]


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ({"conversation": "c1", "question": "x"}, "question 1: no evidence field"),
        ({"conversation": "c9", "question": "x", "answers": ["a"]}, "question 1: field 'conversation': 'c9'"),
        ({"conversation": "c1", "question": "", "answers": ["a"]}, "question 1: field 'question'"),
        ({"conversation": "c1", "question": "x", "answers": []}, "question 1: field 'answers'"),
        ({"conversation": "c1", "question": "x", "evidence_turn_ids": ["zz"]}, "question 1: field 'evidence_turn_ids': 'zz' is not a turn"),
        ({"conversation": "c1", "question": "x", "answer": ["a"]}, "question 1: field 'answer' is not known"),
    ],
)
def test_each_bad_question_is_refused_before_any_model_runs(question, message):
    emb = FakeEmbedder()
    with pytest.raises(InputError, match=message):
        evaluate_memory({"c1": CONV}, [question], embedder=emb)
    assert emb.calls == 0


def test_the_memory_and_the_three_fills_at_one_budget():
    qs = [{"conversation": "c1", "question": f"What is my favourite thing for topic {i}?", "evidence_turn_ids": [f"u{i}"]} for i in range(6)]
    qs.append({"conversation": "c1", "question": "Which item for topic 3?", "answers": ["item3"]})
    report = evaluate_memory({"c1": CONV}, qs, l_max=48, embedder=FakeEmbedder(), reps=100).to_dict()
    assert report["questions"] == 7 and report["l_max"] == 48
    assert set(report["arms"]) == {"memory", "dense", "bm25", "hybrid"} and report["best_fill"] in ("dense", "bm25", "hybrid")
    assert all(a["tokens"] <= 48 for a in report["arms"].values())
    assert report["gain"] == pytest.approx(report["arms"]["memory"]["evidence"] - report["arms"][report["best_fill"]]["evidence"], abs=1e-4)
    lo, hi = report["gain_ci95"]
    assert lo <= hi


def test_tune_memory_keeps_the_default_when_no_setting_is_clearly_better_on_dev():
    # The default keeps every evidence turn here; the best of the grid can only tie it.
    qs = [{"conversation": "c1", "question": f"What did you note for topic {i}?", "evidence_turn_ids": [f"a{i}"]} for i in range(30)]
    config, report = tune_memory({"c1": CONV}, qs, l_max=48, embedder=FakeEmbedder(), reps=50)
    assert config == MemoryConfig(l_max=48) and report.extra["kept_default"] and report.extra["chosen"] == {}
    assert report.extra["dev_best"] in MEMORY_GRID and report.extra["dev_over_default"][1][0] <= 0
    assert sum(report.extra["split"].values()) == 30 and "MemoryConfig() is kept" in report.notes[0]
    assert {"tuned", "default", "dense", "bm25", "hybrid"} == set(report.arms) and report.arms["tuned"] == report.arms["default"]
    with pytest.raises(InputError, match="at least 8 on each side"):
        tune_memory({"c1": CONV}, qs[:5], embedder=FakeEmbedder())


def test_tune_memory_replaces_the_default_only_when_the_best_is_clearly_better_on_dev():
    # Every question's evidence is the latest turn and every question is long (over six words):
    # only keep_recent=True keeps it first; the default ("short") lets it compete, and it loses.
    qs = [{"conversation": "c1", "question": f"Could you summarise question number {i} for me please", "evidence_turn_ids": ["a29"]} for i in range(30)]
    config, report = tune_memory({"c1": CONV}, qs, l_max=256, embedder=FakeEmbedder(), reps=50)
    diff, (lo, _) = report.extra["dev_over_default"]
    assert not report.extra["kept_default"] and lo > 0 and diff > 0.5
    assert report.extra["chosen"] == report.extra["dev_best"] and report.extra["chosen"]["keep_recent"] is True
    assert config == MemoryConfig(l_max=256, **report.extra["chosen"]) and report.gain > report.extra["default_gain"]


def test_tune_memory_says_so_when_the_dev_best_is_the_default_itself():
    qs = [{"conversation": "c1", "question": f"What did you note for topic {i}?", "evidence_turn_ids": [f"a{i}"]} for i in range(30)]
    default = next(s for s in MEMORY_GRID if MemoryConfig(**s) == MemoryConfig())
    _, report = tune_memory({"c1": CONV}, qs, l_max=48, grid=[default], embedder=FakeEmbedder(), reps=50)
    assert report.extra["kept_default"] and "it is MemoryConfig() itself" in report.notes[0]


def test_a_config_given_twice_is_replayed_once_per_question(monkeypatch):
    from meve.evaluate import replay
    from meve.evaluate.memory import choose_memory, prepare

    qs = [{"conversation": "c1", "question": f"What did you note for topic {i}?", "evidence_turn_ids": [f"a{i}"]} for i in range(10)]
    dev, counter = prepare({"c1": CONV}, qs, FakeEmbedder(), None)
    calls = []
    real = replay.Replay.memory
    monkeypatch.setattr(replay.Replay, "memory", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    grid = MEMORY_GRID[:4]  # the fourth is MemoryConfig() itself, which the choice also measures as "default"
    assert any(MemoryConfig(**s) == MemoryConfig() for s in grid)
    choice = choose_memory(dev, counter, grid, 48, reps=20)
    assert len(calls) == len(dev) * len(grid) and choice.default_evidence in choice.evidence


def test_a_plain_fill_takes_each_turn_whole_or_not_at_all():
    # The baselines are the frameworks' top-k fills: no cut of a long turn (the memory's cap_turns is its own).
    from datetime import datetime, timedelta, timezone

    from meve import get_token_counter
    from meve.evaluate.replay import Replay
    from meve.memory.records import Turn

    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    texts = ["short one about item1", "long " * 300 + "item2", "short two about item3"]
    turns = [Turn(f"t{i}", "user", x, t0 + timedelta(minutes=i), i) for i, x in enumerate(texts)]
    emb = FakeEmbedder()
    rp = Replay(turns, get_token_counter(), emb.encode, emb.name)
    sel, _ = rp.fill([0, 1, 2], l_max=400)
    assert [t.text for t in sel.turns] == texts  # the long turn is over half of l_max, and stays whole
    assert not any(t.metadata.get("meve_truncated") for t in sel.turns)
