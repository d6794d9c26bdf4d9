"""`meve evaluate` and `meve tune` as a user meets them: a malformed questions file is refused in
one line naming the line and the field before anything loads; tune writes a config that `meve
query --config` applies and a report beside it; `--no-labels` is `meve calibrate`'s recipe."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from meve.cli import main

pytestmark = pytest.mark.integration

PROBE = "import sys; sys.argv = ['meve', *sys.argv[1:]]; from meve.cli import main; code = main()"
HEAVY = "; import sys; print(','.join(m for m in ('torch', 'sentence_transformers') if m in sys.modules)); raise SystemExit(code)"
GOOD = {"question": "Who built it?", "answers": ["Drais"]}


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE + HEAVY, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)


BAD_FILES = [
    ("{oops", "qs.jsonl: line 2: not valid JSON"),
    (json.dumps({"answers": ["a"]}), "qs.jsonl: line 2: field 'question' is missing"),
    (json.dumps({"question": "x", "answers": []}), "qs.jsonl: line 2: field 'answers': [] is not allowed"),
    (json.dumps({"question": "x"}), "qs.jsonl: line 2: no evidence field"),
    (json.dumps({**GOOD, "id": "a"}), "qs.jsonl: line 2: field 'id': 'a' was already given on line 1"),
]


@pytest.mark.parametrize(("line", "message"), BAD_FILES, ids=[m.split(": ", 2)[2][:40] for _, m in BAD_FILES])
@pytest.mark.parametrize("command", ["evaluate", "tune"])
def test_a_malformed_questions_file_is_refused_in_one_line_before_anything_loads(tmp_path, command, line, message):
    (tmp_path / "qs.jsonl").write_text(json.dumps({**GOOD, "id": "a"}) + "\n" + line + "\n")
    out = _run(tmp_path, command, "--db", "db", "--questions", "qs.jsonl", *(["--out", "c.json"] if command == "tune" else []))
    err = out.stderr.strip()
    assert out.returncode == 2 and message in err and err.count("\n") == 0, err
    assert out.stdout.strip() == "" and sorted(p.name for p in tmp_path.iterdir()) == ["qs.jsonl"]


def test_tune_needs_questions_or_no_labels_and_a_bad_config_file_is_refused(tmp_path):
    out = _run(tmp_path, "tune", "--db", "db", "--out", "c.json")
    assert out.returncode == 2 and "give --questions FILE.jsonl, or --no-labels" in out.stderr
    (tmp_path / "c.json").write_text('{"tau": 3}')
    (tmp_path / "qs.jsonl").write_text(json.dumps(GOOD) + "\n")
    for argv in (["query", "q", "--db", "db", "--config", "c.json"], ["evaluate", "--db", "db", "--questions", "qs.jsonl", "--config", "c.json"]):
        out = _run(tmp_path, *argv)
        assert out.returncode == 2 and "argument --config" in out.stderr and "tau=3 is not allowed" in out.stderr and out.stderr.count("\n") == 1


@pytest.fixture
def indexed(tmp_path, capsys):
    """The demo corpus indexed by `meve index`, and its questions (ids as the index gave them)."""
    corpus = json.loads(resources.files("meve").joinpath("data/demo_corpus.json").read_text(encoding="utf-8"))["passages"]
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps({"id": p["id"], "text": p["text"]}) + "\n" for p in corpus))
    assert main(["index", str(passages), "--db", str(tmp_path / "db")]) == 0
    capsys.readouterr()
    return tmp_path / "db", str(resources.files("meve").joinpath("data/demo_questions.jsonl"))


def test_tune_writes_a_config_query_applies_and_evaluate_reports_it(indexed, tmp_path, capsys):
    db, questions = indexed
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(Path(questions).read_text().splitlines()[:25]) + "\n")  # 17 dev, 8 test; record ids name their one chunk
    assert main(["tune", "--db", str(db), "--questions", str(few), "--out", str(tmp_path / "out" / "meve.json")]) == 0
    # 17 dev questions cannot show that the best of 48 settings beats the default: the default is written
    assert "kept the default: the best of 48 settings on 17 dev questions" in capsys.readouterr().out
    config = json.loads((tmp_path / "out" / "meve.json").read_text())
    report = json.loads((tmp_path / "out" / "meve.report.json").read_text())
    assert report["kept_default"] and report["dev_over_default"][1][0] <= 0 and report["dev_best"] != report["chosen"]
    assert set(report["arms"]) == {"tuned", "default"} and report["chosen"].items() <= config.items()
    assert (tmp_path / "out" / "meve.report.html").exists() and (tmp_path / "out" / "meve.report.md").exists()
    assert main(["query", "Who made the pneumatic tyre?", "--db", str(db), "--config", str(tmp_path / "out" / "meve.json"), "--json"]) == 0
    used = json.loads(capsys.readouterr().out)["config"]
    assert {k: used[k] for k in report["chosen"]} == report["chosen"]
    assert main(["evaluate", "--db", str(db), "--questions", str(few), "--config", str(tmp_path / "out" / "meve.json"), "--out", str(tmp_path / "ev")]) == 0
    ev = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert ev["questions"] == 25 and set(ev["arms"]) == {"this config"} and set(ev["curves"]) == {"dense", "bm25", "hybrid"}


def test_an_evidence_id_the_index_lacks_is_refused_naming_the_file_and_line(indexed, tmp_path, capsys):
    db, _ = indexed
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps(GOOD) + "\n" + json.dumps({"question": "x", "evidence_ids": ["no-such-passage"]}) + "\n")
    assert main(["evaluate", "--db", str(db), "--questions", str(qs)]) == 2
    assert "qs.jsonl: line 2: field 'evidence_ids': 'no-such-passage' is not a passage id" in capsys.readouterr().err


def test_tune_without_labels_is_calibrate_written_as_a_config(indexed, tmp_path, capsys):
    db, _ = indexed
    assert main(["tune", "--db", str(db), "--no-labels", "--out", str(tmp_path / "nl.json")]) == 2  # 18 short passages: too few pseudo-questions
    assert "calibration needs at least 10" in capsys.readouterr().err


def test_tune_without_labels_writes_the_calibrated_config_and_a_report_that_states_the_measured_figures(tmp_path, capsys, bike_notes):
    notes = bike_notes
    db, out = tmp_path / "db", tmp_path / "meve.json"
    assert main(["index", str(notes), "--db", str(db), "--chunk-tokens", "40"]) == 0
    assert main(["tune", "--db", str(db), "--no-labels", "--out", str(out)]) == 0
    assert "reached its target (0.9) on none of six corpora" in capsys.readouterr().out
    config, report = json.loads(out.read_text()), json.loads((tmp_path / "meve.report.json").read_text())
    assert {k: config[k] for k in report["chosen"]} == report["chosen"] and isinstance(report["reached_target"], bool)
    assert "none of six" in report["measured"]
    capsys.readouterr()
    assert main(["query", "How often should I oil the chain?", "--db", str(db), "--config", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["tau"] == config["tau"]


PLACES = [
    "Varna",
    "Oslo",
    "Tartu",
    "Cadiz",
    "Bergen",
    "Porto",
    "Lyon",
    "Gdansk",
    "Split",
    "Turku",
    "Malmo",
    "Bari",
    "Riga",
    "Brno",
    "Graz",
    "Ghent",
    "Nantes",
    "Kiel",
    "Pula",
    "Vigo",
    "Aarhus",
    "Basel",
    "Cork",
    "Trier",
    "Lucca",
]
TOWN_LIFE = [
    "The weather that spring was mild and the fishing fleet stayed out late",
    "Local records mention a market held every second Thursday",
    "Travellers often remarked on the smell of tar near the docks",
    "The town council debated the price of salt for several weeks",
    "A choir rehearsed in the old hall on winter evenings",
    "Children gathered shells along the northern beach after storms",
    "Merchants traded wool, timber and dried fish along the coast",
    "Bells from the cathedral marked each hour across the square",
]


def test_tune_writes_a_clearly_better_setting_when_dev_shows_it(tmp_path, capsys):
    """Each passage: one fact among eight sentences of town life; each question asks for the fact
    (its evidence sentence). Whole passages cost eight times what the evidence needs, so on dev a
    pruning setting clearly beats the default, and tune writes it."""
    passages, questions = tmp_path / "passages.jsonl", tmp_path / "qs.jsonl"
    facts = [
        f"The harbour master of {place} painted the gate {('teal', 'ochre', 'violet', 'amber')[i % 4]} in {1880 + 3 * i}." for i, place in enumerate(PLACES)
    ]
    texts = [
        " ".join([*(f"{s} in {place}." for s in TOWN_LIFE[:4]), fact, *(f"{s} in {place}." for s in TOWN_LIFE[4:])])
        for place, fact in zip(PLACES, facts, strict=True)
    ]
    passages.write_text("".join(json.dumps({"id": f"p{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    questions.write_text(
        "".join(
            json.dumps({"question": f"What colour did the harbour master of {p} paint the gate?", "evidence_sentences": [f]}) + "\n"
            for p, f in zip(PLACES, facts, strict=True)
        )
    )
    db, out = tmp_path / "db", tmp_path / "out" / "meve.json"
    assert main(["index", str(passages), "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["tune", "--db", str(db), "--questions", str(questions), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report, config = json.loads((tmp_path / "out" / "meve.report.json").read_text()), json.loads(out.read_text())
    assert f"chosen on {report['split']['dev']} dev questions" in printed and "kept the default" not in printed
    assert (
        not report["kept_default"] and report["dev_over_default"][1][0] > 0 and report["chosen"] == report["dev_best"] != report["arms"]["default"]["setting"]
    )
    assert config["prune"] == "scorer" and report["arms"]["tuned"]["margin"] > report["arms"]["default"]["margin"]
    assert main(["query", "What colour did the harbour master of Oslo paint the gate?", "--db", str(db), "--config", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["prune"] == "scorer"


@pytest.mark.parametrize("command", ["evaluate", "tune"])
def test_output_paths_are_refused_before_anything_runs(tmp_path, command):
    # Issue 65: an existing file or folder, or an unwritable place, failed with a raw OSError after the whole evaluation.
    (tmp_path / "qs.jsonl").write_text(json.dumps(GOOD) + "\n")
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    bad = {"evaluate": [("a-file", "it is a file; give a folder")], "tune": [("a-folder", "it is a folder; give the path of the config file")]}[command]
    bad.append(("a-file/sub/out", "is not a folder this user can write to"))  # unwritable for root too (the suite runs as root)
    for out, message in bad:
        done = _run(tmp_path, command, "--db", "db", "--questions", "qs.jsonl", "--out", out)
        assert done.returncode == 2 and message in done.stderr and "argument --out" in done.stderr, done.stderr
        assert done.stdout.strip() == ""  # nothing ran: no model module was even imported


def test_an_evidence_id_is_checked_before_a_model_loads_and_a_line_keeps_its_number_after_blank_lines(indexed, tmp_path):
    db, _ = indexed
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps(GOOD) + "\n\n\n" + json.dumps({"question": "x", "evidence_ids": ["no-such-passage"]}) + "\n")
    done = _run(tmp_path, "evaluate", "--db", str(db), "--questions", str(qs))
    assert done.returncode == 2 and "qs.jsonl: line 4: field 'evidence_ids': 'no-such-passage' is not a passage id" in done.stderr, done.stderr
    assert "torch" not in done.stdout and "sentence_transformers" not in done.stdout  # refused before any model loaded


def test_evaluate_on_a_handful_of_questions_warns_that_the_interval_means_nothing(indexed, tmp_path, capsys):
    db, questions = indexed
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(Path(questions).read_text().splitlines()[:3]) + "\n")
    assert main(["evaluate", "--db", str(db), "--questions", str(few), "--out", str(tmp_path / "ev")]) == 0
    assert "warning: 3 question(s): too few for the intervals to mean anything" in capsys.readouterr().out
