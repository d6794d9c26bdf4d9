"""The MemoryCode loader's rules (benchmarks.harness.memorycode) on a hand-built dialogue: turns by
speaker, the mentor as the user, and the evidence of a request (the turn stating its convention's
latest version, found by its quoted token)."""

from __future__ import annotations

import json
from collections import Counter

from benchmarks.harness.memorycode import REQUEST, memorycode
from benchmarks.harness.splits import split_of

TOPICS = {
    "instructions": [
        {"id": 0, "text": ["always start variable names with 'x_'", "always start variable names with 'n_'"], "eval_query": "function that adds two numbers"},
        {"id": 1, "text": ["always use CamelCase for class names"], "eval_query": "Stack class"},
    ]
}
SESSIONS = [
    "Ana: Welcome, Ben.\n\nBen: Thanks, Ana.\n\nAna: Always start variable names with 'x_'.\n\nBen: Understood.",
    "Ana: Let's talk about testing today.\n\nBen: Sure.",
    "Ana: An update: start variable names with 'n_' from now on.\n\nBen: Got it.\n\nAna: And use CamelCase for class names.\n\nBen: Will do.",
]


def test_a_request_rests_on_the_mentors_turn_stating_its_conventions_latest_version(tmp_path):
    (tmp_path / "dataset").mkdir()
    (tmp_path / "topics.json").write_text(json.dumps(TOPICS))
    dialogue = {
        "context": {"mentor": "Ana", "mentee": "Ben"},
        "instructions": [[[0, 0]], [-1], [[0, 1], [1, 0]]],
        "sessions": [{"text": t, "history_eval_query": None} for t in SESSIONS[:-1]]
        + [{"text": SESSIONS[-1], "history_eval_query": ["function that adds two numbers", "Stack class"]}],
    }
    (tmp_path / "dataset" / "dialogue_151.json").write_text(json.dumps(dialogue))
    dropped: Counter[str] = Counter()
    split = memorycode(tmp_path, dropped, dialogues=("151",))
    (conv,) = split[split_of("memorycode:151:0")]
    assert [(t.role, t.text) for t in conv.turns[:2]] == [("user", "Welcome, Ben."), ("assistant", "Thanks, Ana.")]
    assert len(conv.turns) == 10 and conv.turns[4].timestamp.day == 2  # session 1, a day after session 0
    (q,) = conv.questions
    assert q.text == REQUEST.format("function that adds two numbers")
    assert q.evidence == ("151/2/0",)  # the update, not the first version
    assert dropped == Counter({"memorycode: the convention quotes no token to find its turn by": 1})
