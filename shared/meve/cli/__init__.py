"""The ``meve`` command: argument parsing and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from meve.cli import checks, evaluate
from meve.cli.commands import DEFAULT_COLLECTION, cmd_calibrate, cmd_demo, cmd_index, cmd_memory, cmd_query
from meve.cli.index_files import DEFAULT_INCLUDE
from meve.core.errors import MeVeError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a refused argument is one line (no usage block), exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand; every value is checked here (:mod:`meve.cli.checks`)."""
    from meve import __version__

    parser = _Parser(prog="meve", description="Verified, de-duplicated, token-budgeted context for RAG and chat memory.")
    parser.add_argument("--version", action="version", version=f"meve {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and meve's debug log")
    sub = parser.add_subparsers(dest="command", required=True)
    common = _Parser(add_help=False)  # so `meve query ... --debug` works as well as `meve --debug query ...`
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks and meve's debug log")

    _add_retrieval_commands(sub, common)
    evaluate.add_commands(sub, common)
    p = sub.add_parser("demo", parents=[common], help="Standard top-k vs MeVe, side by side, on a built-in corpus")
    p.add_argument("--query", type=checks.nonblank("question"), help="ask your own question instead of the built-in ones")
    p.add_argument("--k", type=checks.integer(1, 50, "passages of the dense top-k"), default=8)
    p.add_argument("--t-max", dest="t_max", type=checks.integer(1, None, "tokens of the context"), default=120)
    p.set_defaults(func=cmd_demo)

    _add_memory_commands(sub, common)
    return parser


def _add_retrieval_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """`meve index`, `meve query` and `meve calibrate`."""
    _add_index_command(sub, common)

    p = sub.add_parser("query", parents=[common], help="run MeVe on an index and show each phase")
    p.add_argument("query", type=checks.nonblank("question"))
    p.add_argument("--db", required=True, type=checks.path_text, help="an existing Chroma directory (never created)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, type=checks.collection_name)
    p.add_argument("--json", action="store_true", help="print the ContextResult as JSON")
    p.add_argument("--t-max", dest="t_max", type=checks.integer(1, None, "tokens of the context"))
    p.add_argument("--tau", type=checks.unit)
    p.add_argument("--k", dest="k_init", type=checks.integer(1, 10_000, "candidates retrieved"))
    p.add_argument("--config", type=checks.config_file, help="a config file from `meve tune --out` (JSON of MeVeConfig fields)")
    p.add_argument("--calibration", type=checks.calibration_file, help="tau and cut from `meve calibrate --out` (flags given here win)")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser(
        "calibrate",
        parents=[common],
        help="choose tau and the cut for an index with no labels (pseudo-questions from its passages; as `meve tune --no-labels`)",
    )
    p.add_argument("--db", required=True, type=checks.path_text, help="an existing Chroma directory (never created)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, type=checks.collection_name)
    p.add_argument("--target", type=checks.share, default=0.9, help="share of pseudo-questions whose evidence must be kept")
    p.add_argument("--queries", type=checks.integer(10, 100_000, "pseudo-questions"), default=200)
    p.add_argument("--seed", type=checks.integer(0, None, "seed of the sample"), default=0)
    p.add_argument("--out", type=checks.path_text, help="save the result as JSON here")
    p.set_defaults(func=cmd_calibrate)


def _add_index_command(sub: Any, common: argparse.ArgumentParser) -> None:
    """`meve index`."""
    p = sub.add_parser(
        "index",
        parents=[common],
        help="chunk and index txt/md/json/jsonl files, and folders of them, into a persistent Chroma directory",
        description="Chunk and index text files into a persistent Chroma directory. A folder is walked recursively "
        "(hidden files and folders, and the --db directory, are left out). A file that cannot be read (not UTF-8, "
        "binary, unreadable, an unsupported type, invalid JSON) or holds no text is skipped, and the files skipped "
        "are listed, each with why, after the summary line. Progress, with an ETA, goes to stderr.",
        epilog="exit status: 0 when every file named on the command line was indexed (files skipped inside a folder "
        "are listed but do not fail the run); 1 when the others were indexed but a file named on the command line "
        "could not be; 2 when nothing could be indexed or the command was refused (then nothing was written).",
    )
    p.add_argument("files", nargs="+", metavar="path", help="files, and folders to walk recursively")
    p.add_argument(
        "--include",
        action="append",
        metavar="GLOB",
        type=checks.nonblank("glob pattern"),
        help="in folders, read the files matching this pattern (repeatable; replaces the default: "
        + ", ".join(DEFAULT_INCLUDE)
        + "); a pattern without '/' matches the file name, one with '/' the path inside the folder given; case-insensitive. "
        "Files named on the command line are always read",
    )
    p.add_argument(
        "--exclude",
        action="append",
        metavar="GLOB",
        type=checks.nonblank("glob pattern"),
        help="in folders, leave out the files and folders matching this pattern (repeatable; matched as --include), e.g. --exclude drafts --exclude '*.tmp.md'",
    )
    p.add_argument("--db", required=True, type=checks.path_text, help="Chroma directory (created if missing)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, type=checks.collection_name)
    p.add_argument("--chunk-tokens", type=checks.integer(8, 100_000, "tokens per chunk"), default=120, help="sentence groups of at most this many tokens")
    p.add_argument("--replace", action="store_true", help="index changed files again: new chunks are added, then old ones deleted")
    p.add_argument(
        "--precision",
        choices=("float32", "int8"),
        help="MiniLM's precision (int8: faster on the CPU, slightly different vectors); default: the collection's, else float32",
    )
    p.set_defaults(func=cmd_index)


def _add_memory_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """`meve memory add|list|reconstruct`."""
    p = sub.add_parser("memory", help="inspect and debug a Momentary Contexts chat memory")
    msub = p.add_subparsers(dest="memory_cmd", required=True)
    for name in ("add", "list", "reconstruct"):
        mp = msub.add_parser(name, parents=[common])
        mp.add_argument(
            "--db", required=True, type=checks.path_text, help="Chroma directory" + (" (created if missing)" if name == "add" else " (never created)")
        )
        mp.add_argument("--session", required=True, type=checks.session)
        if name != "add":
            mp.add_argument("--allow-empty", dest="allow_empty", action="store_true", help="an unknown session shows no turns instead of an error")
        if name == "add":
            mp.add_argument("text", type=checks.nonblank("turn text"))
            mp.add_argument("--role", default="user", type=checks.role)
            mp.add_argument("--turn-id", dest="turn_id", type=checks.nonblank("turn id"))
            mp.add_argument("--timestamp", type=checks.timestamp)
        elif name == "list":
            mp.add_argument("--last", type=checks.integer(0, None, "turns to show; 0 shows all"), default=0)
        else:
            mp.add_argument("query", type=checks.nonblank("question"))
            mp.add_argument("--l-max", dest="l_max", type=checks.integer(1, None, "tokens of the rebuilt context"))
            mp.add_argument("--top-k", dest="top_k", type=checks.integer(0, 10_000, "past turns chosen by relevance"))
            mp.add_argument("--fusion", choices=("weighted", "rrf"))
            mp.add_argument(
                "--keep-recent",
                dest="keep_recent",
                choices=("short", "always", "auto", "never"),
                help="keep the latest exchange first: for a follow-up (short, the default: at most six words, or nothing earlier bears on it), "
                "for every query, for a follow-up by its words (auto), or never",
            )
            mp.add_argument("--show", type=checks.integer(0, None, "trace rows to show"), default=30, help="trace rows to show")
            mp.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_memory)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code (2 for an input meve refuses)."""
    import logging

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a refused argument (2), or --help / --version (0): returned, not raised
        return exc.code if isinstance(exc.code, int) else 2
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    # Third-party libraries that set their own loggers to DEBUG must not print through this handler.
    handler.setLevel(logging.DEBUG if args.debug else logging.WARNING)
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    if args.debug:
        logging.getLogger("meve").setLevel(logging.DEBUG)
    try:
        return int(args.func(args))
    except MeVeError as exc:
        if args.debug:
            raise
        print(f"meve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("meve: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # anything meve did not anticipate: one line, the traceback behind --debug
        if args.debug:
            raise
        print(f"meve: error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
