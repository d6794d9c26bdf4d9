"""The learned memory ranker's parts (issue 76), on synthetic data (no model, no store): the
features are per query and relative, the logistic regression fits and repeats itself bit for bit,
its file round-trips and a bad one is refused by name, and the fill cuts instead of skipping."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from meve import get_token_counter
from meve.core.errors import InputError
from meve.memory import features
from meve.memory.features import NAMES, QuerySignals, gather, matrix, term_coverage
from meve.memory.fill import MIN_CUT, fill_by_score, with_partners
from meve.memory.log import Snapshot
from meve.memory.ranker import FORMAT, VERSION, Ranker, fit, fit_listwise, order_by_score
from meve.memory.records import Turn
from meve.memory.render import TRUNCATION_MARKER, render, render_turn

COUNTER = get_token_counter()
DAY0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)


def signals(rng: np.random.Generator, n: int = 40, query: str = "What did I say about my sister in Porto?") -> QuerySignals:
    dense = rng.uniform(-0.2, 0.9, n)
    dense[rng.choice(n, 5, replace=False)] = np.nan  # outside the vector pool
    bm25 = np.where(rng.uniform(size=n) < 0.5, rng.uniform(0.5, 12.0, n), 0.0)
    partner = np.where(np.arange(n) % 2 == 0, np.minimum(np.arange(n) + 1, n - 1), np.arange(n) - 1)
    return QuerySignals(
        query=query,
        positions=np.arange(n),
        dense=dense,
        bm25=bm25,
        coverage=rng.uniform(0, 1, n),
        age=rng.permutation(n),
        tokens=rng.integers(5, 400, n),
        roles=tuple("user" if i % 2 == 0 else "assistant" for i in range(n)),
        latest=np.arange(n) >= n - 2,
        partner=partner,
        n_turns=300,
    )


def test_every_feature_says_why():
    assert tuple(features.FEATURES) == NAMES and len(NAMES) == len(set(NAMES))
    assert all(len(why) > 30 for why in features.FEATURES.values())


@pytest.mark.parametrize("scale", [1e-3, 0.37, 3.0, 250.0])
def test_features_are_invariant_to_a_scale_of_a_querys_raw_scores(scale):
    sig = signals(np.random.default_rng(1))
    scaled = QuerySignals(**{**sig.__dict__, "dense": sig.dense * scale, "bm25": sig.bm25 * scale})
    x, y = matrix(sig), matrix(scaled)
    assert x.shape == (len(sig), len(NAMES)) and np.isfinite(x).all()
    np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_features_read_the_query_and_the_pool():
    sig = signals(np.random.default_rng(2))
    cols = dict(zip(NAMES, matrix(sig).T, strict=True))
    missing = np.isnan(sig.dense)
    assert (cols["dense_rel"][missing] == 0).all() and (cols["dense_rr"][missing] == 0).all()
    assert cols["dense_rel"].max() == 1.0 and cols["bm25_rel"].max() == 1.0
    assert (cols["bm25_rr"][sig.bm25 == 0] == 0).all()
    assert set(cols["role_match"][np.array(sig.roles) == "user"]) == {1.0}  # "I", "my": the user's turns
    assert (cols["latest"] == sig.latest).all() and (cols["time_recency"] == 0).all()
    short = matrix(QuerySignals(**{**sig.__dict__, "query": "Continue"}), ["latest_brevity", "latest_follow_up"])
    long = matrix(sig, ["latest_brevity"])
    assert short[sig.latest, 0].min() > long[sig.latest, 0].max() and (short[~sig.latest] == 0).all()
    with pytest.raises(ValueError, match="not known: allowed dense_rel"):
        matrix(sig, ["dense_rel", "cosine"])


def test_term_coverage_weighs_rare_terms():
    weights = features.idf(["sister", "porto", "tell"], {"sister": 3, "porto": 1, "tell": 40}, 50)
    cov = term_coverage(weights, [{"porto"}, {"tell"}, {"sister", "porto", "tell"}, set()])
    assert cov[0] > cov[1] and cov[2] == pytest.approx(1.0) and cov[3] == 0.0


def snapshot(lines: list[tuple[str, str, int]]) -> Snapshot:
    turns = [Turn(f"t{i}", role, text, DAY0 + timedelta(days=day, minutes=i), i) for i, (role, text, day) in enumerate(lines)]
    tokens = [COUNTER.count(render_turn(t)) for t in turns]
    keys = [(t.timestamp.timestamp(), f"{i:012d}") for i, t in enumerate(turns)]
    return Snapshot(turns, tokens, keys, list(range(len(turns))), len(turns), min(tokens))


def test_gather_takes_the_pools_the_latest_exchange_and_partners():
    snap = snapshot([("user" if i % 2 == 0 else "assistant", f"turn {i} about topic {i % 5}", 0) for i in range(12)])
    sig = gather(
        "what about topic 3?",
        snap,
        dense={3: 0.8, 8: 0.5},
        bm25={3: 4.0, 5: 2.0},
        latest=[10, 11],
        partner=lambda i: i + 1 if i % 2 == 0 else i - 1,
        coverage=lambda pos: np.full(len(pos), 0.5),
        skip=[4],
    )
    assert sig.positions.tolist() == [10, 11, 3, 8, 5, 2, 9]  # latest, pools, then partners (4, 5's partner, is skipped)
    assert np.isnan(sig.dense[4]) and sig.bm25[3] == 0.0 and sig.latest.tolist() == [True, True] + [False] * 5
    assert sig.age.tolist() == [1, 0, 8, 3, 6, 9, 2]
    assert sig.positions[sig.partner[2]] == 2 and sig.partner[4] == -1


def toy(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (n, 2))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0.9).astype(float)
    keep = np.abs(x[:, 0] + 0.5 * x[:, 1] - 0.9) > 0.05  # a margin: separable
    return x[keep], y[keep]


def test_the_regression_fits_a_separable_problem_and_repeats_itself_bit_for_bit(tmp_path):
    x, y = toy()
    names = ("dense_rel", "bm25_rel")
    a, b = fit(x, y, names=names, l2=1e-4), fit(x, y, names=names, l2=1e-4)
    assert ((a.score(x) > 0.5) == (y == 1)).all()
    assert a.weights[0] > 0 and a.weights[1] > 0 and a.weights[0] > a.weights[1]
    assert np.array_equal(a.weights, b.weights) and a.bias == b.bias
    assert a.save(tmp_path / "a.json").read_bytes() == b.save(tmp_path / "b.json").read_bytes()
    stronger = fit(x, y, names=names, l2=1e-1)
    assert np.linalg.norm(stronger.weights) < np.linalg.norm(a.weights)  # the penalty shrinks


def test_a_fit_refuses_what_it_cannot_fit():
    x, y = toy()
    with pytest.raises(ValueError, match="above 0"):
        fit(x, y, names=("dense_rel", "bm25_rel"), l2=0.0)
    with pytest.raises(ValueError, match="both labels"):
        fit(x, np.zeros(len(y)), names=("dense_rel", "bm25_rel"))
    with pytest.raises(ValueError, match="2 features"):
        fit(x[:, :1], y, names=("dense_rel", "bm25_rel"))


def test_the_listwise_fit_learns_the_order_within_each_query_whatever_its_level():
    # Each query's evidence is its candidate with the highest 2 x a + b; the queries' levels differ
    # by a shift a pointwise fit would have to spend weight on, and which cancels within a query.
    rng = np.random.default_rng(3)
    xs, ys, sizes = [], [], []
    for q in range(120):
        n = int(rng.integers(4, 25))
        x = rng.normal(size=(n, 2)) + q % 4
        y = np.zeros(n)
        y[np.argmax(2 * x[:, 0] + x[:, 1])] = 1
        xs, ys, sizes = [*xs, x], [*ys, y], [*sizes, n]
    names = ("dense_rel", "bm25_rel")
    a = fit_listwise(np.concatenate(xs), np.concatenate(ys), sizes, names=names, l2=1e-4)
    b = fit_listwise(np.concatenate(xs), np.concatenate(ys), sizes, names=names, l2=1e-4)
    assert np.array_equal(a.weights, b.weights) and a.bias == 0.0 and a.about["objective"] == "listwise"
    assert a.weights[0] > a.weights[1] > 0
    hits = [int(np.argmax(a.relative(x)) == np.argmax(y)) for x, y in zip(xs, ys, strict=True)]
    assert sum(hits) >= 0.9 * len(hits)
    assert all(a.relative(x).max() == 1.0 for x in xs)
    with pytest.raises(ValueError, match="sizes add up"):
        fit_listwise(np.concatenate(xs), np.concatenate(ys), sizes[:-1], names=names)
    with pytest.raises(ValueError, match="no query with weight"):
        fit_listwise(np.concatenate(xs), np.concatenate(ys), sizes, names=names, weight=np.zeros(len(sizes)))


def test_save_and_load_round_trip(tmp_path):
    x, y = toy()
    model = fit(np.column_stack([x, x[:, :1] ** 2]), y, names=("coverage", "recency", "length"), l2=1e-3, about={"sets": ["a", "b"]})
    back = Ranker.load(model.save(tmp_path / "m.json"))
    assert back.features == model.features and np.array_equal(back.weights, model.weights) and back.bias == model.bias
    assert back.about["sets"] == ["a", "b"] and back.about["l2"] == 1e-3
    z = np.random.default_rng(3).uniform(size=(5, 3))
    assert np.array_equal(back.score(z), model.score(z))
    raw = json.loads((tmp_path / "m.json").read_text())
    assert raw["format"] == FORMAT and raw["version"] == VERSION


GOOD = {"format": FORMAT, "version": VERSION, "features": ["dense_rel", "bm25_rel"], "weights": [1.5, -0.5], "bias": -2.0}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "not found"),
        ("{not json", "not readable as JSON"),
        (json.dumps([1, 2]), "holds list"),
        (json.dumps({**GOOD, "format": "something-else"}), "format 'something-else'"),
        (json.dumps({**GOOD, "version": 2}), "version 2 is not readable by this meve (it reads version 1)"),
        (json.dumps({**GOOD, "extra": 1}), "keys ['extra'] are not known"),
        (json.dumps({**GOOD, "features": ["dense_rel", "cosine"]}), "['cosine'] are not known"),
        (json.dumps({**GOOD, "weights": [1.0]}), "weights must be 2 numbers"),
        (json.dumps({**GOOD, "weights": [1.0, "x"]}), "finite numbers"),
        (json.dumps({**GOOD, "bias": None}), "bias must be a finite number"),
    ],
)
def test_a_bad_weights_file_is_refused_naming_the_file_and_what_is_allowed(tmp_path, content, says):
    path = tmp_path / "ranker.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        Ranker.load(path)
    msg = str(err.value)
    assert str(path) in msg and says in msg
    assert f'"format": "{FORMAT}"' in msg and "dense_rel" in msg  # what is allowed


def test_a_loaded_ranker_checks_the_rows_it_scores(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(GOOD))
    model = Ranker.load(path)
    assert model.score(np.array([[1.0, 0.0]]))[0] == pytest.approx(1 / (1 + np.exp(0.5)))
    with pytest.raises(InputError, match="rows of 2 features"):
        model.score(np.zeros((3, 4)))


def test_order_by_score_breaks_ties_toward_the_newer_turn():
    assert order_by_score(np.array([0.2, 0.9, 0.9, 0.1]), np.array([0, 5, 2, 1])).tolist() == [2, 1, 0, 3]


WORDS = " ".join(f"word{i}" for i in range(900))


def test_the_fill_cuts_a_turn_over_its_share_to_its_best_part():
    snap = snapshot([("user", "My sister lives in Porto.", 0), ("tool", WORDS + " the answer is forty-two " + WORDS, 0), ("user", "Short one.", 1)])
    sel = fill_by_score(snap, COUNTER, [1, 0, 2], l_max=256, dates=False, query="what is the answer?")
    assert set(sel.picked) == {0, 1, 2}  # the long turn is in as its best part, beside the others
    assert "answer" in sel.picked[1].text and sel.picked[1].text.endswith(TRUNCATION_MARKER)
    assert sel.picked[1].metadata["meve_truncated"] and sel.tokens == COUNTER.count(render(sel.turns)) <= 256
    assert sel.reasons[1][2] <= 128 + 8  # its share of l_max, with its line's head
    whole = fill_by_score(snap, COUNTER, [1, 0, 2], l_max=256, dates=False, query="what is the answer?", cut=False)
    assert set(whole.picked) == {0, 2}  # passed over whole


def test_the_fill_cuts_the_first_turn_that_does_not_fit_the_room_left_and_counts_dates():
    lines = [("user", " ".join(["filler"] * 50), 0), ("assistant", "The code for the gate is 4471, and " + " ".join(["more"] * 60), 1), ("user", "hi there", 2)]
    snap = snapshot(lines)
    sel = fill_by_score(snap, COUNTER, [0, 1, 2], l_max=120, dates=True, query="what is the gate code?")
    assert sel.reasons[0][1] == "learned rank 1" and sel.picked[0] is snap.turns[0]  # whole: under its share, and it fits
    assert "4471" in sel.picked[1].text and sel.picked[1].metadata["meve_truncated"] and "left of l_max 120" in sel.reasons[1][1]
    text = render(sel.turns, dates=True)
    assert sel.tokens == COUNTER.count(text) <= 120 and text.startswith("[2024-05-01]")
    tiny = fill_by_score(snap, COUNTER, [2, 1], l_max=COUNTER.count(render_turn(snap.turns[2])) + MIN_CUT // 2, dates=False, query="gate")
    assert list(tiny.picked) == [2] and not tiny.reasons[1][0]  # too little room for a cut worth a line
    with pytest.raises(ValueError, match="dates decided"):
        fill_by_score(snap, COUNTER, [0], l_max=100, dates="auto", query="x")  # type: ignore[arg-type]


def test_a_partner_turn_is_lifted_toward_its_anchor_as_the_shipped_fill_lifts_it():
    # 10 and 11 are an exchange; 11 scores low on its own, 10 high: lifted to 0.5 x 0.9 + 0.5 x 0.1 = 0.5, it passes 20 (0.4)
    partner = {10: 11, 11: 10, 20: 21, 21: 20, 30: None}.get
    order = with_partners([10, 20, 30, 11], [0.9, 0.4, 0.3, 0.1], partner, 0.5)
    assert order == [10, 11, 20, 30, 21]  # 21, outside the order, scores 0 of its own: 0.5 x 0.4 = 0.2
    # weight 0: a partner is worth its own score alone, so nothing moves and an unscored partner stays out of the running at 0
    assert with_partners([10, 20, 30, 11], [0.9, 0.4, 0.3, 0.1], partner, 0.0)[:4] == [10, 20, 30, 11]
