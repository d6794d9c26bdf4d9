"""meve.memory.signals.stated: which of the turns nearest a query are what the user told the memory
(hand-built hits, no model)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from meve import MemoryConfig
from meve.core.errors import ConfigError
from meve.memory.records import Turn
from meve.memory.signals import STATED_NEAREST, stated

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
TURNS = [Turn(f"t{i}", role, f"text {i}", T0, i) for i, role in enumerate(["user", "assistant", "user", "system", "user"])]


def test_of_the_nearest_turns_the_users_at_or_above_the_bar_are_chosen_nearest_first():
    hits = [[(2, 0.62), (0, 0.45), (4, 0.44)]]
    assert STATED_NEAREST == 2
    assert stated(hits, set(), TURNS, (), 0.3) == [(2, 0.62), (0, 0.45)]  # the third nearest is not looked at
    assert stated(hits, set(), TURNS, (), 0.5) == [(2, 0.62)]  # under the bar


def test_an_assistant_turn_among_the_nearest_takes_its_place_and_is_not_chosen():
    assert stated([[(1, 0.7), (0, 0.6), (2, 0.55)]], set(), TURNS, (), 0.3) == [(0, 0.6)]


def test_turns_that_go_in_first_or_of_a_skipped_role_are_passed_over():
    hits = [[(3, 0.9), (2, 0.8), (0, 0.5), (4, 0.4)]]
    assert stated(hits, {2}, TURNS, ("system",), 0.3) == [(0, 0.5), (4, 0.4)]
    assert stated(hits, {2}, TURNS, (), 0.3) == [(0, 0.5)]  # the system prompt counts among the nearest, and is no user's


def test_no_bar_or_no_search_recalls_nothing():
    assert stated([[(0, 0.9)]], set(), TURNS, (), None) == []
    assert stated([], set(), TURNS, (), 0.3) == []


def test_user_statements_must_be_a_bool():
    with pytest.raises(ConfigError, match="user_statements"):
        MemoryConfig(user_statements="yes")  # type: ignore[arg-type]
    assert MemoryConfig().user_statements is True
