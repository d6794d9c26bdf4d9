"""Questions the corpus cannot answer: how often does MeVe pad the context anyway?

Data: SQuAD v1.1 dev articles, split by ``squad_dev_split`` into a tune half and a test half.
Within each half the articles are split again (sha256 order): the first half's paragraphs are
the corpus, questions about them are answerable; questions about the second half's articles
are off-topic for that corpus (the "capital of Australia over articles about bicycles" case).

For each fallback rule (``fallback_tau`` x ``fallback_min_bm25``) this measures, with meve's
default models:

- padded rate: unanswerable questions that still get a non-empty context;
- answer-in-context: answerable questions whose context holds a gold answer string;
- mean context tokens of both.

The default is chosen on the tune half only: the lowest padded rate whose answer-in-context is
within 0.01 of the old rule (no floor, no rejection), with fallback_tau at most MeVeConfig's tau
(above it every rule ties on tune: the fallback would ask more of a BM25 hit than verification
asks of a dense candidate). The test half is then reported for the old rule, the chosen one and
the one MeVeConfig ships.

    python -m benchmarks.unanswerable [--data ../shared/data] [--questions 120]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.common import MEVE_KNOBS, RESULTS, acting, data_dir, machine, squad, squad_dev_split
from benchmarks.harness.metrics import answer_in

TAUS = (0.0, 0.05, 0.1, 0.2, 0.3)
FLOORS = (0.0, 2.0, 4.0)
OLD = (0.0, 0.0)  # the rule before this change: any BM25 hit, whatever the verifier said


def _halves(articles: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    order = squad_dev_split([a["title"] for a in articles])  # reused as a fixed sha256 order within the half
    inside = [a for a in articles if order[a["title"]] == "tune"]
    outside = [a for a in articles if order[a["title"]] == "test"]
    return inside, outside


def _questions(articles: list[dict[str, Any]], n: int, seed: int) -> list[tuple[str, list[str]]]:
    qs = [(q["question"], [a["text"] for a in q["answers"]]) for art in articles for p in art["paragraphs"] for q in p["qas"]]
    random.Random(seed).shuffle(qs)
    return qs[:n]


def _measure(meve: Any, answerable: list[tuple[str, list[str]]], offtopic: list[tuple[str, list[str]]], tau_fb: float, floor: float) -> dict[str, Any]:
    found = tokens_a = 0
    for q, answers in answerable:
        r = meve.run(q, fallback_tau=tau_fb, fallback_min_bm25=floor)
        found += answer_in(answers, r.context)
        tokens_a += r.token_count
    padded = tokens_u = fb_added = 0
    for q, _ in offtopic:
        r = meve.run(q, fallback_tau=tau_fb, fallback_min_bm25=floor)
        padded += bool(r.documents)
        tokens_u += r.token_count
        fb_added += len(r.phase("fallback").info.get("added", []))
    return {
        "fallback_tau": tau_fb,
        "fallback_min_bm25": floor,
        "answer_in_context": round(found / len(answerable), 4),
        "tokens_answerable": round(tokens_a / len(answerable), 1),
        "padded_rate": round(padded / len(offtopic), 4),
        "tokens_unanswerable": round(tokens_u / len(offtopic), 1),
        "fallback_added_per_unanswerable": round(fb_added / len(offtopic), 3),
    }


def _split(articles: list[dict[str, Any]], n: int, seed: int, grid: list[tuple[float, float]]) -> dict[str, Any]:
    from meve import MeVe

    inside, outside = _halves(articles)
    texts = [p["context"] for a in inside for p in a["paragraphs"]]
    t0 = time.perf_counter()
    meve = MeVe.from_texts(texts)
    build_s = time.perf_counter() - t0
    answerable = _questions(inside, n, seed)
    offtopic = _questions(outside, n, seed + 1)
    rows = []
    for tau_fb, floor in grid:
        rows.append(_measure(meve, answerable, offtopic, tau_fb, floor))
        print(json.dumps(rows[-1]), flush=True)
    return {
        "corpus_articles": [a["title"] for a in inside],
        "offtopic_articles": [a["title"] for a in outside],
        "paragraphs": len(texts),
        "answerable": len(answerable),
        "unanswerable": len(offtopic),
        "build_s": round(build_s, 1),
        "rows": rows,
    }


def choose(rows: list[dict[str, Any]], slack: float = 0.01) -> dict[str, Any]:
    old = next(r for r in rows if (r["fallback_tau"], r["fallback_min_bm25"]) == OLD)
    ok = [r for r in rows if r["answer_in_context"] >= old["answer_in_context"] - slack]
    return min(ok, key=lambda r: (r["padded_rate"], -r["answer_in_context"], -r["fallback_tau"]))


def run(data: Path, questions: int) -> dict[str, Any]:
    from meve import MeVeConfig

    articles = squad(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz")
    split = squad_dev_split([a["title"] for a in articles])
    tune = [a for a in articles if split[a["title"]] == "tune"]
    test = [a for a in articles if split[a["title"]] == "test"]
    shipped = MeVeConfig()  # every other setting: the verification default this run measured under
    # A fallback passage is a BM25 hit the dense candidates missed; asking it for more than tau
    # would reject what verification itself accepts, so the grid stops at tau.
    grid = [(t, f) for t in TAUS if t <= shipped.tau for f in FLOORS]
    tune_res = _split(tune, questions, seed=11, grid=grid)
    chosen = choose(tune_res["rows"])
    picked = (chosen["fallback_tau"], chosen["fallback_min_bm25"])
    as_shipped = (shipped.fallback_tau, shipped.fallback_min_bm25)
    test_res = _split(test, questions, seed=12, grid=list(dict.fromkeys([OLD, picked, as_shipped])))
    rule = "lowest padded rate within 0.01 answer-in-context of the old rule, on tune; fallback_tau at most tau"
    config = acting({k: getattr(shipped, k) for k in MEVE_KNOBS})
    return {
        "meve_config": config,
        "shipped_rule": {"fallback_tau": as_shipped[0], "fallback_min_bm25": as_shipped[1]},
        "tune": tune_res,
        "chosen": {"fallback_tau": picked[0], "fallback_min_bm25": picked[1], "rule": rule},
        "test": test_res,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder holding train/squad (default ../shared/data)")
    parser.add_argument("--questions", type=int, default=120, help="answerable and off-topic questions per half")
    args = parser.parse_args()
    payload = run(data_dir(args.data), args.questions)
    command = f"python -m benchmarks.unanswerable --questions {args.questions}"
    payload.update({"command": command, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()})
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "unanswerable.json").write_text(json.dumps(payload, indent=2))
    print("wrote benchmarks/results/unanswerable.json")


if __name__ == "__main__":
    main()
