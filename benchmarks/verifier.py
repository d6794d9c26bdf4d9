"""The verifier benchmark: which scorer tells relevant from irrelevant, what it costs, how well it is calibrated.

Selection (choosing the default) uses only the *tune* half of the SQuAD v1.1 dev
articles and SQuAD *train*; every reported metric uses held-out data: the *test*
half of SQuAD dev, WikiQA test, the MS MARCO sample and HotpotQA 500.

    python -m benchmarks.run --only verifier [--data DIR]
"""

from __future__ import annotations

import gzip
import json
import random
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.common import RESULTS, li_verifier, pct, squad, squad_dev_split, squad_pairs
from meve import MeVe, MeVeConfig, SentenceTransformerEmbedder
from meve.scoring.calibration import fit_platt
from meve.scoring.cosine import CosineScorer
from meve.scoring.embedders import CachedEmbedder
from meve.scoring.late_interaction import LateInteractionScorer, maxsim, text_key
from meve.scoring.meve_cross_encoder import SHIPPED, MeveCrossEncoderScorer

Pairs = list[tuple[str, str, int]]  # (query, passage, label)

# meve's shipped cross-encoders: benchmark name (the result files' keys) -> scorer name.
CROSS_ENCODERS = {name.replace("-", "_"): name for name in SHIPPED}


# -- metrics ------------------------------------------------------------------------------


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by the rank statistic (ties count half)."""
    from scipy.stats import rankdata

    y = np.asarray(labels) == 1
    r = rankdata(scores)
    n1, n0 = int(y.sum()), int((~y).sum())
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def average_precision(labels: np.ndarray, scores: np.ndarray) -> float:
    order = np.argsort(-np.asarray(scores), kind="stable")
    y = np.asarray(labels)[order] == 1
    hits = np.cumsum(y)
    return float((hits[y] / (np.flatnonzero(y) + 1)).mean())


def ece(labels: np.ndarray, probs: np.ndarray, bins: int = 10) -> tuple[float, list[dict[str, Any]]]:
    """Expected calibration error over equal-width bins, and the reliability rows behind it."""
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(probs, edges[1:-1]), 0, bins - 1)
    rows, total = [], 0.0
    for b in range(bins):
        m = idx == b
        if not m.any():
            continue
        conf, freq = float(probs[m].mean()), float(np.asarray(labels)[m].mean())
        total += m.sum() / len(probs) * abs(conf - freq)
        rows.append({"bin": f"{edges[b]:.1f}-{edges[b + 1]:.1f}", "n": int(m.sum()), "mean_predicted": conf, "fraction_relevant": freq})
    return float(total), rows


def mrr_at_10(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    out = []
    for labels, scores in groups:
        order = np.argsort(-scores, kind="stable")[:10]
        hit = next((i for i, j in enumerate(order) if labels[j] == 1), None)
        out.append(0.0 if hit is None else 1.0 / (hit + 1))
    return float(np.mean(out))


# -- data ---------------------------------------------------------------------------------
def squad_sets(data: Path, questions: int) -> tuple[Pairs, Pairs, list[dict[str, Any]]]:
    articles = squad(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz")
    split = squad_dev_split([a["title"] for a in articles])
    tune = [a for a in articles if split[a["title"]] == "tune"]
    test = [a for a in articles if split[a["title"]] == "test"]
    return squad_pairs(tune, questions, seed=1), squad_pairs(test, questions, seed=2), test


def wikiqa(data: Path, split: str = "test") -> Pairs:
    out: Pairs = []
    with gzip.open(data / "train" / "wikiqa" / f"WikiQASent-{split}.txt.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            q, s, y = line.rstrip("\n").split("\t")
            out.append((q, s, int(y)))
    return out


def msmarco(data: Path, limit: int | None) -> tuple[Pairs, list[list[int]]]:
    """600 queries x BM25 top-20, in BM25's order; returns pairs and each query's row indices."""
    pairs: Pairs = []
    groups: list[list[int]] = []
    with tarfile.open(data / "train" / "msmarco_tomjg14_assessed" / "msmarco-dev600-bm25top20-firebase.tar.gz") as tar:
        members = sorted((m for m in tar.getmembers() if "/sampled_files/" in m.name and m.name.endswith(".json")), key=lambda m: m.name)
        for m in members[:limit]:
            fh = tar.extractfile(m)
            assert fh is not None
            rows = sorted(json.load(fh), key=lambda r: int(r["ranking"]))
            groups.append(list(range(len(pairs), len(pairs) + len(rows))))
            pairs += [(r["query_text"], r["passage_text"], int(float(r["relevance_label"]) > 0)) for r in rows]
    return pairs, groups


def hotpot(data: Path, limit: int | None) -> Pairs:
    rows = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())[:limit]
    out: Pairs = []
    for r in rows:
        gold = {t for t, _ in r["supporting_facts"]}
        for title, sents in r["context"]:
            out.append((r["question"], f"{title}: {''.join(sents)}", int(title in gold)))
    return out


# -- scorers over pairs -------------------------------------------------------------------
def by_query(pairs: Pairs) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, (q, _, _) in enumerate(pairs):
        groups.setdefault(q, []).append(i)
    return groups


def score_pairs(pairs: Pairs, fn: Callable[[str, list[str]], np.ndarray]) -> np.ndarray:
    out = np.zeros(len(pairs))
    for q, rows in by_query(pairs).items():
        out[rows] = fn(q, [pairs[i][1] for i in rows])
    return out


def bm25_within(q: str, passages: list[str]) -> np.ndarray:
    """BM25 over the query's own candidates (a verifier sees no other corpus)."""
    from meve.retrieval.bm25 import IncrementalBM25

    return np.asarray(IncrementalBM25(passages).get_scores(q), dtype=np.float64)


class Encoded:
    """Each distinct text through MiniLM once: its dense vector and its token vectors come out of one
    forward pass, as in MeVe's ingestion; cosine and late interaction then read the same pass."""

    def __init__(self, li: LateInteractionScorer) -> None:
        self.li = li
        self.vec: dict[str, np.ndarray] = {}
        self.qvec: dict[str, np.ndarray] = {}

    def passages(self, texts: Sequence[str], fp32: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """Dense vectors of ``texts``; token vectors go to the verifier's cache (and, unquantised, to ``fp32``)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.vec]
        for start in range(0, len(todo), 256):
            chunk = todo[start : start + 256]
            vecs, tokens, _ = self.li._forward(chunk)
            for text, vec, tok in zip(chunk, vecs, tokens, strict=True):
                self.vec[text] = vec
                self.li.cache.put(text_key(text), tok)
                if fp32 is not None:
                    fp32[text] = tok
        return np.stack([self.vec[t] for t in texts])

    def query(self, q: str) -> np.ndarray:
        if q not in self.qvec:
            self.qvec[q] = self.li.embed_query(q)
        return self.qvec[q]

    def cosine(self, q: str, passages: Sequence[str]) -> np.ndarray:
        return np.asarray(self.passages(passages) @ self.query(q), dtype=np.float64)


class Features:
    """Per-pair features for the learned-combination candidate: MaxSim, cosine, IDF-weighted term match, log length."""

    def __init__(self, enc: Encoded, idf: np.ndarray) -> None:
        self.enc = enc
        self.li = enc.li
        self.idf = idf
        self.tok = enc.li._st.model.tokenizer

    def __call__(self, q: str, passages: list[str]) -> np.ndarray:
        cos = self.enc.cosine(q, passages)
        qt = self.li._query_tokens(q)
        pts = self.li._passage_tokens(passages)
        qids = list(self.tok(q, add_special_tokens=False)["input_ids"])
        w = self.idf[qids]
        rows = []
        for j, (p, pt) in enumerate(zip(passages, pts, strict=True)):
            pids = set(self.tok(p, add_special_tokens=False, truncation=True, max_length=256)["input_ids"])
            match = np.array([i in pids for i in qids], dtype=float)
            rows.append([maxsim(qt, pt), float(cos[j]), float((match * w).sum() / max(w.sum(), 1e-9)), np.log(max(len(pt), 1))])
        return np.asarray(rows)


def squad_train_idf(data: Path, tok: Any) -> np.ndarray:
    """IDF of each word piece over the SQuAD v1.1 *train* paragraphs (BM25's idf form)."""
    paras = [p["context"] for a in squad(data / "train" / "squad" / "squad-v1.1-train.explorer.json.gz") for p in a["paragraphs"]]
    df = np.zeros(tok.vocab_size)
    for ids in tok(paras, add_special_tokens=False)["input_ids"]:
        df[list(set(ids))] += 1
    return np.asarray(np.log((len(paras) - df + 0.5) / (df + 0.5) + 1.0))


class IdfMaxSim:
    """Late interaction with each query token's best match weighted by idf ** ``power`` (a weighted
    mean instead of MaxSim's plain mean), so word pieces that every passage has count less."""

    def __init__(self, li: LateInteractionScorer, idf: np.ndarray, power: float) -> None:
        self.li, self.idf, self.power = li, idf, power
        self.tok = li._st.model.tokenizer
        self.special = set(self.tok.all_special_ids)

    def __call__(self, q: str, passages: list[str]) -> np.ndarray:
        qt = self.li._query_tokens(q)
        # The same pieces _forward keeps for the query (same tokenizer, every piece, special-token filter).
        ids = [i for i in self.tok(q.strip(), add_special_tokens=False, verbose=False)["input_ids"] if i not in self.special]
        if len(ids) != len(qt):
            raise RuntimeError(f"{len(ids)} query pieces for {len(qt)} token vectors")
        w = self.idf[ids] ** self.power
        return np.array([float(w @ (qt @ pt.T).max(axis=1) / w.sum()) if len(pt) else 0.0 for pt in self.li._passage_tokens(passages)])


def learned_combination(data: Path, enc: Encoded, tune: Pairs, seed: int = 7) -> tuple[dict[str, Any], Callable[[str, list[str]], np.ndarray]]:
    """A logistic over [MaxSim, cosine, term match, length], trained on SQuAD *train* with
    bi-encoder-mined hard negatives; judged on the tune split like the other candidates, and
    returned as a scorer (P(relevant) by the logistic) for the held-out tables."""
    from sklearn.linear_model import LogisticRegression

    li = enc.li
    train = squad(data / "train" / "squad" / "squad-v1.1-train.explorer.json.gz")
    feats = Features(enc, squad_train_idf(data, li._st.model.tokenizer))
    rng = random.Random(seed)
    X: list[list[float]] = []
    y: list[int] = []
    for a in rng.sample(train, 30):
        texts = [p["context"] for p in a["paragraphs"]]
        vecs = enc.passages(texts)
        qs = [(pi, q["question"]) for pi, p in enumerate(a["paragraphs"]) for q in p["qas"]]
        for pi, question in rng.sample(qs, min(20, len(qs))):
            cos = vecs @ enc.query(question)
            cos[pi] = -9
            hard = [int(j) for j in np.argsort(-cos)[:2]]
            rest = [j for j in range(len(texts)) if j != pi and j not in hard]
            chosen = [pi, *hard, *rng.sample(rest, min(2, len(rest)))]
            X.extend(feats(question, [texts[j] for j in chosen]))
            y.extend(int(j == pi) for j in chosen)
    model = LogisticRegression(C=10.0).fit(np.asarray(X), np.asarray(y))
    tune_x = np.zeros((len(tune), 4))
    for q, rows in by_query(tune).items():
        tune_x[rows] = feats(q, [tune[i][1] for i in rows])
    labels = np.array([t[2] for t in tune])
    s = model.decision_function(tune_x)
    info = {
        "train_pairs": len(y),
        "coef": [round(float(c), 3) for c in model.coef_[0]],
        "tune_auc": auc(labels, s),
        "tune_ap": average_precision(labels, s),
        "tune_auc_of_each_feature": {n: auc(labels, tune_x[:, i]) for i, n in enumerate(["maxsim", "cosine", "term_match_idf", "log_length"])},
    }

    def score(q: str, passages: list[str]) -> np.ndarray:
        return np.asarray(model.predict_proba(feats(q, passages))[:, 1], dtype=np.float64)

    return info, score


def random_head_cross_encoder() -> Callable[[str, list[str]], np.ndarray]:
    """ms-marco-MiniLM-L-6-v2's architecture (MiniLM-L6 + a fresh linear head): what a cross-encoder gives with no training."""
    import torch
    from sentence_transformers import CrossEncoder

    from meve.scoring.registry import default_model_path

    torch.manual_seed(0)
    ce = CrossEncoder(default_model_path(), num_labels=1, device="cpu")

    def fn(q: str, passages: list[str]) -> np.ndarray:
        return np.asarray(ce.predict([(q, p) for p in passages], show_progress_bar=False), dtype=np.float64).reshape(-1)

    return fn


# -- the run ------------------------------------------------------------------------------
def run(data: Path, full: bool) -> dict[str, Any]:
    t_start = time.perf_counter()
    emb = SentenceTransformerEmbedder()
    li = LateInteractionScorer(emb, cache_bytes=4 * 2**30)
    cos = CosineScorer(emb)
    cal = li.calibration
    n_q = 400 if full else 60
    tune, test, test_articles = squad_sets(data, n_q)
    ms_pairs, ms_groups = msmarco(data, None if full else 60)
    sets: dict[str, Pairs] = {
        "squad_dev_test_articles": test,
        "wikiqa_test": wikiqa(data) if full else wikiqa(data)[:600],
        "msmarco_sample": ms_pairs,
        "hotpotqa_500": hotpot(data, None if full else 60),
    }
    enc = Encoded(li)
    tune_fp32: dict[str, np.ndarray] = {}
    enc.passages([p for _, p, _ in tune], fp32=tune_fp32)
    for pairs in sets.values():
        enc.passages([p for _, p, _ in pairs])

    def cosine(q: str, passages: list[str]) -> np.ndarray:
        return cos.score_embeddings(enc.query(q), enc.passages(passages))

    # Selection, on the tune split only.
    labels = np.array([y for _, _, y in tune])
    raw_li = score_pairs(tune, li.raw_scores)
    fp32 = score_pairs(tune, lambda q, ps: np.array([maxsim(li._query_tokens(q), tune_fp32[p]) for p in ps]))
    selection: dict[str, Any] = {
        "split": "SQuAD v1.1 dev, tune half of the articles",
        "pairs": len(tune),
        "auc": {
            "cosine": auc(labels, score_pairs(tune, cosine)),
            "late_interaction_int8 (default)": auc(labels, raw_li),
            "late_interaction_fp32": auc(labels, fp32),
            "bm25_within_candidates": auc(labels, score_pairs(tune, bm25_within)),
        },
    }
    # IDF-weighted late interaction: the power is chosen on the tune split like everything else;
    # the best power is calibrated (Platt, on tune) and reported held-out beside the default.
    idf = squad_train_idf(data, li._st.model.tokenizer)
    idf_raw = {power: score_pairs(tune, IdfMaxSim(li, idf, power)) for power in (0.5, 1.0, 2.0)}
    for power, raw in idf_raw.items():
        selection["auc"][f"late_interaction_idf^{power}"] = auc(labels, raw)
    best_power = max(idf_raw, key=lambda p: auc(labels, idf_raw[p]))
    idf_cal = fit_platt(idf_raw[best_power], labels)
    idf_scorer = IdfMaxSim(li, idf, best_power)
    selection["late_interaction_idf"] = {
        "power_chosen_on_tune": best_power,
        "platt": {"a": idf_cal.a, "b": idf_cal.b},
        "beats_default_on_tune": auc(labels, idf_raw[best_power]) > auc(labels, raw_li),
    }
    learned = learned_combination(data, enc, tune) if full else None
    selection["learned_combination"] = learned[0] if learned else None

    # meve's cross-encoders (SQuAD train, `make train-verifier`), judged on tune like every candidate.
    mces = {name: MeveCrossEncoderScorer.shipped(scorer, cache_size=2_000_000) for name, scorer in CROSS_ENCODERS.items()}
    raw_ce = {name: score_pairs(tune, m.raw_scores) for name, m in mces.items()}
    for name, raw in raw_ce.items():
        selection["auc"][name] = auc(labels, raw)
    # The second dev set for choosing the default: WikiQA dev, sentence level (a different
    # domain from SQuAD); it chooses between candidates and fits nothing.
    wq_dev = wikiqa(data, "dev") if full else wikiqa(data, "dev")[:600]
    enc.passages([p for _, p, _ in wq_dev])
    y_dev = np.array([t[2] for t in wq_dev])
    dev_scores = {
        "cosine": score_pairs(wq_dev, enc.cosine),
        "late_interaction": score_pairs(wq_dev, li.raw_scores),
        **{name: score_pairs(wq_dev, m.raw_scores) for name, m in mces.items()},
    }
    selection["wikiqa_dev"] = {"pairs": len(wq_dev), "positives": int(y_dev.sum()), "auc": {k: auc(y_dev, v) for k, v in dev_scores.items()}}
    mean_dev = {
        k: (selection["auc"][k if k != "late_interaction" else "late_interaction_int8 (default)"] + selection["wikiqa_dev"]["auc"][k]) / 2 for k in dev_scores
    }
    selection["rule"] = (
        "the default is the candidate with the highest mean AUC over the two dev sets (SQuAD tune, WikiQA dev) whose verify phase meets <= 300 ms p50"
    )
    selection["mean_dev_auc"] = mean_dev

    ce = random_head_cross_encoder()
    systems: dict[str, Callable[[str, list[str]], np.ndarray]] = {
        "late_interaction": li.score,
        **{name: m.score for name, m in mces.items()},
        "cosine": cosine,
        "bm25_within_candidates": bm25_within,
    }
    systems[f"late_interaction_idf^{best_power}"] = lambda q, ps: idf_cal(idf_scorer(q, ps))  # a candidate, calibrated on tune
    if learned:
        systems["learned_combination"] = learned[1]  # tried, not chosen (see selection): reported like every candidate
    results: dict[str, Any] = {}
    held: dict[str, dict[str, np.ndarray]] = {}
    for name, pairs in sets.items():
        y = np.array([p[2] for p in pairs])
        row: dict[str, Any] = {"pairs": len(pairs), "positives": int(y.sum()), "queries": len(by_query(pairs))}
        scores = {s: score_pairs(pairs, fn) for s, fn in systems.items()}
        held[name] = scores
        sub = pairs[: (400 if full else 80)] if name != "msmarco_sample" else pairs[: 20 * (50 if full else 10)]
        ce_scores = score_pairs(sub, ce)
        row["systems"] = {s: {"auc": auc(y, v), "ap": average_precision(y, v)} for s, v in scores.items()}
        row["systems"]["random_head_cross_encoder"] = {"auc": auc(np.array([p[2] for p in sub]), ce_scores), "pairs_scored": len(sub)}
        for s in ("late_interaction", *mces, "cosine", f"late_interaction_idf^{best_power}", "learned_combination"):
            if s not in scores:
                continue
            row["systems"][s]["accuracy_at_tau_0.5"] = float(((scores[s] >= 0.5) == (y == 1)).mean())
        if name == "msmarco_sample":
            bm25_order = [(y[g], -np.arange(len(g), dtype=float)) for g in ms_groups]
            row["mrr_at_10"] = {
                "bm25_order": mrr_at_10(bm25_order),
                **{s: mrr_at_10([(y[g], scores[s][g]) for g in ms_groups]) for s in scores if s != "bm25_within_candidates"},
            }
        results[name] = row

    # Calibration of both trained scorers on the held-out SQuAD articles.
    y = np.array([p[2] for p in test])
    calibration: dict[str, Any] = {}
    for s, c in (("late_interaction", cal), *((name, m.calibration) for name, m in mces.items())):
        e, rel = ece(y, held["squad_dev_test_articles"][s])
        calibration[s] = {"platt": {"a": c.a, "b": c.b}, "ece_test": e, "reliability_test": rel, "raw_at_p_0.5": -c.b / c.a}

    # Cascades: a cheap scorer decides where it is sure (thresholds from the tune split: beyond
    # every tune pair on which the expensive scorer said otherwise), the expensive one elsewhere.
    cascade: dict[str, Any] = {}
    tune_cheap: dict[str, np.ndarray] = {"cosine": score_pairs(tune, enc.cosine), "late_interaction": cal(raw_li)}
    for cheap, expensive, tune_pass in (
        ("cosine", "late_interaction", cal(raw_li) >= 0.5),
        *(("late_interaction", name, m.calibration(raw_ce[name]) >= 0.5) for name, m in mces.items()),
    ):
        tc = tune_cheap[cheap]
        low = float(tc[tune_pass].min()) if tune_pass.any() else 1.0
        high = float(tc[~tune_pass].max()) if (~tune_pass).any() else -1.0
        row = {"fail_below": low, "pass_above": high}
        for name, pairs in sets.items():
            cheap_scores = score_pairs(pairs, enc.cosine) if cheap == "cosine" else held[name]["late_interaction"]
            full_pass = held[name][expensive] >= 0.5
            decided = (cheap_scores < low) | (cheap_scores > high)
            casc = np.where(cheap_scores < low, False, np.where(cheap_scores > high, True, full_pass))
            row[name] = {"skipped_fraction": float(decided.mean()), "agreement": float((casc == full_pass).mean())}
        cascade[f"{cheap}->{expensive}"] = row

    cost = verify_cost(test_articles, emb, n_queries=50 if full else 10)
    verify_ms = {"cosine": cost["cosine_verify_ms_p50"], "late_interaction": cost["verify_ms_p50_stored"]}
    verify_ms.update({name: c["verify_ms_p50"] for name, c in cost["cross_encoders"].items()})
    eligible = [k for k in mean_dev if verify_ms[k] <= 300]
    selection["verify_ms_p50"] = verify_ms
    selection["chosen_by_rule"] = max(eligible, key=mean_dev.__getitem__) if eligible else None
    out: dict[str, Any] = {
        "default": _default_name(),
        "selection": selection,
        "held_out": results,
        "calibration": calibration,
        "cascade": cascade,
        "cost": cost,
        "seconds": round(time.perf_counter() - t_start),
    }
    _reliability_png(calibration[out["default"]]["reliability_test"], out["default"])
    return out


def verify_cost(articles: list[dict[str, Any]], emb: SentenceTransformerEmbedder, n_queries: int) -> dict[str, Any]:
    """The verify phase per query with k_init = 20, token vectors kept at ingestion vs encoded at query time."""
    texts = [p["context"] for a in articles for p in a["paragraphs"]]
    questions = [q["question"] for a in articles for p in a["paragraphs"] for q in p["qas"]]
    qs = random.Random(3).sample(questions, n_queries)
    li = LateInteractionScorer(emb)
    t0 = time.perf_counter()
    # As MeVe(scorer="late-interaction") over this embedder: the shared pass keeps token vectors at ingestion.
    meve = MeVe.from_texts(texts, embedder=emb, scorer=li.scoring(), config=MeVeConfig(k_init=20))
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb.encode(texts[:200])
    plain_200 = time.perf_counter() - t0

    def phase_ms(m: MeVe) -> tuple[list[float], list[float]]:
        traces = [m.run(q).trace for q in qs]
        return [next(r.ms for r in t if r.phase == "verify") for t in traces], [sum(r.ms for r in t) for t in traces]

    stored, stored_total = phase_ms(meve)
    cold_li = LateInteractionScorer(emb, cache_bytes=0)  # nothing kept: every candidate encoded per query
    # No shared pass either, so the query's token vectors are made in the verify phase, as over a store meve did not build.
    cold_meve = MeVe(store=meve.store, lexical=meve.lexical, embedder=emb, scorer=li_verifier(cold_li), config=MeVeConfig(k_init=20), follow_replicas=False)
    cold, _ = phase_ms(cold_meve)

    def clone(scorer: Any) -> MeVe:
        return MeVe(store=meve.store, lexical=meve.lexical, embedder=emb, scorer=scorer, config=MeVeConfig(k_init=20), follow_replicas=False)

    cross_encoders = {}
    for name, scorer in CROSS_ENCODERS.items():
        mce = MeveCrossEncoderScorer.shipped(scorer)
        ce_ms, ce_total = phase_ms(clone(mce.scoring()))
        cross_encoders[name] = {
            "verify_ms_p50": pct(ce_ms, 50),
            "verify_ms_p95": pct(ce_ms, 95),
            "query_ms_p50": pct(ce_total, 50),
            "sentence_pairs_per_query": mce.pairs_scored / n_queries,
        }
    # Cosine over the vectors ingestion made: with meve's default embedder they sit in its cache, so
    # the scorer's own cached embedder is filled with them first (the clone's store came from `emb`).
    cached = CachedEmbedder(emb)
    cached.encode(texts)
    cosine_ms, _ = phase_ms(clone(CosineScorer(cached)))
    return {
        "passages": len(texts),
        "queries": n_queries,
        "cross_encoders": cross_encoders,
        "cosine_verify_ms_p50": pct(cosine_ms, 50),
        "verify_ms_p50_stored": pct(stored, 50),
        "verify_ms_p95_stored": pct(stored, 95),
        "verify_ms_p50_query_time": pct(cold, 50),
        "verify_ms_p95_query_time": pct(cold, 95),
        "query_ms_p50_stored": pct(stored_total, 50),
        "token_vector_bytes_per_1k_passages": li.cache.bytes / len(li.cache) * 1000,
        "mean_tokens_per_passage": li.cache.bytes / len(li.cache) / 386,
        "ingest_seconds_with_token_vectors": ingest_s,
        "plain_embedding_seconds_per_1k": plain_200 * 5,
        "ingest_seconds_per_1k": ingest_s / len(texts) * 1000,
    }


def _default_name() -> str:
    """The benchmark's name for the verifier ``MeVe()`` runs when given none."""
    from meve.scoring.resolve import make_scorer

    s = make_scorer(None, SentenceTransformerEmbedder())
    if isinstance(s, MeveCrossEncoderScorer):
        return next(name for name, scorer in CROSS_ENCODERS.items() if SHIPPED[scorer] == (s.path, s.quantized))
    return "late_interaction"


def _reliability_png(rows: list[dict[str, float]], name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfect calibration")
    ax.plot([r["mean_predicted"] for r in rows], [r["fraction_relevant"] for r in rows], "o-", label=f"{name} (Platt)")
    for r in rows:
        ax.annotate(str(r["n"]), (r["mean_predicted"], r["fraction_relevant"]), fontsize=6, xytext=(3, -8), textcoords="offset points")
    ax.set_xlabel("predicted P(relevant)")
    ax.set_ylabel("fraction relevant")
    ax.set_title("Verifier reliability, SQuAD dev test articles", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / "verifier_reliability.png", dpi=120)
