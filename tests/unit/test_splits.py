"""Dev and test are disjoint by construction, and no tuned value ever saw a test item (issue 35).

The registry (benchmarks/harness/splits.py) maps every item id to exactly one split; every tuned
value is committed with the ids it was fitted on (benchmarks/fitted/*.json). The last test injects
an overlap and expects the check to catch it.
"""

from __future__ import annotations

import gzip
import json

import pytest

from benchmarks.harness.splits import (
    BEAM_CHATS,
    DATASETS,
    FITTED,
    MEMORYBANK_USERS,
    PREFEVAL_TOPICS,
    REALMEM_PERSONAS,
    REALTALK_CHATS,
    Fitted,
    check_fitted,
    item_id,
    load_fitted,
    split_of,
    squad_halves,
)
from tests.conftest import shared_data

EXPECTED = {
    "meve_config",
    "memory_config",
    "late_interaction_calibration",
    "late_interaction_pq32_calibration",
    "cross_encoder_calibration",
    "doc_weights",
    "fallback_rule",
    "cosine_scorer",
}


def _squad_split() -> dict[str, str]:
    with gzip.open(shared_data("train", "squad", "squad-v1.1-dev.explorer.json.gz"), "rt", encoding="utf-8") as fh:
        return squad_halves(a["title"] for a in json.load(fh)["data"])


def test_every_shipped_tuned_value_has_a_record():
    names = {p.stem for p in FITTED.glob("*.json")}
    assert names >= EXPECTED, f"missing fitted records: {sorted(EXPECTED - names)}"
    assert all(r.items for r in load_fitted())


def test_no_tuned_value_saw_a_test_item():
    squad = _squad_split()
    leaks = check_fitted(load_fitted(), lambda i: split_of(i, squad))
    assert leaks == [], f"tuned on test items: {leaks[:10]}"


def test_each_rule_puts_an_id_in_exactly_one_split():
    squad = {"A": "dev", "B": "test"}
    assert split_of(item_id("squad", "A", "q1"), squad) == "dev" and split_of(item_id("squad", "B", "q2"), squad) == "test"
    assert split_of(item_id("locomo", "4", "0")) == "dev" and split_of(item_id("locomo", "5", "0")) == "test"
    assert split_of(item_id("wikiqa", "test", "Q1")) == "test" and split_of(item_id("selqa_chat", "dev", "ART/3")) == "dev"
    hot = [split_of(item_id("hotpotqa", f"q{i}", f"q{i}")) for i in range(200)]
    assert 60 < hot.count("dev") < 140  # sha256 parity halves the questions
    with pytest.raises(ValueError, match="names its file"):
        split_of("wikiqa:train:Q1")
    with pytest.raises(ValueError, match="unknown dataset"):
        item_id("nq", "x", "y")
    assert set(DATASETS) >= {
        "squad",
        "hotpotqa",
        "wikiqa",
        "selqa",
        "msmarco",
        "covidqa",
        "locomo",
        "selqa_chat",
        "memorybank",
        "realtalk",
        "realmem",
        "longmemeval",
    }


def test_covidqa_splits_by_article_so_no_article_has_questions_on_both_sides():
    # Questions on one article share its passages: the key is the article, the question id is not read.
    for doc in ("1740", "262", "3101"):
        assert len({split_of(item_id("covidqa", doc, str(q))) for q in range(50)}) == 1
    sides = [split_of(item_id("covidqa", str(doc), "0")) for doc in range(200)]
    assert 60 < sides.count("dev") < 140


def test_memorybank_users_split_seven_to_eight_by_the_name_alone():
    split = {u: split_of(item_id("memorybank", u, "0")) for u in MEMORYBANK_USERS}
    assert sorted(split.values()).count("dev") == 7 and len(split) == 15
    assert all(split_of(item_id("memorybank", u, str(i))) == split[u] for u in MEMORYBANK_USERS for i in range(7))
    with pytest.raises(ValueError, match="no user 'Zoe'"):
        split_of("memorybank:Zoe:0")


def test_realtalk_and_realmem_split_five_to_five_by_the_name_alone():
    # Every question of a chat (a persona) keeps the chat's side: the question id is not read.
    for dataset, names in (("realtalk", REALTALK_CHATS), ("realmem", REALMEM_PERSONAS)):
        split = {n: split_of(item_id(dataset, n, "0")) for n in names}
        assert sorted(split.values()) == ["dev"] * 5 + ["test"] * 5
        assert all(split_of(item_id(dataset, n, q)) == split[n] for n in names for q in ("1", "Q-0042", "70"))
        assert split == squad_halves(reversed(names))  # fixed by sha256, not by the list's order
    with pytest.raises(ValueError, match="realtalk has no chat 'Chat_11_Ann_Bob'"):
        split_of("realtalk:Chat_11_Ann_Bob:0")
    with pytest.raises(ValueError, match="realmem has no persona 'Nobody'"):
        split_of("realmem:Nobody:Q-0001")


def test_beam_splits_by_conversation_and_prefeval_by_topic_ten_to_ten():
    # A PrefEval topic's explicit and choice-based items share their preferences: the topic decides,
    # so no preference is on both sides; a BEAM conversation's twenty questions keep its side.
    for dataset, names, native in (
        ("beam", BEAM_CHATS, ("temporal_reasoning/0", "summarization/1")),
        ("prefeval", PREFEVAL_TOPICS, ("explicit/0", "choice/0")),
    ):
        split = {n: split_of(item_id(dataset, n, "0")) for n in names}
        assert sorted(split.values()) == ["dev"] * 10 + ["test"] * 10
        assert all(split_of(item_id(dataset, n, q)) == split[n] for n in names for q in native)
        assert split == squad_halves(reversed(names))
    with pytest.raises(ValueError, match="beam has no conversation '1M/1'"):
        split_of("beam:1M/1:x")
    with pytest.raises(ValueError, match="prefeval has no topic 'cooking'"):
        split_of("prefeval:cooking:explicit/0")


def test_longmemeval_splits_by_question_id_and_its_history_goes_with_it():
    # Each LongMemEval question has its own history: the key is the question id, by sha256 parity.
    ids = [f"{i:08x}" for i in range(200)]
    sides = [split_of(item_id("longmemeval", q, q)) for q in ids]
    assert 60 < sides.count("dev") < 140
    assert all(split_of(item_id("longmemeval", q, "any")) == side for q, side in zip(ids, sides, strict=True))


def test_an_injected_overlap_is_caught():
    squad = _squad_split()
    test_title = next(t for t, s in squad.items() if s == "test")
    clean = Fitted(
        "a knob", (item_id("locomo", "0", "1"), item_id("hotpotqa", "x", "x") if split_of("hotpotqa:x:x") == "dev" else item_id("locomo", "1", "1")), "cmd"
    )
    assert check_fitted([clean], lambda i: split_of(i, squad)) == []
    leaked = Fitted("a knob", (*clean.items, item_id("squad", test_title, "q9"), item_id("locomo", "7", "0")), "cmd")
    assert check_fitted([leaked], lambda i: split_of(i, squad)) == [f"a knob: squad:{test_title}:q9", "a knob: locomo:7:0"]
    records = [*load_fitted(), leaked]
    assert check_fitted(records, lambda i: split_of(i, squad))  # injected into the committed records, the check fails
