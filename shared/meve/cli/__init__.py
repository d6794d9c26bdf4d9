"""The ``meve`` command: argument parsing and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from meve.cli.commands import DEFAULT_COLLECTION, cmd_demo, cmd_index, cmd_memory, cmd_query
from meve.core.errors import MeVeError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    from meve import __version__

    parser = argparse.ArgumentParser(prog="meve", description="Verified, de-duplicated, token-budgeted context for RAG and chat memory.")
    parser.add_argument("--version", action="version", version=f"meve {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and meve's debug log")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)  # so `meve query ... --debug` works as well as `meve --debug query ...`
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks and meve's debug log")

    p = sub.add_parser("index", parents=[common], help="chunk and index txt/md/json/jsonl files into a persistent Chroma directory")
    p.add_argument("files", nargs="+")
    p.add_argument("--db", required=True, help="Chroma directory (created if missing)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION)
    p.add_argument("--chunk-tokens", type=int, default=120, help="sentence groups of at most this many tokens")
    p.add_argument("--replace", action="store_true", help="delete the chunks these files indexed before, then index them again")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("query", parents=[common], help="run MeVe on an index and show each phase")
    p.add_argument("query")
    p.add_argument("--db", required=True, help="an existing Chroma directory (never created)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION)
    p.add_argument("--json", action="store_true", help="print the ContextResult as JSON")
    p.add_argument("--t-max", dest="t_max", type=int)
    p.add_argument("--tau", type=float)
    p.add_argument("--k", dest="k_init", type=int)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("demo", parents=[common], help="Standard top-k vs MeVe, side by side, on a built-in corpus")
    p.add_argument("--query", help="ask your own question instead of the built-in ones")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--t-max", dest="t_max", type=int, default=120)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("memory", help="inspect and debug a Momentary Contexts chat memory")
    msub = p.add_subparsers(dest="memory_cmd", required=True)
    for name in ("add", "list", "reconstruct"):
        mp = msub.add_parser(name, parents=[common])
        mp.add_argument("--db", required=True, help="Chroma directory" + (" (created if missing)" if name == "add" else " (never created)"))
        mp.add_argument("--session", required=True)
        if name != "add":
            mp.add_argument("--allow-empty", dest="allow_empty", action="store_true", help="an unknown session shows no turns instead of an error")
        if name == "add":
            mp.add_argument("text")
            mp.add_argument("--role", default="user")
            mp.add_argument("--turn-id", dest="turn_id")
            mp.add_argument("--timestamp")
        elif name == "list":
            mp.add_argument("--last", type=int, default=0)
        else:
            mp.add_argument("query")
            mp.add_argument("--l-max", dest="l_max", type=int)
            mp.add_argument("--top-k", dest="top_k", type=int)
            mp.add_argument("--fusion", choices=("weighted", "rrf"))
            mp.add_argument("--show", type=int, default=30, help="trace rows to show")
            mp.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_memory)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code (2 for an input meve refuses)."""
    import logging

    args = build_parser().parse_args(argv)
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
