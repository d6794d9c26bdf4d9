"""The questions file of `meve evaluate` / `meve tune`: every refusal is one line naming the line
and the field, before any model loads; the dev/test split is fixed by each question's own hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from meve import InputError
from meve.evaluate.questions import (
    Question,
    as_questions,
    check_evidence_ids,
    load_questions,
    parse_questions,
    passage_ids,
    split_of,
    split_questions,
    targets,
)

GOOD = {"question": "Who built it?", "answers": ["Drais"]}


def _refusal(*lines: str) -> str:
    with pytest.raises(InputError) as err:
        parse_questions(lines)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"question": "x", "answers": ["a"]', "line 2: not valid JSON"),
        ('["a list"]', "line 2: expected a JSON object"),
        ('{"answers": ["a"]}', "line 2: field 'question' is missing"),
        ('{"question": "  ", "answers": ["a"]}', "line 2: field 'question'"),
        ('{"question": 3, "answers": ["a"]}', "line 2: field 'question'"),
        ('{"question": "x"}', "line 2: no evidence field"),
        ('{"question": "x", "answers": []}', "line 2: field 'answers': [] is not allowed"),
        ('{"question": "x", "answers": ["a", " "]}', "line 2: field 'answers': item ' ' is not allowed"),
        ('{"question": "x", "answers": "a"}', "line 2: field 'answers': 'a' is not allowed"),
        ('{"question": "x", "evidence_ids": [1]}', "line 2: field 'evidence_ids': item 1 is not allowed"),
        ('{"question": "x", "evidence_sentences": []}', "line 2: field 'evidence_sentences'"),
        ('{"question": "x", "answer": ["a"]}', "line 2: field 'answer' is not known (did you mean 'answers'?"),
        ('{"question": "x", "answers": ["a"], "id": true}', "line 2: field 'id'"),
        ('{"question": "x", "answers": ["a"], "id": ""}', "line 2: field 'id'"),
    ],
)
def test_each_malformed_line_is_refused_naming_its_line_and_field(line, expected):
    assert expected in _refusal(json.dumps(GOOD), line)


def test_a_duplicate_id_names_both_lines_and_blank_lines_still_count():
    first = json.dumps({**GOOD, "id": "q1"})
    assert "line 4: field 'id': 'q1' was already given on line 1" in _refusal(first, "", " ", json.dumps({**GOOD, "id": "q1"}))
    assert len(parse_questions([first, json.dumps(GOOD), json.dumps(GOOD)])) == 3  # no ids: nothing to clash


def test_an_empty_file_is_refused_and_a_file_refusal_names_the_file(tmp_path):
    assert "no questions" in _refusal("", "  ")
    path = tmp_path / "qs.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{oops\n")
    with pytest.raises(InputError, match=r"qs.jsonl: line 2: not valid JSON"):
        load_questions(path)
    with pytest.raises(InputError, match="no such questions file"):
        load_questions(tmp_path / "missing.jsonl")


def test_a_good_file_reads_every_field():
    (q,) = parse_questions([json.dumps({"id": 7, "question": "Q?", "answers": ["a"], "evidence_ids": ["p1"], "evidence_sentences": ["S."]})])
    assert (q.id, q.text, q.answers, q.evidence_ids, q.evidence_sentences, q.line) == ("7", "Q?", ("a",), ("p1",), ("S.",), 1)


def test_records_in_python_are_checked_as_lines_are():
    assert [q.text for q in as_questions([GOOD, Question("Q2?", evidence_sentences=("S.",))])] == ["Who built it?", "Q2?"]
    with pytest.raises(InputError, match="line 2: field 'answers'"):
        as_questions([GOOD, {"question": "x", "answers": []}])
    with pytest.raises(InputError, match="no evidence"):
        Question("Q?")


def test_unknown_evidence_ids_are_refused_naming_the_line():
    qs = parse_questions([json.dumps(GOOD), json.dumps({"question": "x", "evidence_ids": ["p1", "p9"]})])
    with pytest.raises(InputError, match=r"line 2: field 'evidence_ids': 'p9' is not a passage id of the corpus \(2 passages\)"):
        check_evidence_ids(qs, {"p1", "p2"})
    check_evidence_ids(qs, {"p1", "p9"})


def test_a_record_id_names_its_one_chunk_and_a_record_of_several_chunks_is_refused():
    known = {"notes.md#0@aaa": "First.", "faq#0@bbb": "A.", "faq#1@ccc": "B."}
    (one,) = parse_questions([json.dumps({"question": "x", "evidence_ids": ["notes.md"]})])
    assert passage_ids([one], known) == {"notes.md": "notes.md#0@aaa"}
    (t,) = targets([one], known)
    assert t.evidence == ("First.",) and t.gold == frozenset({"notes.md#0@aaa"})
    (many,) = parse_questions([json.dumps({"question": "x", "evidence_ids": ["faq"]})])
    with pytest.raises(InputError, match="line 1: field 'evidence_ids': 'faq' was cut into 2 chunks"):
        check_evidence_ids([many], known)


def test_targets_hold_the_evidence_as_text():
    (q,) = parse_questions([json.dumps({"question": "x", "answers": ["a"], "evidence_ids": ["p1"], "evidence_sentences": ["S."]})])
    (t,) = targets([q], {"p1": "Passage one."})
    assert (t.id, t.evidence, t.answers, t.gold) == ("line-1", ("S.", "Passage one."), ("a",), frozenset({"p1"}))


def test_the_split_depends_on_each_question_alone():
    qs = [Question(f"question {i}?", id=f"q{i}", answers=("a",)) for i in range(400)]
    dev, test = split_questions(qs)
    assert len(dev) + len(test) == 400 and 150 < len(dev) < 250  # a fair coin per question
    shuffled_dev, _ = split_questions(list(reversed(qs))[:100])
    assert {q.id for q in shuffled_dev} == {q.id for q in dev if int(q.id[1:]) >= 300}  # order and neighbours do not matter
    # the id decides when there is one, else the text
    assert split_of(Question("same text?", id="a", answers=("x",))) == split_of(Question("other text?", id="a", answers=("x",)))
    assert split_of(Question("same text?", answers=("x",))) == split_of(Question("same text?", answers=("y",), line=9))
    # pinned to sha256 parity: a change of rule would move users' questions between splits
    assert [split_of(q) for q in qs[:6]] == ["dev" if int(hashlib.sha256(f"q{i}".encode()).hexdigest(), 16) % 2 == 0 else "test" for i in range(6)]
