"""SelQA-chat's question types, on small files in SelQA's format written here: a question its
annotators reworded on purpose (``is_paraphrase``) is "paraphrase", the others "single-hop"
(answered by sentences of one section); the evidence is the answer sentences' turns."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness.conversations import selqa_chat

SENTENCES = ["The museum opened in 1965.", "It holds the Dead Sea scrolls.", "Entry is free on Tuesdays.", "The garden has sculptures."]


def _item(question: str, answer: int, paraphrase: bool) -> dict[str, object]:
    return {
        "section": "Museums",
        "question": question,
        "article": "Israel",
        "is_paraphrase": paraphrase,
        "topic": "COUNTRY",
        "answers": [answer],
        "candidates": SENTENCES,
    }


def test_a_reworded_question_is_a_paraphrase_and_the_others_single_hop(tmp_path: Path):
    for split in ("dev", "test"):
        items = [_item("When did the museum open?", 0, False), _item("Which ancient texts can visitors see there?", 1, True)]
        (tmp_path / f"selqa-ass-{split}.json").write_text(json.dumps(items))
    sets = selqa_chat(root=tmp_path)
    for split in ("dev", "test"):
        (conv,) = sets[split]
        by_text = {q.text: q for q in conv.questions}
        assert by_text["When did the museum open?"].category == "single-hop"
        assert by_text["Which ancient texts can visitors see there?"].category == "paraphrase"
        assert by_text["Which ancient texts can visitors see there?"].evidence == ("Israel/Museums#1",)
