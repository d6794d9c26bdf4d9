"""Cold start: how long a new process waits before it can answer, and what hierarchical building costs.

Each figure is the median of ``--repeats`` fresh processes (the OS file cache is warm, as it is
for a user running commands one after another):

- ``meve --version`` and ``meve memory list`` (no model may load),
- ``meve query`` on a small index (loads MiniLM),
- the Python API: import, build a 3-passage MeVe, answer one query,
- ``python -X importtime`` totals for ``import meve``, ``import langchain_meve``, ``import llamaindex_meve``,
- ``MeVe.from_documents`` on the 10 Wikipedia articles: build time and the first two queries.

    python -m benchmarks.startup [--data ../shared/data] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.common import RESULTS, data_dir, machine

BIN = Path(sys.executable).parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
API = (
    "from meve import MeVe\n"
    "m = MeVe.from_texts(['Karl Drais built a running machine in 1817.', 'Dunlop made a pneumatic tyre in 1888.', 'Sourdough needs wild yeast.'])\n"
    "print(m.run('Who built the running machine?').documents[0].id)\n"
)


def _timed(cmd: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=ENV, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def _median(cmd: list[str], cwd: str, repeats: int) -> float:
    return round(statistics.median(_timed(cmd, cwd) for _ in range(repeats)), 2)


def _import_ms(module: str) -> float:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], env=ENV, capture_output=True, text=True, check=True)
    # The last line for the top-level module carries its cumulative time in microseconds.
    rows = [line for line in out.stderr.splitlines() if re.search(rf"\|\s*{re.escape(module)}$", line)]
    return round(int(rows[-1].split("|")[1]) / 1000.0, 1)


def _hierarchical(data: Path) -> dict[str, Any]:
    code = (
        "import json, sys, time\n"
        "t0 = time.perf_counter()\n"
        "from meve import MeVe\n"
        f"docs = json.load(open({str(data / 'wikipedia' / 'wikipedia_20220301en_10articles.meve-framework.json')!r}))\n"
        "m = MeVe.from_documents([(d['id'], d['title'], d['text']) for d in docs])\n"
        "t1 = time.perf_counter()\n"
        "m.run('What did Aristotle write about politics?')\n"
        "t2 = time.perf_counter()\n"
        "m.run('When was Alain Connes born?')\n"
        "t3 = time.perf_counter()\n"
        "chars = sum(len(d['text']) for d in docs)\n"
        "print(json.dumps({'documents': len(docs), 'characters': chars, 'windows': m.hierarchy.windows,\n"
        "                  'build_s': round(t1 - t0, 1), 'first_query_ms': round((t2 - t1) * 1000), 'second_query_ms': round((t3 - t2) * 1000)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(data: Path, repeats: int) -> dict[str, Any]:
    meve = str(BIN / "meve")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "notes.md").write_text("The chain needs oil every 300 km. Clean it with a rag first.\n\nTyres last about 5000 km.\n")
        subprocess.run([meve, "index", "notes.md", "--db", "db"], cwd=tmp, env=ENV, check=True, capture_output=True)
        subprocess.run(
            [meve, "memory", "add", "My bike is a green Brompton.", "--db", "db", "--session", "u1"], cwd=tmp, env=ENV, check=True, capture_output=True
        )
        cli = {
            "meve --version": _median([meve, "--version"], tmp, repeats),
            "meve memory list": _median([meve, "memory", "list", "--db", "db", "--session", "u1"], tmp, repeats),
            "meve query": _median([meve, "query", "how often should the chain be oiled", "--db", "db"], tmp, repeats),
            "python API: import, build 3 passages, first answer": _median([sys.executable, "-c", API], tmp, repeats),
        }
    imports = {m: _import_ms(m) for m in ("meve", "langchain_meve", "llamaindex_meve")}
    return {"seconds_to_first_answer": cli, "import_ms": imports, "hierarchical_wikipedia_10": _hierarchical(data), "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder holding wikipedia/ (default ../shared/data)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    payload = run(data_dir(args.data), args.repeats)
    payload.update(
        {"command": f"python -m benchmarks.startup --repeats {args.repeats}", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine()}
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(payload, indent=2))
    print(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
