"""The per-query decisions of meve.memory.select, on hand-built snapshots (no model, no store):
what earns its tokens for this query, and why the trace says so."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from meve import MemoryConfig, get_token_counter
from meve.memory.decide import ROLE_DISCOUNT, decide_role
from meve.memory.log import Snapshot
from meve.memory.records import Turn
from meve.memory.render import render, render_turn
from meve.memory.select import MIN_CUT, decide_dates, rank, select_turns, weigh_roles

COUNTER = get_token_counter()
DAY0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)


def snapshot(lines: list[tuple[str, str, int]]) -> Snapshot:
    """(role, text, day) per turn, in time order, a minute apart within a day."""
    turns = [Turn(f"t{i}", role, text, DAY0 + timedelta(days=day, minutes=i), i) for i, (role, text, day) in enumerate(lines)]
    tokens = [COUNTER.count(render_turn(t)) for t in turns]
    keys = [(t.timestamp.timestamp(), f"{i:012d}") for i, t in enumerate(turns)]
    return Snapshot(turns, tokens, keys, list(range(len(turns))), len(turns), min(tokens))


def neighbour(snap: Snapshot):
    def partner(i: int) -> int | None:
        for k in (i + 1, i - 1):
            if 0 <= k < snap.n and snap.turns[k].role != snap.turns[i].role:
                return k
        return None

    return partner


CHAT = [
    ("user", "I adopted a beagle puppy and named him Rex after my grandfather's old dog.", 0),  # 0: rank 1
    ("assistant", "What a lovely way to remember him, congratulations on the new puppy!", 0),  # 1: its partner
    ("user", "Rex chewed through my running shoes while I was out at the pharmacy today.", 1),  # 2: rank 2
    ("assistant", "Puppies do that; a few chew toys usually help.", 1),
    ("user", "Anyway, what should I cook tonight?", 2),  # 4: the most recent turn
]


def select(snap: Snapshot, ranked: list[int], scores: dict[int, float] | None = None, **cfg: object):
    """select_turns with the most recent turn (4) kept and neighbours as partners."""
    return select_turns(snap, MemoryConfig(**cfg), COUNTER, recent=[4], pinned=[], ranked=ranked, partner=neighbour(snap), scores=scores)  # type: ignore[arg-type]


def fits(snap: Snapshot, idx: list[int]) -> int:
    return COUNTER.count(render([snap.turns[i] for i in idx]))


def test_a_partner_turn_is_left_out_when_a_more_relevant_turn_fits_in_its_place():
    snap = snapshot(CHAT)
    # Room for the recent turn and exactly one more of turns 1 and 2 beside turn 0 (the fill
    # charges a separator per line, a little more than the rendered text may take).
    l_max = max(fits(snap, [0, 1, 4]), fits(snap, [0, 2, 4])) + 3
    assert l_max < fits(snap, [0, 1, 2, 4])
    scores = {0: 1.0, 2: 0.8, 3: 0.1}  # the partner (1) scores nothing of its own
    ranked = [0, 2, 3]
    half = select(snap, ranked, scores, l_max=l_max, dates=False, partner_weight=0.5)
    assert [t.id for t in half.turns] == ["t0", "t2", "t4"]
    included, reason, _ = half.reasons[1]
    assert not included and "partner turn of relevance rank 1" in reason and "0.500" in reason
    # Worth as much as its anchor, the partner comes right after it and the rank-2 turn is left out.
    whole = select(snap, ranked, scores, l_max=l_max, dates=False, partner_weight=1.0)
    assert [t.id for t in whole.turns] == ["t0", "t1", "t4"]


def test_a_partner_turn_takes_budget_only_from_turns_scored_below_its_worth():
    snap = snapshot(CHAT)
    scores = {0: 1.0, 2: 0.3}
    sel = select(snap, [0, 2], scores, l_max=1000, dates=False, partner_weight=0.5)
    order = list(sel.picked)  # priority order: recent, then by worth
    assert order == [4, 0, 1, 2, 3]  # the partner of rank 1 (0.5) before the rank-2 turn (0.3) and its partner (0.15)
    off = select(snap, [0, 2], scores, l_max=1000, dates=False, partner_turns=False)
    assert list(off.picked) == [4, 0, 2]


def test_a_partner_the_query_also_matches_is_lifted_toward_its_anchor():
    snap = snapshot(CHAT)
    l_max = max(fits(snap, [0, 1, 4]), fits(snap, [0, 2, 4])) + 3
    assert l_max < fits(snap, [0, 1, 2, 4])
    # The reply (1) scores 0.4 of its own, the rank-2 turn 0.6: half the anchor's worth alone (0.5)
    # would rank the reply below turn 2; its own match lifts it to 0.5 x 1.0 + 0.5 x 0.4 = 0.7.
    scores = {0: 1.0, 1: 0.4, 2: 0.6}
    sel = select(snap, [0, 2, 1], scores, l_max=l_max, dates=False, partner_weight=0.5)
    assert [t.id for t in sel.turns] == ["t0", "t1", "t4"]
    included, reason, _ = sel.reasons[1]
    assert included and reason == "partner turn of relevance rank 1 (worth 0.5 x 1.000 + 0.5 x its own 0.400 = 0.700)"
    assert not sel.reasons[2][0]
    # A reply the query does not match keeps half its anchor's worth, below turn 2.
    bare = select(snap, [0, 2], {0: 1.0, 2: 0.6}, l_max=l_max, dates=False, partner_weight=0.5)
    assert [t.id for t in bare.turns] == ["t0", "t2", "t4"]


def test_a_query_that_does_not_ask_about_time_gets_no_dates():
    assert decide_dates("auto", "What should I feed Rex?") == (False, "the query does not ask about time")
    dated, why = decide_dates("auto", "When did Rex chew my shoes?")
    assert dated and "'When'" in why
    # Words that only look like time: a modal "may", an ordinal, a count of times, "after work".
    for query in ("May I ask what breed Rex is?", "What was the first thing Rex chewed?", "How many times did Rex chew shoes?", "What do I do after work?"):
        assert decide_dates("auto", query)[0] is False, query
    assert decide_dates(True, "anything") == (True, "dates=True")
    assert decide_dates(False, "When?") == (False, "dates=False")


def test_a_dated_context_shows_each_date_once_per_day_and_the_budget_counts_that_text():
    snap = snapshot(CHAT)
    sel = select(snap, [0, 1, 2, 3], l_max=1000, dates=True, partner_turns=False)
    text = render(sel.turns, dates=True)
    lines = text.split("\n")
    assert [line[:12] for line in lines if line.startswith("[")] == ["[2024-05-01]", "[2024-05-02]", "[2024-05-03]"]
    assert lines[1].startswith("assistant: ") and lines[3].startswith("assistant: ")  # same day as the line before: no date
    assert sel.tokens == COUNTER.count(text) <= 1000
    # Dating every line would cost more: the saving is what other turns can use.
    assert COUNTER.count("\n".join(render_turn(t, dates=True) for t in sel.turns)) > sel.tokens


def test_a_query_in_one_person_asks_about_that_sides_turns():
    role, why = decide_role(True, "How many days a week do I attend fitness classes?")
    assert role == "user" and "'I'" in why
    role, why = decide_role(True, "Which restaurant did you recommend for Friday?")
    assert role == "assistant" and "'you'" in why
    # Both persons, neither, or the cue off: no side is favoured.
    assert decide_role(True, "What advice did you give me about painting?")[0] is None
    assert decide_role(True, "When did Caroline go to the support group?")[0] is None
    assert decide_role(False, "What do I feed Rex?") == (None, "role_cue=False")
    # Words that only contain a pronoun's letters are not one.
    assert decide_role(True, "Is the youth club near the Imax?")[0] is None
    assert decide_role(True, "I'm sure the youth club opens at nine, right?")[0] == "user"


def test_a_first_person_query_lets_the_users_turn_in_before_an_equally_relevant_reply():
    snap = snapshot(CHAT)
    l_max = max(fits(snap, [0, 4]), fits(snap, [1, 4])) + 2
    assert l_max < fits(snap, [0, 1, 4])
    fused = {0: 0.9, 1: 1.0}  # the reply (1) scores a little higher than the user's own turn (0)
    plain = select(snap, rank(fused, snap.keys), fused, l_max=l_max, dates=False, partner_turns=False)
    assert [t.id for t in plain.turns] == ["t1", "t4"]
    weighed = weigh_roles(fused, snap.turns, "user")
    assert weighed == {0: 0.9, 1: 1.0 * ROLE_DISCOUNT}
    cued = select(snap, rank(weighed, snap.keys), weighed, l_max=l_max, dates=False, partner_turns=False)
    assert [t.id for t in cued.turns] == ["t0", "t4"]
    assert weigh_roles(fused, snap.turns, None) == fused


def test_the_users_statement_nearest_the_query_goes_in_before_the_relevance_fill():
    snap = snapshot(CHAT)
    # Room for the recent turn and one of turns 0 and 2: the statement (2) goes in though 0 ranks first
    # (its share the whole budget, as this tiny one needs).
    l_max = max(fits(snap, [0, 4]), fits(snap, [2, 4])) + 3
    assert l_max < fits(snap, [0, 2, 4])
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    sel = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[0, 2], partner=neighbour(snap), stated=[(2, 0.41)], stated_share=1.0)
    assert [t.id for t in sel.turns] == ["t2", "t4"]
    assert sel.reasons[2][1] == "the user's statement nearest the query (cosine 0.41, at least follow_up_cosine 0.3)"
    plain = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[0, 2], partner=neighbour(snap))
    assert [t.id for t in plain.turns] == ["t0", "t4"]


def test_statements_hold_at_most_their_share_and_one_over_it_still_competes_by_relevance():
    snap = snapshot(CHAT)
    cfg = MemoryConfig(l_max=1000, dates=False, partner_turns=False)
    share = (snap.tokens[2] + 1) / 1000  # room for turn 2's line, not for turn 0's beside it
    sel = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[0, 2], partner=neighbour(snap), stated=[(2, 0.5), (0, 0.4)], stated_share=share)
    assert list(sel.picked)[:2] == [4, 2]  # the recent turn, then the statement that fits its share
    assert sel.reasons[0][:2] == (True, "relevance rank 1 (score 1.000)")  # not refused: it came in by relevance


def test_with_top_k_a_statement_goes_in_first_only_if_it_ranks_within_top_k():
    snap = snapshot(CHAT)
    cfg = MemoryConfig(l_max=1000, dates=False, partner_turns=False, top_k=1)
    sel = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[0, 2], partner=neighbour(snap), stated=[(2, 0.5)])
    assert list(sel.picked) == [4, 0]  # turn 2 ranks second: outside top_k, so not recalled at all
    assert not sel.reasons[2][0]


# A long reply ranked second would take the room of a short preference ranked third (issue 76:
# "no single turn may take the budget while others score").
HUB = "The hub that pairs with every smart home assistant is the one to buy for your reliable smart home."
LONG = [
    ("user", "I dislike using any devices from Google due to privacy concerns.", 0),  # 0: rank 3
    ("assistant", "Understood.", 0),
    ("user", "Which speaker sounds best for a small flat?", 1),  # 2: rank 1
    (
        "assistant",
        " ".join(
            ["Speakers differ mostly in their drivers, room size and placement on a shelf."] * 8 + [HUB] + ["Bass ports matter less than most reviews say."] * 8
        ),
        1,
    ),  # 3: rank 2
    ("user", "Can you help me find a reliable smart home assistant?", 2),  # 4: the most recent turn
]


def test_a_long_turn_ranked_second_comes_in_as_its_best_part_and_leaves_room_for_the_turn_after_it():
    snap = snapshot(LONG)
    l_max = fits(snap, [2, 3, 4]) + 6  # the long reply fits whole beside turns 2 and 4, then no room for 0
    assert fits(snap, [0, 2, 3, 4]) > l_max and snap.tokens[3] > l_max // 2
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    kw = {"recent": [4], "pinned": [], "ranked": [2, 3, 0], "partner": neighbour(snap), "query": LONG[4][1]}
    sel = select_turns(snap, cfg, COUNTER, **kw)  # type: ignore[arg-type]
    assert [t.id for t in sel.turns] == ["t0", "t2", "t3", "t4"]
    cut = sel.picked[3]
    assert cut.metadata["meve_truncated"] and HUB in cut.text  # the part the query matches
    assert COUNTER.count(render_turn(cut)) <= l_max // 2 and "cut to its best part" in sel.reasons[3][1] and "its share of l_max" in sel.reasons[3][1]
    assert sel.turns[0].text == LONG[0][1]  # the preference, whole
    assert COUNTER.count(render(sel.turns)) <= l_max
    # The paper's fill (cap_turns=False): the long reply whole, and no room for the preference.
    whole = select_turns(snap, cfg.replace(cap_turns=False), COUNTER, **kw)  # type: ignore[arg-type]
    assert [t.id for t in whole.turns] == ["t2", "t3", "t4"] and not whole.reasons[0][0]


def test_the_best_ranked_turn_comes_in_whole_however_long():
    snap = snapshot(LONG)
    l_max = fits(snap, [0, 3, 4]) + 6
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    sel = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[3, 0], partner=neighbour(snap), query=LONG[4][1])
    assert snap.tokens[3] > l_max // 2
    assert sel.picked[3].text == LONG[3][1] and sel.reasons[3][1] == "relevance rank 1 (score 1.000)"
    assert [t.id for t in sel.turns] == ["t0", "t3", "t4"]


def test_when_the_best_is_in_already_the_next_long_turn_is_capped():
    snap = snapshot(LONG)
    l_max = fits(snap, [0, 3, 4]) + 6
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    # The most recent turn (4) is first in the relevance order too: in already, so no turn after it is exempt.
    sel = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[4, 3, 0], partner=neighbour(snap), query=LONG[4][1])
    assert sel.picked[3].metadata["meve_truncated"] and COUNTER.count(render_turn(sel.picked[3])) <= l_max // 2
    whole = select_turns(snap, cfg, COUNTER, recent=[4], pinned=[], ranked=[3, 0], partner=neighbour(snap), query=LONG[4][1])
    assert whole.picked[3].text == LONG[3][1]  # first of the order: whole


def test_a_cap_that_would_keep_too_few_words_is_not_made():
    snap = snapshot(LONG)
    l_max = fits(snap, [0, 2]) + 2  # turn 0 (ranked second) is over half of it, and half holds under MIN_CUT tokens of its text
    assert snap.tokens[0] > l_max // 2 and l_max // 2 < MIN_CUT + 3
    cfg = MemoryConfig(l_max=l_max, dates=False, partner_turns=False)
    sel = select_turns(snap, cfg, COUNTER, recent=[], pinned=[], ranked=[2, 0], partner=neighbour(snap), query=LONG[4][1])
    assert sel.picked[0].text == LONG[0][1]  # whole: a cut would keep too little to say anything
