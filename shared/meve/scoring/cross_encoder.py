"""Any sentence-transformers cross-encoder as a scorer, its relevance probability pinned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from meve.core.errors import ConfigError
from meve.scoring.batching import CPU_BATCH_TOKENS, check_batch_tokens, estimated_tokens, token_batches
from meve.scoring.cosine import sigmoid
from meve.scoring.devices import check_device, is_cpu, resolve_device
from meve.scoring.registry import INSTALL_HINT, registry
from meve.scoring.windows import text_windows

__all__ = ["DEFAULT_CROSS_ENCODER", "CrossEncoderScorer", "relevance"]

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def relevance(logits: np.ndarray, name: str) -> np.ndarray:
    """P(relevant) from a cross-encoder's raw outputs: sigmoid of a single logit, softmax of two
    (label 1 is "relevant"). Other heads (e.g. 3-way NLI) have no relevance label meve can pick."""
    if logits.ndim == 1 or logits.shape[1] == 1:
        return sigmoid(logits.reshape(-1))
    if logits.shape[1] == 2:
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        return np.asarray(exp[:, 1] / exp.sum(axis=1), dtype=np.float64)
    raise ConfigError("scorer", name, f"a cross-encoder with 1 output (sigmoid) or 2 (softmax, label 1 = relevant); this one has {logits.shape[1]}")


class CrossEncoderScorer:
    """A sentence-transformers ``CrossEncoder`` by name or path, sigmoid pinned.

    Cost controls that do not change which pairs pass: pairs are sorted by
    length and batched so each batch pads little (``batch_tokens`` padded tokens
    per forward pass, "auto": 1,024 on a CPU, no cap elsewhere; ``batch_size``
    pairs at most); ``max_length`` caps tokens per pair (``None`` keeps the
    model's own limit): a longer passage is read in windows of that length and
    scores as its best one (:meth:`score`), so a cap costs passes, not the tail. ``device``: "auto" (CUDA, then Apple MPS, then the CPU, decided at load).
    """

    def __init__(
        self,
        model: Any = DEFAULT_CROSS_ENCODER,
        *,
        max_length: int | None = None,
        batch_size: int = 32,
        batch_tokens: int | Literal["auto"] | None = "auto",
        device: str = "auto",
        local_files_only: bool = False,
    ) -> None:
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or not 8 <= max_length <= 8192):
            raise ConfigError("max_length", max_length, "None (the model's own limit) or an int in [8, 8192] (tokens per query-passage pair)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise ConfigError("batch_size", batch_size, "an int in [1, 4096] (pairs per forward pass)")
        self._batch_tokens = batch_tokens if batch_tokens == "auto" else check_batch_tokens(batch_tokens)
        self._given = model
        self.max_length = max_length
        self.batch_size = batch_size
        self.requested_device = check_device(device)
        self._device: str | None = None
        self.local_files_only = local_files_only
        self.name = f"cross-encoder:{model if isinstance(model, str) else type(model).__name__}"
        self.pairs_scored = 0

    @property
    def device(self) -> str:
        """The device the model runs on: a loaded model's own, else ``device`` resolved once."""
        if not isinstance(self._given, str):
            return str(getattr(self._given, "device", "cpu"))
        if self._device is None:
            self._device = resolve_device(self.requested_device)
        return self._device

    @property
    def batch_tokens(self) -> int | None:
        """Padded tokens per forward pass: "auto" is 1,024 on a CPU and no cap elsewhere."""
        if self._batch_tokens == "auto":
            return CPU_BATCH_TOKENS if is_cpu(self.device) else None
        return self._batch_tokens

    @property
    def model(self) -> Any:
        """The loaded ``CrossEncoder`` (shared by every handle on the same path and device)."""
        if not isinstance(self._given, str):
            return self._given
        path = self._given

        def factory() -> Any:
            try:
                import torch
                from sentence_transformers import CrossEncoder
            except ImportError as exc:  # pragma: no cover
                raise ImportError(f"CrossEncoderScorer needs sentence-transformers; {INSTALL_HINT}") from exc
            return CrossEncoder(path, device=self.device, local_files_only=self.local_files_only, activation_fn=torch.nn.Sigmoid())

        return registry.get("ce", f"{path}|{self.local_files_only}", self.device, factory, label=self.name)

    def load(self) -> CrossEncoderScorer:
        """Load the model now (it otherwise loads on first use); returns self."""
        _ = self.model
        return self

    def score(
        self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None, *, max_length: int | None = None, batch_size: int | None = None
    ) -> np.ndarray:
        """``max_length``/``batch_size`` override the constructor's for this call; ``query_vec`` is unused.
        A passage whose pair with the query is longer than the model reads (its own limit, or
        ``max_length``) is scored as its best window: overlapping windows of the passage cut at word
        starts (:mod:`meve.scoring.windows`), each read with the query, one pair each."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float64)
        cap = max_length if max_length is not None else self.max_length
        windows = self._windows(query, passages, cap)
        owner = np.repeat(np.arange(len(passages)), [len(w) for w in windows])
        texts = [t for w in windows for t in w]
        q = estimated_tokens(query)
        lengths = [min(q + estimated_tokens(t), cap or 1 << 30) for t in texts]
        batches = token_batches(lengths, max_items=batch_size or self.batch_size, max_tokens=self.batch_tokens)
        raw = self._predict([[(query, texts[i]) for i in rows] for rows in batches], cap)
        scored = np.empty(len(texts), dtype=np.float64)
        for rows, logits in zip(batches, raw, strict=True):
            scored[rows] = relevance(np.asarray(logits, dtype=np.float64), self.name)
        out = np.full(len(passages), -np.inf)
        np.maximum.at(out, owner, scored)  # a NaN window (a broken model) leaves its passage NaN
        self.pairs_scored += len(passages)
        return out

    def _windows(self, query: str, passages: Sequence[str], cap: int | None) -> list[list[str]]:
        """Each passage as the texts read beside ``query``: itself when the pair fits the model's
        length, else its windows, each sized to leave room for the query and the special tokens
        (at least a quarter of the length: a longer query is cut by the model's own truncation)."""
        model = self.model
        with registry.lock_of(model):  # not while another call has the model at its cap (_predict)
            own = getattr(model, _length_attr(model)) or model.tokenizer.model_max_length
        limit = min(cap, own) if cap is not None else own
        tokenizer = model.tokenizer
        room = limit - tokenizer.num_special_tokens_to_add(pair=True) - len(tokenizer(query, add_special_tokens=False, verbose=False)["input_ids"])
        size = max(room, limit // 4)
        return [text_windows(tokenizer, p, size) for p in passages]

    def _predict(self, batches: list[list[tuple[str, str]]], cap: int | None) -> list[Any]:
        import torch

        model = self.model
        attr = _length_attr(model)
        # The model is shared by every scorer in the process: a cap is set, used and restored under the
        # model's own lock, so a concurrent call never runs at another call's length.
        with registry.lock_of(model):
            old = getattr(model, attr)
            try:
                if cap is not None:
                    setattr(model, attr, min(cap, old) if old else cap)
                return [
                    model.predict(pairs, batch_size=len(pairs), activation_fn=torch.nn.Identity(), show_progress_bar=False, convert_to_numpy=True)
                    for pairs in batches
                ]
            finally:
                setattr(model, attr, old)


def _length_attr(model: Any) -> str:
    """The attribute holding a CrossEncoder's max length (``max_length`` before sentence-transformers 5)."""
    return "max_seq_length" if hasattr(type(model), "max_seq_length") else "max_length"
