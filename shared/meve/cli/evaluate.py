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
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--db",
        type=checks.path_text,
        help="an existing Chroma directory (never created): meve's (`meve index`), or one langchain-chroma or "
        "llama-index-vector-stores-chroma wrote (its chunks are evaluated as they are)",
    )
    where.add_argument("--llamaindex", type=checks.path_text, help="a LlamaIndex persist dir (storage_context.persist): its nodes, as they are")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, type=checks.collection_name)
    p.add_argument(
        "--answers",
        choices=("any", "all"),
        default="any",
        help="how a question's several answer strings count: any (alternatives, the default) or all (each must occur)",
    )


@contextlib.contextmanager
def _corpus(args: argparse.Namespace) -> Iterator[tuple[Any, str | None]]:
    """What to evaluate over, and a note saying what it is: a MeVe over meve's own collection, or
    the chunks of the app's index (a LlamaIndex persist dir, a Chroma collection another library
    wrote) as ``{id: text}``, checked against the questions' evidence ids before any model loads."""
    from meve.evaluate.questions import check_evidence_ids
    from meve.evaluate.sources import FOREIGN_NOTE, chroma_passages, llamaindex_passages, made_by_meve
    from meve.retrieval.chroma import chroma_call, copy_client, read_only_copy

    if args.llamaindex is not None:
        passages, note = llamaindex_passages(args.llamaindex), FOREIGN_NOTE.format(source=f"LlamaIndex persist dir {args.llamaindex}")
    else:
        with read_only_copy(args.db) as db:
            client = copy_client(db)
            names = [c.name for c in chroma_call("list collections", client.list_collections)]
            collection = chroma_call("open the collection", client.get_collection, args.collection) if args.collection in names else None
            if collection is None or made_by_meve(collection):
                _check_before_models(args, db)
                yield _open_meve(args, db), None
                return
            passages, note = chroma_passages(collection), FOREIGN_NOTE.format(source=f"Chroma collection {args.collection!r} in {args.db}")
    if args.questions:
        with _naming(args.questions):
            check_evidence_ids(args.questions, set(passages))
    yield passages, note


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
    from meve.retrieval.chroma import chroma_call, copy_client

    if not args.questions or not any(q.evidence_ids for q in args.questions):
        return
    client = copy_client(db)
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

    console = _console()
    _few(console, len(args.questions))
    with _corpus(args) as (corpus, note), _naming(args.questions):
        settings = None if args.config is None else {"this config": args.config}
        if args.config is not None and not isinstance(corpus, dict):
            corpus.config, settings = args.config, None
        report = evaluate(corpus, args.questions, settings=settings, show_progress=sys.stderr.isatty(), answers=args.answers)
    if note is not None:
        report.notes.insert(0, note)
    console.print(report.verdict(), soft_wrap=True)
    console.print(f"{report.questions} questions over {report.passages} passages" + (f" ({note})" if note else ""), soft_wrap=True)
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

    if (args.questions is None) == (not args.no_labels):
        raise InputError("give --questions FILE.jsonl, or --no-labels to choose tau and the cut with no questions (not both)")
    console = _console()
    with _corpus(args) as (corpus, note):
        if args.no_labels:
            if isinstance(corpus, dict):
                raise InputError("--no-labels calibrates meve's own index (`meve index`); over another library's index, give --questions")
            return _no_labels(args, corpus, console)
        with _naming(args.questions):
            result = tune(corpus, args.questions, show_progress=sys.stderr.isatty(), answers=args.answers)
    if note is not None:
        result.report.notes.insert(0, note)
    console.print(result.report.verdict(), soft_wrap=True)
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
