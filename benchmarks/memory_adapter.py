"""Chat memory, issue 76 #3: a query-side adapter over MiniLM, trained for recall, measured leave-one-dataset-out.

Its committed results predate ``MemoryConfig(cap_turns=True)`` (issue 76, 2026-11-29,
``benchmarks/memory_share.py``): run again, every arm built on ``MemoryConfig()`` has the cap on,
and figures where a long turn ranks after the best move.

"Embeddings tuned for recall, if they pay": a linear map added to the query's MiniLM vector
(``q + q @ A``, normalised; the turns' stored vectors are unchanged, so nothing stored would need
embedding again), trained with an InfoNCE loss (temperature 0.05, L2 1e-2 on ``A``, Adam 1e-3, 400
steps of 64 questions, seed 0) on (question, evidence turn) pairs of the other six sets' dev splits,
each set drawn alike; negatives: 16 non-evidence turns of the same conversation nearest the question,
and 47 random ones. Then the left-out set's dev split: the shipped memory (``MemoryConfig()``) and the
dense fill with the base and the adapted query vectors, answerable evidence at 256/512/1,024 tokens,
the memory's paired 95% interval (adapted minus base). One setting, fixed before any figure; shipped
only if it beats the base model on every left-out set. Dev splits only; nothing is saved.

    python -m benchmarks.memory_adapter      # benchmarks/results/memory_adapter.json
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from benchmarks import memory_lodo as ml
from benchmarks.harness.common import data_dir, write_result
from benchmarks.harness.lodo import gain_interval

STEPS, BATCH, NEGATIVES, HARD, L2, TEMPERATURE = 400, 64, 63, 16, 1e-2, 0.05


def pairs(replays: list[Any], qvecs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, list[int]]]:
    """(question vector, its conversation's turn vectors, the evidence turns' positions) per dev question."""
    out = []
    for rp, vecs in zip(replays, qvecs, strict=True):
        idx = {t.id: i for i, t in enumerate(rp.turns)}
        for q, v in zip(rp.conv.questions, vecs, strict=True):
            pos = [idx[e] for e in q.evidence if e in idx]
            if pos:
                out.append((np.asarray(v, np.float32), rp.vecs, pos))
    return out


def train(data: dict[str, list[Any]], names: list[str], rng: np.random.Generator) -> np.ndarray:
    """The adapter ``A`` (384 x 384) fitted on ``names``' pairs."""
    import torch

    torch.manual_seed(0)
    a = torch.zeros(384, 384, requires_grad=True)
    opt = torch.optim.Adam([a], lr=1e-3)
    for _ in range(STEPS):
        qs, cands = [], []
        for _ in range(BATCH):
            n = names[rng.integers(len(names))]
            q, vecs, pos = data[n][rng.integers(len(data[n]))]
            p = pos[rng.integers(len(pos))]
            mask = np.ones(len(vecs), bool)
            mask[pos] = False
            pool = np.flatnonzero(mask)
            hard = pool[np.argsort(-(vecs[pool] @ q))[:HARD]]
            rand = rng.choice(pool, size=min(NEGATIVES - len(hard), len(pool)), replace=len(pool) < NEGATIVES - len(hard))
            neg = np.resize(np.concatenate([hard, rand])[:NEGATIVES], NEGATIVES)
            qs.append(q)
            cands.append(np.vstack([vecs[p][None], vecs[neg]]))
        q_t, c_t = torch.tensor(np.stack(qs)), torch.tensor(np.stack(cands))
        qa = torch.nn.functional.normalize(q_t + q_t @ a, dim=-1)
        logits = torch.einsum("bd,bkd->bk", qa, c_t) / TEMPERATURE
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(q_t), dtype=torch.long)) + L2 * (a**2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return np.asarray(a.detach().numpy())


def adapt(a: np.ndarray, qv: np.ndarray) -> np.ndarray:
    x = qv + qv @ a
    return np.asarray(x / np.linalg.norm(x, axis=-1, keepdims=True), dtype=np.float32)


def run() -> dict[str, Any]:
    """Every set left out in turn: the memory and the dense fill with the base and the adapted query vectors."""
    t0, rng = time.perf_counter(), np.random.default_rng(0)
    sets = {n: s for n, s in ml.conversations(data_dir(None)).items() if n in ml.LODO_SETS}
    dev = {n: ml.dev_replays(sets[n]["dev"]) for n in sets}
    data = {n: pairs(d[0], d[1]) for n, d in dev.items()}
    out: dict[str, Any] = {}
    for n in sets:
        a = train(data, [m for m in sets if m != n], rng)
        rps, qv, stem = dev[n]
        qa = [adapt(a, v) for v in qv]
        out[n] = {}
        for b in ml.BUDGETS:
            per_b: dict[str, list[float]] = {}
            per_a: dict[str, list[float]] = {}
            base = ml.score(rps, qv, ml.setting({}, b), per_b)[ml.METRIC]
            ad = ml.score(rps, qa, ml.setting({}, b), per_a)[ml.METRIC]
            ci = gain_interval(per_a[ml.METRIC], {"base": per_b[ml.METRIC]})
            dense = (ml.score(rps, qv, ml.fill("dense", b, stem))[ml.METRIC], ml.score(rps, qa, ml.fill("dense", b, stem))[ml.METRIC])
            out[n][str(b)] = {"memory_base": base, "memory_adapter": ad, "ci": [round(x, 3) for x in ci], "dense_base": dense[0], "dense_adapter": dense[1]}
        print(n, json.dumps(out[n]), flush=True)
    return {"protocol": __doc__, "left_out": out, "elapsed_s": round(time.perf_counter() - t0, 1)}


def main() -> None:
    """Write benchmarks/results/memory_adapter.json."""
    write_result("memory_adapter", run(), "python -m benchmarks.memory_adapter")


if __name__ == "__main__":
    main()
