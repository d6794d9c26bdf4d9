"""What the shipped models read: a corpus or query mostly outside the Latin script is named in a warning."""

from __future__ import annotations

import logging

import pytest

from meve import MeVe, MomentaryMemory
from meve.core.languages import latin_share, warn_if_unreadable
from meve.core.logs import query_label
from meve.retrieval.chroma import chroma_client
from tests.fakes import FakeEmbedder, FakeScorer

ARABIC = ["القطط حيوانات أليفة تحب النوم", "الكلاب تحب اللعب في الحديقة", "الطقس حار في الصيف"]


def test_the_share_of_latin_letters_counts_letters_only():
    assert latin_share(["Crème brûlée, 2024!"]) == 1.0
    assert latin_share(["猫 cat"]) == pytest.approx(3 / 4)
    assert latin_share(["1234 ... !!"]) is None  # no letter: nothing to say


def test_a_corpus_and_a_query_outside_the_models_script_are_named_in_a_warning(caplog):
    english = FakeEmbedder(name="all-MiniLM-L6-v2")  # the name meve's default model reports
    with caplog.at_level("WARNING", logger="meve"):
        m = MeVe.from_texts(ARABIC, embedder=english, scorer=FakeScorer())
    assert "the 3 passage(s) being indexed is mostly outside the Latin script (100% of its letters)" in caplog.text
    assert "all-MiniLM-L6-v2 was trained on English" in caplog.text and "embedder= and scorer=" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="meve"):
        m.run("猫はどこで寝ますか")
        m.run("猫はどこで寝ますか")
    label = query_label("猫はどこで寝ますか")
    assert caplog.text.count(f"the {label} is mostly outside the Latin script") == 2  # every query, not once a process
    assert not any("猫" in r.getMessage() for r in caplog.records if r.levelno > logging.DEBUG)  # issue 78 #10: the words only at DEBUG
    caplog.clear()
    with caplog.at_level("WARNING", logger="meve"):
        m.run("Where do cats sleep?")
    assert "Latin script" not in caplog.text


def test_no_warning_for_a_model_the_user_plugged_in(caplog):
    with caplog.at_level("WARNING", logger="meve"):
        assert not warn_if_unreadable("the query", ["猫はどこで寝ますか"], "paraphrase-multilingual-MiniLM-L12-v2")
        MeVe.from_texts(ARABIC, embedder=FakeEmbedder(name="my-arabic-model"), scorer=FakeScorer()).run("أين تنام القطط")
    assert "Latin script" not in caplog.text


def test_a_memory_query_outside_the_script_is_named(caplog):
    m = MomentaryMemory("lang", client=chroma_client(), embedders=[FakeEmbedder(name="all-MiniLM-L6-v2")], collection_prefix="lang")
    m.add("My cat sleeps on the sofa.")
    with caplog.at_level("WARNING", logger="meve"):
        m.reconstruct("我的猫在哪里睡觉")
    assert "to session 'lang' is mostly outside the Latin script" in caplog.text
