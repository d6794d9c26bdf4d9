"""evaluate / tune over real Chroma with fake models (tests/fakes.py): the report's fields, the
frontier and margin arithmetic on hand-made numbers, and the config file's round trip through
MeVe(config=...) and both adapters."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest

from meve import ConfigError, InputError, MeVe, MeVeConfig
from meve.evaluate import evaluate, frontier, tune
from meve.evaluate.arms import Rankings
from meve.evaluate.questions import as_questions, targets
from meve.evaluate.report import Report, arm_summary, reference_tokens
from meve.evaluate.tune import GRID, MIN_QUESTIONS, choose_setting, shipped_default
from meve.pipeline.config_file import as_config, write_config
from tests.fakes import FakeEmbedder, FakeScorer

DEMO = json.loads(resources.files("meve").joinpath("data/demo_corpus.json").read_text(encoding="utf-8"))["passages"]
QUESTIONS = str(resources.files("meve").joinpath("data/demo_questions.jsonl"))


@pytest.fixture
def meve():
    with MeVe.from_texts([p["text"] for p in DEMO], ids=[p["id"] for p in DEMO], embedder=FakeEmbedder(), scorer=FakeScorer()) as m:
        yield m


def test_the_summary_of_an_arm_on_hand_made_curves():
    curves = {"dense": [{"k": 1, "evidence": 0.4, "tokens": 100.0}, {"k": 2, "evidence": 0.6, "tokens": 200.0}, {"k": 3, "evidence": 0.7, "tokens": 300.0}]}
    row = arm_summary({"evidence": 0.6, "tokens": 150.0}, curves, reference_tokens(curves), (0.01, 0.2))
    assert row["frontier_at_tokens"] == 0.5 and row["margin"] == 0.1 and row["margin_ci95"] == [0.01, 0.2]
    assert row["frontier_tokens_for_same_evidence"] == 200.0 and row["token_saving_at_equal_evidence"] == 0.25 and row["tokens_vs_dense_top3"] == 0.5
    below = arm_summary({"evidence": 0.9, "tokens": 400.0}, curves, 300.0)
    assert below["frontier_tokens_for_same_evidence"] is None and "margin_ci95" not in below


def test_the_choice_is_the_best_margin_and_a_tie_goes_to_fewer_tokens():
    curves = {"s": {"dense": [{"k": 1, "evidence": 0.5, "tokens": 100.0}]}}
    rows = [{"s": {"evidence": 0.5, "tokens": 100.0}}, {"s": {"evidence": 0.6, "tokens": 100.0}}, {"s": {"evidence": 0.601, "tokens": 90.0}}]
    assert frontier.choose(rows, curves, {"s": 100.0}) == 2  # 0.6 and 0.601 tie within TIE: the fewer tokens wins
    assert frontier.choose(rows[:2], curves, {"s": 100.0}) == 1


def test_evaluate_reports_curves_arms_and_intervals(meve):
    report = evaluate(meve, QUESTIONS, reps=50)
    data = report.to_dict()
    assert {"metric", "questions", "passages", "arms", "curves", "notes"} <= set(data)
    assert data["questions"] == 60 and data["passages"] == len(DEMO)
    assert set(data["curves"]) == {"dense", "bm25", "hybrid"} and [r["k"] for r in data["curves"]["dense"]] == list(range(1, 11))
    arm = data["arms"]["this config"]
    assert {"evidence", "tokens", "frontier_at_tokens", "margin", "margin_ci95", "setting", "empty_rate"} <= set(arm)
    lo, hi = arm["margin_ci95"]
    assert lo <= arm["margin"] + 1e-9 and arm["margin"] <= hi + 1e-9
    # every top-k point lies on or under the frontier it makes
    assert all(frontier.margin(r, data["curves"]) <= 1e-9 for rows in data["curves"].values() for r in rows)
    json.dumps(data)


def test_evaluate_runs_the_settings_given_and_refuses_an_unknown_evidence_id_before_anything_runs(meve, tmp_path):
    report = evaluate(meve, QUESTIONS, settings={"strict": {"tau": 0.9}, "loose": MeVeConfig(tau=0.0)}, reps=20, ks=(1, 2))
    assert list(report.arms) == ["strict", "loose"] and report.arms["strict"]["setting"] == {"tau": 0.9}
    bad = tmp_path / "qs.jsonl"
    bad.write_text(json.dumps({"question": "x", "evidence_ids": ["nope"]}) + "\n")
    calls = meve.embedder.calls
    with pytest.raises(InputError, match="line 1: field 'evidence_ids': 'nope'"):
        evaluate(meve, bad)
    assert meve.embedder.calls == calls


def test_tune_keeps_the_default_when_the_dev_best_is_not_clearly_better_and_its_config_round_trips(meve, tmp_path):
    result = tune(meve, QUESTIONS, reps=50)
    data = result.report.to_dict()
    diff, (lo, hi) = data["dev_over_default"]
    assert lo <= diff <= hi
    # On these fakes the best of the grid beats the default on dev by less than the noise.
    assert data["dev_best"] in GRID and data["dev_best"] != shipped_default() and lo <= 0 < hi
    assert result.chosen is None and "so the default is kept" in (result.reason or "") and result.report.notes[0] == result.reason
    assert data["chosen"] == shipped_default() and data["kept_default"] and len(result.dev) == len(GRID)
    assert set(data["arms"]) == {"tuned", "default"} and data["arms"]["tuned"] == data["arms"]["default"]
    assert data["split"]["dev"] + data["split"]["test"] == 60 and data["questions"] == data["split"]["test"]
    assert result.config == meve.config.replace(**shipped_default())
    written = result.save(tmp_path / "out" / "config.json")
    assert {p.name for p in written.values()} >= {"config.json", "config.report.json", "config.report.md", "config.report.html"}
    assert MeVe.from_texts(["a passage."], embedder=FakeEmbedder(), scorer=FakeScorer(), config=written["config"]).config == result.config
    assert as_config(json.loads(written["config"].read_text())) == result.config == as_config(str(written["config"]))


def test_the_dev_best_replaces_the_incumbent_only_when_the_interval_of_its_lead_is_above_zero(meve):
    rankings = Rankings(meve)
    dev = targets(as_questions(QUESTIONS), rankings.text)
    weak, strong = GRID[5], GRID[10]  # on these fakes: margins -0.067 and +0.006
    replaced = choose_setting(rankings, dev, [strong], incumbent=weak, reps=200)
    kept = choose_setting(rankings, dev, [weak], incumbent=strong, reps=200)
    alone = choose_setting(rankings, dev, [weak, strong])
    assert (replaced.index, replaced.kept_incumbent) == (0, False) and replaced.over_incumbent is not None
    diff, (lo, hi) = replaced.over_incumbent
    assert 0 < lo <= diff <= hi
    assert (kept.index, kept.best, kept.kept_incumbent) == (None, 0, True)  # the incumbent is not in the grid: None, keep it
    assert alone.index == alone.best == 1 and alone.over_incumbent is None


def test_tune_ships_a_clearly_better_setting_and_reports_it_beside_the_incumbent(meve):
    result = tune(meve, QUESTIONS, grid=[GRID[10]], incumbent=GRID[5], reps=50)
    data = result.report.to_dict()
    assert result.reason is None and result.chosen == GRID[10] == data["chosen"] and data["dev_over_default"][1][0] > 0 and not data["kept_default"]
    assert set(data["arms"]) == {"tuned", "default"} and data["arms"]["default"]["setting"] == GRID[5]
    assert result.config == meve.config.replace(**GRID[10]) and "clearly better" in result.report.notes[0]


def test_when_the_dev_best_is_the_default_tune_says_so(meve):
    result = tune(meve, QUESTIONS, grid=[shipped_default()], reps=20)
    assert result.chosen is None and result.report.extra["dev_over_default"] == [0.0, [0.0, 0.0]]
    assert "the default is itself the best on dev" in (result.reason or "")


def test_with_too_few_questions_tune_keeps_the_default_and_says_why(meve):
    few = [{"question": f"Who built the running machine {i}?", "answers": ["Karl Drais"]} for i in range(MIN_QUESTIONS - 1)]
    result = tune(meve, few, reps=20)
    assert result.chosen is None and result.config == MeVeConfig() and f"at least {MIN_QUESTIONS}" in (result.reason or "")
    assert result.report.notes[0] == result.reason and set(result.report.arms) == {"default"}
    assert result.report.notes[1:] == [n for n in result.report.notes if n.startswith("answers: a question's answer strings are alternatives")]
    assert result.report.extra["kept_default"] and result.report.extra["chosen"] == shipped_default()


def test_a_config_file_is_read_by_meve_and_both_adapters(tmp_path):
    path = write_config(MeVeConfig(tau=0.42, t_max=77), tmp_path / "c.json")
    from langchain_meve import MeVeRetriever as LCRetriever
    from llamaindex_meve import MeVePostprocessor

    lc = LCRetriever.from_texts(["one passage."], embedder=FakeEmbedder(), scorer=FakeScorer(), config=str(path))
    assert (lc.meve.config.tau, lc.meve.config.t_max) == (0.42, 77)
    lc2 = LCRetriever.from_texts(["one passage."], embedder=FakeEmbedder(), scorer=FakeScorer(), config=path, t_max=50)
    assert (lc2.meve.config.tau, lc2.meve.config.t_max) == (0.42, 50)  # a field given beside the file wins
    post = MeVePostprocessor(config=path, embedder=FakeEmbedder(), scorer=FakeScorer())
    assert post.config.tau == 0.42


def test_bad_config_files_are_refused_naming_the_file_and_the_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"tau": 2}')
    with pytest.raises(ConfigError, match=r"tau=2 is not allowed.*bad.json"):
        as_config(bad)
    bad.write_text('{"t_maxx": 2}')
    with pytest.raises(ConfigError, match="did you mean 't_max'"):
        as_config(bad)
    bad.write_text("[1]")
    with pytest.raises(InputError, match="expected a JSON object"):
        as_config(bad)
    with pytest.raises(InputError, match="no such config file"):
        as_config(tmp_path / "missing.json")
    with pytest.raises(InputError, match="config must be"):
        as_config(3)


def test_the_reports_are_self_contained_and_the_plot_names_its_extra(monkeypatch, tmp_path):
    curves = {"dense": [{"k": 1, "evidence": 0.5, "tokens": 10.0}]}
    arm = {"setting": {}, **arm_summary({"evidence": 0.6, "tokens": 12.0}, curves, 10.0, (0.0, 0.2))}
    report = Report(3, 5, curves, {"tuned": arm}, ["a note"])
    written = report.save(tmp_path)
    page = written["html"].read_text()
    assert "<table>" in page and "a note" in page and "http" not in page.replace("http-equiv", "")
    assert ("data:image/png;base64," in page) == ("png" in written)
    assert "| tuned | 0.600 | 12.0 | 0.500 | +0.100 [+0.000, +0.200] |" in written["md"].read_text()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    from meve.evaluate.render import plot_png

    with pytest.raises(ImportError, match=r'pip install "meve\[plot\]"'):
        plot_png(report.to_dict())
    written = report.save(tmp_path / "no-plot")
    assert "png" not in written and "meve[plot]" in written["html"].read_text()


def test_a_config_file_carries_its_format_and_one_from_before_the_marker_reads_the_same(tmp_path):
    import json

    path = write_config(MeVeConfig(tau=0.42), tmp_path / "c.json")
    assert json.loads(path.read_text())["format"] == 1
    (tmp_path / "old.json").write_text(json.dumps(MeVeConfig(tau=0.42).to_dict()))  # as meve wrote it before 0.2.0
    assert as_config(tmp_path / "old.json") == as_config(path) == MeVeConfig(tau=0.42)


def test_a_config_file_of_a_newer_meve_is_refused_naming_it(tmp_path):
    import json

    from meve.core.formats import FormatError

    (tmp_path / "new.json").write_text(json.dumps({"format": 3, "tau": 0.4}))
    with pytest.raises(FormatError, match=r"new.json was written by a newer meve \(config file format 3"):
        as_config(tmp_path / "new.json")
    (tmp_path / "odd.json").write_text(json.dumps({"format": "two", "tau": 0.4}))
    with pytest.raises(FormatError, match="format is 'two'"):
        as_config(tmp_path / "odd.json")


def test_passage_recall_is_left_out_where_no_question_has_evidence_ids_not_reported_as_zero(meve):
    lines = [json.loads(line) for line in Path(QUESTIONS).read_text().splitlines() if line.strip()]
    answers_only = [{"question": q["question"], "answers": q["answers"]} for q in lines if q.get("answers")][:25]
    arm = evaluate(meve, answers_only, reps=20).to_dict()["arms"]["this config"]
    assert "passages" not in arm and arm["evidence"] > 0  # unknown without labels; it used to read 0.0
    labelled = [q for q in lines if q.get("evidence_ids")][:25]
    assert "passages" in evaluate(meve, labelled, reps=20).to_dict()["arms"]["this config"]


def test_an_evaluation_patches_nothing_on_the_meve_it_measures_so_other_threads_and_evaluations_are_untouched():
    # Issue 65: evaluation swapped in its own query encoder on the live MeVe: run() calls from other
    # threads went through it, and of two evaluations on one MeVe the first to end removed the other's.
    seen: list[dict[str, object]] = []

    class Watching(FakeEmbedder):
        def encode(self, texts):
            if watched:
                seen.append(dict(vars(watched[0])))  # the MeVe's state while the evaluation runs
            return super().encode(texts)

    watched: list[MeVe] = []
    m = MeVe.from_texts([p["text"] for p in DEMO], ids=[p["id"] for p in DEMO], embedder=Watching(), scorer=FakeScorer())
    before = dict(vars(m))
    watched.append(m)
    report = evaluate(m, QUESTIONS, reps=20)
    assert report.questions == 60 and seen
    for state in seen:
        assert state.keys() == before.keys() and all(state[k] is before[k] for k in before), [k for k in before if state[k] is not before[k]]


def test_the_report_names_its_latency_the_way_a_users_call_runs(meve):
    data = evaluate(meve, QUESTIONS, reps=20).to_dict()
    lat = data["arms"]["this config"]["latency"]
    assert lat["warm_calls"] == 20 and lat["warm_ms_p50"] > 0 and lat["first_call_ms"] > 0
    assert any("query vector computed once" in n and "query embedding included" in n for n in data["notes"])
