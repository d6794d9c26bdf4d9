"""`meve evaluate` and `meve tune`: a user's questions over an index, MeVe against the top-k
frontier, and a config chosen on a dev split (or, with ``--no-labels``, by ``meve calibrate``'s
label-free recipe)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from meve.cli import checks
from meve.cli.commands import DEFAULT_COLLECTION, _console, _open_meve

__all__ = ["NO_LABELS_MEASURED", "add_commands", "cmd_evaluate", "cmd_tune"]

# BENCHMARKS.md, "Context": the label-free recipe applied to the LODO choice on each left-out test corpus (target 0.9).
NO_LABELS_MEASURED = (
    "measured on the six context sets (BENCHMARKS.md, 'Context'): the label-free recipe reached its target (0.9) on none of six corpora "
    "(pseudo-question recall 0.60-0.79) and lowered the margin over the top-k frontier on all six (e.g. SQuAD +0.0927 -> +0.0675, "
    "MS MARCO +0.0059 -> -0.0040); with a few dozen real questions, `meve tune --questions` chooses on them instead"
)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """`meve evaluate` and `meve tune`."""
    p = sub.add_parser("evaluate", parents=[common], help="measure MeVe against dense, BM25 and hybrid top-k on your questions (JSONL)")
    _add_corpus(p)
    p.add_argument(
        "--questions", required=True, type=checks.questions_file, help="one JSON object a line: question, and answers / evidence_ids / evidence_sentences"
    )
    p.add_argument("--config", type=checks.config_file, help="a config file (`meve tune --out`) to evaluate instead of the defaults")
    p.add_argument("--out", type=checks.out_folder, help="folder for report.json, report.md, report.html and report.png (replaced if there)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("tune", parents=[common], help="choose MeVe's setting for an index on a dev split of your questions; write it as a config file")
    _add_corpus(p)
    p.add_argument("--questions", type=checks.questions_file, help="one JSON object a line (as `meve evaluate`); required unless --no-labels")
    p.add_argument("--out", required=True, type=checks.out_file, help="the config file to write (JSON; replaced if there); its report is written beside it")
    p.add_argument("--no-labels", dest="no_labels", action="store_true", help="no questions: choose tau and the cut by `meve calibrate`'s recipe")
    p.add_argument("--target", type=checks.share, default=0.9, help="with --no-labels: share of pseudo-questions whose evidence must be kept")
    p.add_argument("--seed", type=checks.integer(0, None, "seed of the sample"), default=0)
    p.set_defaults(func=cmd_tune)


def _add_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, type=checks.path_text, help="an existing Chroma directory (never created; `meve index` makes one)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, type=checks.collection_name)


@contextlib.contextmanager
def _naming(questions: Any) -> Iterator[None]:
    """A refusal of a question's line (an evidence id the index lacks) names the questions file."""
    from meve.core.errors import InputError

    try:
        yield
    except InputError as exc:
        if str(exc).startswith("line "):
            raise InputError(f"{getattr(questions, 'path', 'questions')}: {exc}") from None
        raise


def _check_before_models(args: argparse.Namespace, db: str) -> None:
    """What can be refused before a model loads: each evidence id against the collection's ids
    (read from Chroma alone), naming the questions file and the line."""
    from meve.evaluate.questions import check_evidence_ids
    from meve.retrieval.chroma import chroma_call, chroma_client

    if not args.questions or not any(q.evidence_ids for q in args.questions):
        return
    client = chroma_client(db, create=False)
    names = [c.name for c in chroma_call("list collections", client.list_collections)]
    if args.collection not in names:
        return  # _open_meve names it
    collection = chroma_call("open the collection", client.get_collection, args.collection)
    ids = chroma_call("read the passage ids", collection.get, include=[])["ids"]
    with _naming(args.questions):
        check_evidence_ids(args.questions, set(ids))


def _few(console: Any, n: int) -> None:
    from meve.evaluate.tune import MIN_QUESTIONS

    if n < MIN_QUESTIONS:
        console.print(
            f"warning: {n} question(s): too few for the intervals to mean anything (a margin can read +0.000 [+0.000, +0.000]); "
            f"give at least {MIN_QUESTIONS}, better 50 or more",
            soft_wrap=True,
        )


def _written(console: Any, written: dict[str, Path]) -> None:
    if "png" not in written:
        from meve.evaluate.render import EXTRA_HINT

        console.print(f"no plot: {EXTRA_HINT}", soft_wrap=True)
    console.print("wrote " + ", ".join(str(p) for p in written.values()), soft_wrap=True)


def _summary(console: Any, report: Any) -> None:
    for label, arm in report.arms.items():
        lo, hi = arm.get("margin_ci95") or (arm["margin"], arm["margin"])
        console.print(
            f"{label}: evidence {arm['evidence']:.3f} at {arm['tokens']:.1f} tokens; frontier there {arm['frontier_at_tokens']:.3f}; "
            f"margin {arm['margin']:+.3f} [{lo:+.3f}, {hi:+.3f}]",
            soft_wrap=True,
        )


def cmd_evaluate(args: argparse.Namespace) -> int:
    """`meve evaluate`: MeVe (its defaults, or ``--config``) against the top-k frontier on the questions."""
    from meve.evaluate.evaluation import evaluate
    from meve.retrieval.chroma import read_only_copy

    console = _console()
    _few(console, len(args.questions))
    with read_only_copy(args.db) as db:
        _check_before_models(args, db)
        meve = _open_meve(args, db)
        if args.config is not None:
            meve.config = args.config
        with _naming(args.questions):
            report = evaluate(meve, args.questions, show_progress=sys.stderr.isatty())
    console.print(f"{report.questions} questions over {report.passages} passages")
    _summary(console, report)
    if args.out:
        _written(console, report.save(args.out))
    else:
        sys.stdout.write(json.dumps(report.to_dict()["arms"], indent=1) + "\n")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    """`meve tune`: choose on a dev split, report on the test split, write the config and its report."""
    from meve.core.errors import InputError
    from meve.evaluate.tune import tune
    from meve.retrieval.chroma import read_only_copy

    if (args.questions is None) == (not args.no_labels):
        raise InputError("give --questions FILE.jsonl, or --no-labels to choose tau and the cut with no questions (not both)")
    console = _console()
    with read_only_copy(args.db) as db:
        _check_before_models(args, db)
        meve = _open_meve(args, db)
        if args.no_labels:
            return _no_labels(args, meve, console)
        with _naming(args.questions):
            result = tune(meve, args.questions, show_progress=sys.stderr.isatty())
    if result.reason is not None:
        console.print(f"kept the default: {result.reason}", soft_wrap=True)
    else:
        console.print(f"chosen on {result.report.extra['split']['dev']} dev questions: {result.chosen}", soft_wrap=True)
    _summary(console, result.report)
    written = result.save(args.out)
    _written(console, written)
    console.print(f"use it: `meve query ... --config {written['config']}`, MeVe.from_chroma(..., config=path) or either adapter's config=", soft_wrap=True)
    return 0


def _no_labels(args: argparse.Namespace, meve: Any, console: Any) -> int:
    """`meve tune --no-labels`: `meve calibrate`'s recipe, written as a config file with a report saying what it measured."""
    from meve.core.durable import write_atomically
    from meve.pipeline.config_file import write_config

    cal = meve.calibrate(target=args.target, seed=args.seed, show_progress=sys.stderr.isatty())
    out = write_config(meve.config.replace(**cal.config), args.out)
    report = {
        "mode": "no labels (meve calibrate's recipe: pseudo-questions from the passages)",
        "chosen": cal.config,
        "target": cal.target,
        "pseudo_question_recall": cal.recall,
        "passages_kept": cal.kept,
        "pseudo_questions": cal.queries,
        "reached_target": cal.recall >= cal.target,
        "measured": NO_LABELS_MEASURED,
    }
    path = out.with_name(f"{out.stem}.report.json")
    write_atomically(path, (json.dumps(report, indent=1) + "\n").encode("utf-8"))
    reached = "reached" if report["reached_target"] else "did NOT reach"
    console.print(f"no labels: {cal.config} keeps the evidence of {cal.recall:.0%} of {cal.queries} pseudo-questions ({reached} the target {cal.target:.0%})")
    console.print(f"note: {NO_LABELS_MEASURED}", soft_wrap=True)
    console.print(f"wrote {out}, {path}", soft_wrap=True)
    return 0
