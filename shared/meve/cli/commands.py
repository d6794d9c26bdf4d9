"""The ``meve`` subcommands: index files, query an index, run the demo, inspect chat memory."""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from typing import Any

from meve.cli.index_plan import Plan, plan
from meve.core.errors import MeVeError

DEFAULT_COLLECTION = "meve"


def _console() -> Any:
    from rich.console import Console

    return Console(width=140)


def cmd_index(args: argparse.Namespace) -> int:
    """`meve index`: chunk files, and the files inside folders, and index them into a persistent
    Chroma directory. A file that cannot be read is skipped and listed; see :func:`_exit_status`.
    With ``--replace`` the files' new chunks go in first and their old ones are deleted after, so
    a refused or failed add leaves what was stored as it was."""
    from meve.cli.index_files import DEFAULT_INCLUDE, find_files, read_all
    from meve.core.tokens import get_token_counter
    from meve.retrieval.chroma import check_directory

    check_directory(args.db)  # a wrong --db is refused before a corpus is read
    found = find_files(args.files, args.include or DEFAULT_INCLUDE, args.exclude or (), args.db)
    got = read_all(found, args.chunk_tokens, get_token_counter(), show_progress=True)
    console = _console()
    if not got.chunks:
        if len(got.skipped) > 1:
            _report(console, got.skipped, found.unmatched)
        raise MeVeError(_nothing(args, got.skipped, found.unmatched))
    line = _store(args, got.chunks, got.sources)
    skipped = f"; skipped {len(got.skipped)} file(s), listed below" if got.skipped else ""
    # soft_wrap: a long --db path must not be broken by a hard newline (the line is copied and grepped).
    console.print(line + skipped, soft_wrap=True, markup=False, highlight=False)
    _report(console, got.skipped, found.unmatched)
    return _exit_status(got.failed)


def _exit_status(failed: list[str]) -> int:
    """0 when every file named on the command line was indexed (a file skipped inside a folder is
    listed, not a failure); 1 when one of them could not be (the others were indexed). Nothing to
    index at all is an error (2) before anything is written."""
    if not failed:
        return 0
    named = ", ".join(failed[:3]) + (", …" if len(failed) > 3 else "")
    print(f"meve: error: {len(failed)} file(s) named on the command line could not be indexed ({named}); the rest was indexed", file=sys.stderr)
    return 1


def _nothing(args: argparse.Namespace, skipped: list[tuple[str, str]], unmatched: list[str]) -> str:
    """Why nothing can be indexed: the one file's reason, else what was found and skipped."""
    if len(skipped) == 1:
        return skipped[0][1] + (f"; {len(unmatched)} other file(s) match no --include pattern" if unmatched else "")
    if skipped:
        return f"nothing to index: all {len(skipped)} file(s) found were skipped (listed above)"
    from meve.cli.index_files import DEFAULT_INCLUDE

    patterns = ", ".join(args.include) if args.include else "the default, " + ", ".join(DEFAULT_INCLUDE)
    seen = f"; {len(unmatched)} file(s) there match none (e.g. {', '.join(unmatched[:3])})" if unmatched else ""
    return f"no file to index in {', '.join(args.files)}: no file matches --include ({patterns}){seen}"


def _report(console: Any, skipped: list[tuple[str, str]], unmatched: list[str]) -> None:
    """The files skipped and why, one a line; the files no --include pattern picked, counted."""
    lines = [f"  skipped {why}" for _, why in skipped]
    if unmatched:
        named = ", ".join(unmatched[:3]) + (", …" if len(unmatched) > 3 else "")
        lines.append(f"  not read: {len(unmatched)} file(s) matching no --include pattern ({named})")
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def _store(args: argparse.Namespace, chunks: list[tuple[str, str, dict[str, Any]]], sources: list[str]) -> str:
    """Add ``chunks`` to the collection (and, with ``--replace``, delete what they replace); the summary line."""
    from meve.retrieval.chroma import held_client, made_by_open

    if made_by_open(args.db) is not None:  # a new directory: a model that cannot load must not leave it behind
        _embedder(None, args.precision).encode(["load the model"])
    with held_client(args.db) as client:
        return _store_in(client, args, chunks, sources)


def _store_in(client: Any, args: argparse.Namespace, chunks: list[tuple[str, str, dict[str, Any]]], sources: list[str]) -> str:
    """:func:`_store` with the client open."""
    from meve.pipeline.meve import MeVe
    from meve.retrieval.chroma import chroma_call
    from meve.retrieval.passage_windows import PassageWindows

    todo = Plan(add=list(range(len(chunks))))
    # Every call goes through chroma_call: other processes sharing the directory must see these writes.
    listed = {c.name for c in chroma_call("list collections", client.list_collections)}
    existing = chroma_call("open the collection", client.get_collection, args.collection) if args.collection in listed else None
    if existing is not None:
        todo = plan(existing, chunks, sources, args.replace, args.collection)
    add, delete = todo.add, todo.delete
    if add:
        MeVe.from_texts(
            [chunks[i][1] for i in add],
            ids=[chunks[i][0] for i in add],
            metadatas=[chunks[i][2] for i in add],
            client=client,
            collection_name=args.collection,
            embedder=_embedder(existing, args.precision),
            show_progress=True,
        )
    collection = chroma_call("open the collection", client.get_collection, args.collection)
    windows = _add_windows(collection, existing, args.precision)
    moved = sorted(todo.moved.items())
    for start in range(0, len(moved), 1000):  # Chroma merges the new source into each row's metadata
        page = moved[start : start + 1000]
        chroma_call("record the moved files' paths", collection.update, ids=[p for p, _ in page], metadatas=[{"source": s} for _, s in page])
    for start in range(0, len(delete), 1000):
        chroma_call("delete replaced chunks", collection.delete, ids=delete[start : start + 1000])
    stale = PassageWindows.open(collection, create=False) if delete else None
    if stale is not None:  # their window vectors too: they would still answer searches (issue 78 #3)
        stale.delete(delete)
    kept = len(chunks) - len(add)
    total = chroma_call("count the collection", collection.count)
    note = (f", {kept} unchanged" if kept else "") + (f", replacing {len(delete)} old chunk(s)" if delete else "")
    note += "".join(f"; {b} was indexed as {a}: its chunks now name the new path" for a, b in sorted(todo.moved_from.items()))
    note += f"; made {windows} window vector(s) for the passages a meve before 0.4.0 indexed" if windows is not None else ""
    return f"indexed {len(add)} chunks from {len(sources)} file(s) into {args.db} (collection {args.collection!r}, {total} in all{note})"


def _add_windows(collection: Any, existing: Any, precision: str | None) -> int | None:
    """An index built before meve kept windows (:mod:`meve.retrieval.passage_windows`) gets them
    when its files are indexed again: how many were made, None where it had them already."""
    from meve.pipeline.meve import MeVe
    from meve.retrieval.chroma import delete_sibling
    from meve.retrieval.passage_windows import PassageWindows

    if existing is None or PassageWindows.open(collection, create=False) is not None:
        return None
    embedder = _embedder(existing, precision)
    embedder.encode(["load the model"])  # before anything is made: a model that cannot load leaves nothing behind
    # The windows collection is made before the index is opened, so opening it does not warn that it
    # has none (and names this very command); add_windows then fills it, and the summary says how many.
    made = PassageWindows.open(collection, create=True)
    try:
        return MeVe.from_chroma(collection, embedder=embedder).add_windows(show_progress=True)
    except BaseException:
        # Half made, it would pass for complete: the next `meve index --replace` could never finish it.
        if made is not None:
            delete_sibling(collection, made.name)
        raise


def _embedder(collection: Any, precision: str | None = None) -> Any:
    """meve's MiniLM at ``precision``, else at the precision ``collection`` was indexed with (the
    name it records says int8), else float32: ``meve query`` reads an int8 index with no flag."""
    from meve.scoring.embedders import SentenceTransformerEmbedder, default_embedder

    int8 = SentenceTransformerEmbedder(precision="int8")
    recorded = (collection.metadata or {}).get("meve:embedder") if collection is not None else None
    if precision == "int8" or (precision is None and recorded == int8.name):
        return int8
    return default_embedder()


def _phase_table(result: Any) -> Any:
    from rich.table import Table

    table = Table(title=f"MeVe trace — {_shown(result.query)}")
    for col in ("phase", "kept", "dropped (why)", "tokens in→out", "ms", "notes"):
        table.add_column(col, overflow="fold")
    for rec in result.trace:
        dropped = "\n".join(f"{d.id}: {d.reason}" for d in rec.dropped[:8]) + (f"\n… {len(rec.dropped) - 8} more" if len(rec.dropped) > 8 else "")
        notes = ", ".join(f"{k}={v}" for k, v in rec.info.items() if k not in ("order",))
        table.add_row(rec.phase, str(len(rec.kept)), dropped or "-", f"{rec.tokens_in}→{rec.tokens_out}", f"{rec.ms:.1f}", notes)
    return table


def cmd_query(args: argparse.Namespace) -> int:
    """`meve query`: run MeVe on an index and show each phase."""
    from meve.retrieval.chroma import read_only_copy

    overrides: dict[str, Any] = dict(args.calibration.config) if args.calibration is not None else {}
    overrides.update({k: getattr(args, k) for k in ("t_max", "tau", "k_init") if getattr(args, k) is not None})
    with read_only_copy(args.db) as db:
        meve = _open_meve(args, db)
        if getattr(args, "config", None) is not None:  # a `meve tune --out` file; --calibration and the flags win over it
            meve.config = args.config
        result = meve.run(args.query, **overrides)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
        return 0
    console = _console()
    console.print(_phase_table(result))
    for doc in result.documents:
        console.print(f"[bold]{doc.id}[/] ({doc.source}, score {doc.score:.3f}, {doc.tokens} tokens): {doc.text}")
    console.print(f"context: {result.token_count} tokens (t_max {result.config['t_max']})")
    return 0


def _open_meve(args: argparse.Namespace, db: str) -> Any:
    """MeVe over the collection in the Chroma directory ``db`` (a read-only copy of ``args.db``)."""
    from meve.pipeline.meve import MeVe
    from meve.retrieval.chroma import copy_client

    client = copy_client(db)
    names = [c.name for c in client.list_collections()]
    if args.collection not in names:
        raise MeVeError(f"no collection {args.collection!r} in {args.db}; collections there: {names or 'none'} (run `meve index` first)")
    collection = client.get_collection(args.collection)
    return MeVe.from_chroma(collection, embedder=_embedder(collection))


def cmd_calibrate(args: argparse.Namespace) -> int:
    """`meve calibrate`: choose tau and the cut for an index with no labels, and save them."""
    from meve.retrieval.chroma import read_only_copy

    with read_only_copy(args.db) as db:
        result = _open_meve(args, db).calibrate(target=args.target, queries=args.queries, seed=args.seed, show_progress=sys.stderr.isatty())
    console = _console()
    console.print(f"{result.queries} pseudo-questions from the corpus; scorer {result.scorer}")
    console.print(f"chosen: {result.config} keeps the evidence of {result.recall:.0%} (target {result.target:.0%}), {result.kept:.1f} passages on average")
    if args.out:
        console.print(f"saved to {result.save(args.out)}; use it with `meve query ... --calibration {args.out}`", soft_wrap=True)
    return 0


def demo_corpus() -> dict[str, Any]:
    """The demo corpus shipped with meve: passages and questions written for the demo."""
    data: dict[str, Any] = json.loads(resources.files("meve").joinpath("data/demo_corpus.json").read_text(encoding="utf-8"))
    return data


def cmd_demo(args: argparse.Namespace) -> int:
    """`meve demo`: standard dense top-k beside MeVe on the demo corpus."""
    from rich.table import Table

    from meve.core.config import MeVeConfig
    from meve.pipeline.meve import MeVe

    console = _console()
    corpus = demo_corpus()
    passages = corpus["passages"]
    console.print(f"[bold]meve demo[/]: {len(passages)} passages written for the demo; models load offline (first run ~15 s)…")
    meve = MeVe.from_texts(
        [p["text"] for p in passages],
        ids=[p["id"] for p in passages],
        metadatas=[{"title": p["title"]} for p in passages],
        config=MeVeConfig(k_init=args.k, t_max=args.t_max),
    )
    queries = [args.query] if args.query else corpus["queries"]
    for query in queries:
        base = meve.baseline(query, k=args.k)
        result = meve.run(query)
        table = Table(title=_shown(query), show_lines=False)
        table.add_column(f"Standard RAG: dense top-{args.k} ({base.token_count} tokens)", overflow="fold")
        table.add_column(f"MeVe ({result.token_count} tokens, t_max {args.t_max})", overflow="fold")
        rows = max(len(base.documents), len(result.documents))
        for i in range(rows):
            left = f"{base.documents[i].id} (cos {base.documents[i].score:.2f})" if i < len(base.documents) else ""
            right = f"{result.documents[i].id} ({result.documents[i].source}, {result.documents[i].score:.2f})" if i < len(result.documents) else ""
            table.add_row(left, right)
        console.print(table)
        for rec in result.trace:
            removed = ", ".join(f"{d.id} ({d.reason})" for d in rec.dropped) or "nothing"
            console.print(f"  {rec.phase:<10} kept {len(rec.kept):>2}  removed: {removed}")
        saved = 100.0 * (1 - result.token_count / base.token_count) if base.token_count else 0.0
        console.print(f"  tokens: {base.token_count} → {result.token_count} ({saved:.0f}% fewer); scorer: {result.phase('verify').info.get('scorer', 'off')}\n")
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    """`meve memory add|list|reconstruct`: inspect and debug a chat memory."""
    from meve.core.errors import StoreError
    from meve.memory.memory import MomentaryMemory
    from meve.retrieval.chroma import read_only_copy

    console = _console()
    if args.memory_cmd == "add":
        with MomentaryMemory(args.session, path=args.db) as mem:
            turn = mem.add(args.text, args.role, turn_id=args.turn_id, timestamp=args.timestamp)
        console.print(f"added {turn.id} (seq {turn.seq}, {turn.timestamp.isoformat()})")
        return 0
    try:  # reading never creates a directory or a session, and reads a copy (Chroma writes on open)
        with read_only_copy(args.db) as db, MomentaryMemory(args.session, path=db, create=False) as mem:
            _show_memory(args, mem, console)
    except StoreError as exc:
        if not (args.allow_empty and ("no session" in str(exc) or "no Chroma directory" in str(exc))):
            raise
        console.print(f"0 turn(s) in session {args.session!r} (it does not exist; --allow-empty)")
    return 0


def _show_memory(args: argparse.Namespace, mem: Any, console: Any) -> None:
    """`memory list` and `memory reconstruct` on an open memory."""
    if args.memory_cmd == "list":
        for t in mem.turns()[-args.last :] if args.last else mem.turns():
            console.print(f"[{t.seq}] {t.timestamp.isoformat()} {t.role}: {t.text}")
        console.print(f"{len(mem)} turn(s) in session {args.session!r}")
        return
    keep = {"short": "short", "auto": "auto", "always": True, "never": False, None: None}[args.keep_recent]
    ctx = mem.reconstruct(args.query, l_max=args.l_max, top_k=args.top_k, fusion=args.fusion, keep_recent=keep)
    if args.json:
        sys.stdout.write(json.dumps(ctx.to_dict(), indent=2, default=str) + "\n")
        return
    from rich.table import Table

    table = Table(title=f"reconstruct {_shown(args.query)} — {ctx.token_count}/{ctx.l_max} tokens, fusion {ctx.fusion}")
    for col in ("seq", "in", "bm25", "dense", "fused", "tokens", "why"):
        table.add_column(col, overflow="fold")
    for tr in ctx.trace[: args.show]:
        dense = ", ".join(f"{v:.3f}" for v in tr.dense.values()) or "-"
        table.add_row(
            str(tr.seq),
            "✓" if tr.included else "✗",
            f"{tr.bm25:.3f}" if tr.bm25 is not None else "-",
            dense,
            f"{tr.fused:.3f}" if tr.fused is not None else "-",
            str(tr.tokens),
            tr.reason,
        )
    console.print(table)
    for t in ctx.turns:
        console.print(f"[{t.seq}] {t.role}: {t.text}")


def _shown(query: str, limit: int = 120) -> str:
    """A query as a trace's title shows it: whole up to ``limit`` characters, else its start and its length."""
    return repr(query) if len(query) <= limit else f"{query[:limit]!r}… ({len(query)} characters)"
