"""The forward pass the late-interaction verifier makes: one pass of a SentenceTransformer per
window, giving each text's sentence vector and the token vector of every word piece.

Every text is tokenized once, in one batched call of the fast tokenizer. Windows of a text longer
than the model's (:mod:`meve.scoring.windows`) are slices of those pieces, framed with the model's
own special tokens, and padded batches are built in NumPy. The model's own preprocessing would
tokenize each window's text again and turn the padded lists into tensors in Python: on a GPU that
was more than half of a query's time (BENCHMARKS.md, "The drop-in path and ingestion on a GPU").
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from meve.scoring.batching import token_batches
from meve.scoring.windows import Pieces, frame, overlap_for, plan, stitch, text_pieces

__all__ = ["Framing", "Pass", "forward", "framing", "model_pass", "window_size"]

_IDS, _MASK, _TYPES = "input_ids", "attention_mask", "token_type_ids"


class Framing(NamedTuple):
    """How a model frames one text: the ids before and after its pieces, the padding id, whether
    it reads token type ids (all 0 for one text), and the non-tensor features its preprocessing
    adds (sentence-transformers >= 6.1 names the modality)."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    pad: int
    types: bool
    extra: dict[str, Any]


class Pass(NamedTuple):
    """What :func:`forward` makes of each text: its dense vector (the first window's, the model's
    own truncation), the unit token vector of every word piece, and the dense vectors of its later
    windows (none for a text that fits one window), by which a long passage is found by all its text."""

    vecs: np.ndarray
    tokens: list[np.ndarray]
    windows: list[np.ndarray]


_FRAMINGS: weakref.WeakKeyDictionary[Any, Framing | None] = weakref.WeakKeyDictionary()


def _prepare(model: Any, texts: list[str]) -> dict[str, Any]:
    prepare = getattr(model, "preprocess", None) or model.tokenize  # preprocess: sentence-transformers >= 6.1
    return dict(prepare(texts))


def framing(model: Any) -> Framing | None:
    """``model``'s framing, read from its own preprocessing of one short text and checked against
    it; None when its features hold tensors other than ids, mask and token types, or the check
    fails (then windows go through the model's preprocessing as text: :func:`model_pass`)."""
    if model in _FRAMINGS:
        return _FRAMINGS[model]
    import torch

    tokenizer = model.tokenizer
    before, after = frame(tokenizer)
    feats = _prepare(model, ["a"])
    tensors = {k for k, v in feats.items() if isinstance(v, torch.Tensor)}
    framed = [int(x) for x in feats[_IDS][0].tolist()] if _IDS in feats else []
    bare = [int(x) for x in tokenizer("a", add_special_tokens=False)[_IDS]]
    ok = tensors <= {_IDS, _MASK, _TYPES} and _IDS in tensors and tokenizer.pad_token_id is not None
    ok = ok and framed[before : len(framed) - after] == bare
    extra = {k: v for k, v in feats.items() if k not in tensors}
    out = Framing(tuple(framed[:before]), tuple(framed[len(framed) - after :]), int(tokenizer.pad_token_id), _TYPES in tensors, extra) if ok else None
    _FRAMINGS[model] = out
    return out


def _run(model: Any, features: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    import torch

    features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
    with torch.inference_mode():
        out = model(features)
    return (
        out["sentence_embedding"].float().cpu().numpy(),
        out["token_embeddings"].float().cpu().numpy(),
        out[_IDS].cpu().numpy(),
        out[_MASK].cpu().numpy(),
    )


def model_pass(model: Any, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One forward pass over ``texts`` through the model's own preprocessing: sentence vectors,
    token vectors, input ids and the attention mask (padded). Called directly rather than through
    ``encode(..., output_value=None)``, which breaks on some sentence-transformers releases."""
    return _run(model, _prepare(model, texts))


def ids_pass(model: Any, fr: Framing, rows: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`model_pass` over texts given as their pieces' ids, framed and padded here."""
    import torch

    width = max(len(r) for r in rows) + len(fr.prefix) + len(fr.suffix)
    ids = np.full((len(rows), width), fr.pad, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, r in enumerate(rows):
        framed = np.concatenate([np.asarray(fr.prefix, dtype=np.int64), r, np.asarray(fr.suffix, dtype=np.int64)])
        ids[j, : len(framed)] = framed
        mask[j, : len(framed)] = 1
    features: dict[str, Any] = {**fr.extra, _IDS: torch.from_numpy(ids), _MASK: torch.from_numpy(mask)}
    if fr.types:
        features[_TYPES] = torch.zeros_like(features[_IDS])
    return _run(model, features)


def window_size(model: Any) -> int:
    """How many word pieces of one text ``model`` reads in one pass (its length less its frame)."""
    fr = framing(model)
    before, after = (len(fr.prefix), len(fr.suffix)) if fr is not None else frame(model.tokenizer)
    return int(model.max_seq_length) - before - after


def forward(model: Any, texts: Sequence[str], *, max_items: int, max_tokens: int | None, all_windows: bool = True) -> Pass:
    """Dense vectors, token vectors and later windows' vectors of ``texts`` (read stripped, as
    sentence-transformers reads them). A text longer than the model's window goes through it in
    overlapping windows: one token vector per word piece of the whole text; its dense vector is the
    first window's, which is the model's own truncation, so it equals what the embedder makes; each
    later window's sentence vector comes from the same pass, at no cost. ``all_windows=False`` reads
    the first window alone (a query: what it costs stays bounded however long it is). Batches are
    sorted by length and capped at ``max_items`` texts and ``max_tokens`` padded tokens
    (:mod:`meve.scoring.batching`)."""
    tokenizer = model.tokenizer
    fr = framing(model)
    before, after = (len(fr.prefix), len(fr.suffix)) if fr is not None else frame(tokenizer)
    size = model.max_seq_length - before - after
    stripped = [t.strip() for t in texts]
    pieces = text_pieces(tokenizer, stripped)
    spans = [plan(p.starts, size, overlap_for(size))[: None if all_windows else 1] for p in pieces]
    jobs = [(i, w) for i, sp in enumerate(spans) for w in range(len(sp))]
    first = np.cumsum([0] + [len(sp) for sp in spans])  # text i's windows are jobs[first[i]:first[i + 1]]
    lengths = [before + after + spans[i][w][1] - spans[i][w][0] for i, w in jobs]
    special = np.asarray(sorted(tokenizer.all_special_ids))
    vecs: list[Any] = [None] * len(texts)
    later: list[list[tuple[int, np.ndarray]]] = [[] for _ in texts]
    bodies: list[Any] = [None] * len(jobs)
    for rows in token_batches(lengths, max_items=max_items, max_tokens=max_tokens):
        if fr is not None:
            sent, tok, ids, mask = ids_pass(model, fr, [pieces[jobs[r][0]].ids[slice(*spans[jobs[r][0]][jobs[r][1]])] for r in rows])
        else:  # window texts: the first is the text itself (the model truncates it), the rest are cut at their pieces
            sent, tok, ids, mask = model_pass(model, [_window_text(stripped[i], pieces[i], spans[i], w) for i, w in (jobs[r] for r in rows)])
        for j, r in enumerate(rows):
            i, w = jobs[r]
            unit = sent[j] / (np.linalg.norm(sent[j]) or 1.0)
            if w == 0:
                vecs[i] = unit
            else:
                later[i].append((w, unit))
            valid = np.flatnonzero(mask[j])
            body = valid[before : len(valid) - after]  # the text's own pieces, the frame left out
            bodies[r] = (tok[j][body], ids[j][body])
    tokens: list[np.ndarray] = []
    for i, p in enumerate(pieces):
        mine = bodies[first[i] : first[i + 1]]
        if len(mine) == 1:
            t, t_ids = mine[0]
        else:
            t, t_ids = stitch(spans[i], [b for b, _ in mine], len(p)), p.ids
        t = t[~np.isin(t_ids, special)]
        norms = np.linalg.norm(t, axis=1, keepdims=True)
        tokens.append((t / np.where(norms == 0, 1.0, norms)).astype(np.float32))
    dense = np.asarray(vecs, dtype=np.float32).reshape(len(texts), -1)
    windows = [np.asarray([v for _, v in sorted(ws, key=lambda x: x[0])], dtype=np.float32).reshape(len(ws), dense.shape[1]) for ws in later]
    return Pass(dense, tokens, windows)


def _window_text(text: str, pieces: Pieces, spans: list[tuple[int, int]], w: int) -> str:
    return text if w == 0 else text[slice(*pieces.span(*spans[w]))]
