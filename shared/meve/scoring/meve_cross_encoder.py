"""meve's own cross-encoder verifier, trained on SQuAD v1.1 train (``scorer="meve-cross-encoder"``).

all-MiniLM-L6-v2 (the bi-encoder meve ships) fine-tuned as a cross-encoder: the query and one
sentence read together, mean pooling as the checkpoint was trained, one linear head, one logit.
A passage's score is its best sentence's (MaxP): the model was trained on sentences and short
windows, and the sentence scores then serve evidence pruning with no second model run (a sentence
longer than the model's 256 pieces scores as its best window: :meth:`MiniLMCrossEncoder.infer`). A Platt
scaling fitted on SQuAD dev articles that are never reported on maps the logit to P(relevant).
The weights, the calibration and the training log are one safetensors file (fp16, 45 MB);
``weights/MODEL_CARD.md`` gives data, licence and metrics, ``make train-verifier`` rebuilds it.
A 3-layer sibling distilled from it (``scorer="meve-cross-encoder-l3"``, 11 MB, run in int8) fits the
300 ms verify target but ranks below late interaction held out; the model card says where it still serves.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from meve.core.errors import ConfigError
from meve.core.text import sentence_spans
from meve.scoring.batching import CPU_BATCH_TOKENS, default_batch_tokens, estimated_tokens, token_batches
from meve.scoring.calibration import Calibration
from meve.scoring.devices import check_device, resolve_device
from meve.scoring.protocols import Scoring, split_sizes
from meve.scoring.registry import default_model_path, registry
from meve.scoring.windows import head, text_windows

__all__ = [
    "CROSS_ENCODER_L3_PATH",
    "CROSS_ENCODER_PATH",
    "SHIPPED",
    "MeveCrossEncoderScorer",
    "MiniLMCrossEncoder",
    "best_sentence",
    "load_weights",
    "read_file",
]

CROSS_ENCODER_PATH = Path(__file__).resolve().parents[1] / "weights" / "cross_encoder.safetensors"
# The 3-layer sibling (``scorer="meve-cross-encoder-l3"``): distilled with MiniLM's embeddings frozen,
# so its file holds only the layers and the head (the bundled MiniLM gives the embeddings).
CROSS_ENCODER_L3_PATH = CROSS_ENCODER_PATH.with_name("cross_encoder_l3.safetensors")
# Each shipped cross-encoder by scorer name: its weights and whether it runs in int8 (chosen on dev
# data, `python -m benchmarks.train_cross_encoder --variants ...`; MODEL_CARD.md).
SHIPPED: dict[str, tuple[Path, bool]] = {
    "meve-cross-encoder": (CROSS_ENCODER_PATH, False),
    "meve-cross-encoder-l3": (CROSS_ENCODER_L3_PATH, True),
}


class MiniLMCrossEncoder:
    """The network: MiniLM + mean pooling + a linear head (training and inference share it)."""

    def __init__(self, base: str, max_length: int = 256, *, pretrained: bool = False, layers: int | None = None) -> None:
        """``base``: the MiniLM folder (tokenizer and config); ``pretrained`` also loads its weights
        (to start training; inference loads meve's own weights over a bare network); ``layers``
        keeps only the first transformer layers (a smaller, faster model)."""
        import torch
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(base)
        self.encoder = AutoModel.from_pretrained(base) if pretrained else AutoModel.from_config(AutoConfig.from_pretrained(base))
        if layers is not None:
            if not 1 <= layers <= len(self.encoder.encoder.layer):
                raise ConfigError("layers", layers, f"an int in [1, {len(self.encoder.encoder.layer)}] (MiniLM's layers kept)")
            self.encoder.encoder.layer = self.encoder.encoder.layer[:layers]
            self.encoder.config.num_hidden_layers = layers
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        self.max_length = max_length
        self.pretrained = pretrained

    @property
    def layers(self) -> int:
        return len(self.encoder.encoder.layer)

    def to(self, device: str) -> MiniLMCrossEncoder:
        """Move the network to ``device`` (a resolved device name); returns self."""
        self.encoder.to(device)
        self.head.to(device)
        return self

    def logits(self, queries: Sequence[str], texts: Sequence[str]) -> Any:
        x = self.tok(list(queries), list(texts), truncation="only_second", max_length=self.max_length, padding=True, return_tensors="pt")
        x = x.to(self.head.weight.device)
        h = self.encoder(**x).last_hidden_state
        m = x["attention_mask"].unsqueeze(-1).to(h.dtype)
        return self.head((h * m).sum(1) / m.sum(1)).squeeze(-1)

    def state(self, *, embeddings: bool = True) -> dict[str, Any]:
        """The trained tensors; without ``embeddings`` (trained frozen), the loader takes the bundled
        MiniLM's own, so the file holds only what training changed."""
        out = {f"encoder.{k}": v for k, v in self.encoder.state_dict().items() if embeddings or not k.startswith("embeddings.")}
        out.update({f"head.{k}": v for k, v in self.head.state_dict().items()})
        return out

    def load_state(self, tensors: dict[str, Any]) -> None:
        enc = {k[8:]: v.float() for k, v in tensors.items() if k.startswith("encoder.")}
        # A file without embeddings was trained with them frozen: they must then be the bundled
        # MiniLM's (loaded with pretrained=True), and every other tensor must be in the file.
        missing, unexpected = self.encoder.load_state_dict(enc, strict=False)
        if unexpected or any(not k.startswith("embeddings.") for k in missing) or (missing and not self.pretrained):
            raise ValueError(f"tensors do not fit a {self.layers}-layer MiniLM: missing {missing[:3]}, unexpected {unexpected[:3]}")
        self.head.load_state_dict({k[5:]: v.float() for k, v in tensors.items() if k.startswith("head.")})
        self.encoder.eval()

    def query_room(self) -> int:
        """The most word pieces of a query this network reads: a pair keeps a quarter of its length for the text."""
        return int(self.max_length - self.tok.num_special_tokens_to_add(pair=True) - self.max_length // 4)

    def infer(self, query: str, texts: Sequence[str], batch_size: int = 32, batch_tokens: int | None = CPU_BATCH_TOKENS) -> np.ndarray:
        """One logit per text; texts go in length order, in batches of at most ``batch_tokens``
        padded tokens (see :mod:`meve.scoring.batching`), so a batch pads little. A text whose pair
        with ``query`` is past ``max_length`` (one long sentence: a list, a table row) gets the
        best logit of its overlapping windows (:mod:`meve.scoring.windows`) instead of its head's."""
        query = head(self.tok, query, self.query_room())[0]  # a query past its room would leave no room for the text: refused by the tokenizer
        room = self.max_length - self.tok.num_special_tokens_to_add(pair=True) - len(self.tok(query, add_special_tokens=False, verbose=False)["input_ids"])
        windows = [text_windows(self.tok, t, max(room, self.max_length // 4)) for t in texts]
        owner = np.repeat(np.arange(len(texts)), [len(w) for w in windows])
        flat = [w for ws in windows for w in ws]
        scored = np.zeros(len(flat), dtype=np.float64)
        q = estimated_tokens(query)
        lengths = [min(q + estimated_tokens(t), self.max_length) for t in flat]
        with self.torch.inference_mode():
            for rows in token_batches(lengths, max_items=batch_size, max_tokens=batch_tokens):
                scored[rows] = self.logits([query] * len(rows), [flat[i] for i in rows]).float().cpu().numpy()
        out = np.full(len(texts), -np.inf)
        np.maximum.at(out, owner, scored)
        return out


def read_file(path: str | Path) -> tuple[MiniLMCrossEncoder, dict[str, Any], dict[str, str]]:
    """The network in one of meve's safetensors files (a training checkpoint or shipped weights):
    its layer count from the metadata, the embeddings from the bundled MiniLM when the file has
    none; with the file's other tensors (``platt``) and its metadata (the training log)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - safe_open has no __iter__
        meta = dict(fh.metadata() or {})
    frozen = not any(k.startswith("encoder.embeddings.") for k in tensors)
    net = MiniLMCrossEncoder(default_model_path(), pretrained=frozen, layers=int(meta.get("layers", "6")))
    net.load_state(tensors)
    return net, {k: v for k, v in tensors.items() if not k.startswith(("encoder.", "head."))}, meta


def load_weights(path: str | Path, quantized: bool = False) -> tuple[MiniLMCrossEncoder, Calibration, dict[str, str]]:
    """The network, its calibration and the training log from one safetensors file; ``quantized``
    runs the encoder's linear layers in int8 (PyTorch dynamic quantization, CPU only)."""
    try:
        net, rest, meta = read_file(path)
        a, b = (float(x) for x in rest["platt"])
        if quantized:
            import torch

            # torch 2.13 (pinned) marks eager int8 quantization deprecated (moving to torchao); the
            # warnings are about PyTorch's roadmap, not anything a caller can change, so they stay here.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor", category=UserWarning)
                warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
                from torch.ao.quantization import quantize_dynamic

                net.encoder = quantize_dynamic(net.encoder, {torch.nn.Linear}, dtype=torch.qint8)
    except Exception as exc:  # safetensors' own errors subclass nothing narrower; any failure names the file
        allowed = f"meve's cross-encoder safetensors (encoder.*, head.*, platt) (loading failed: {type(exc).__name__}: {exc})"
        raise ConfigError("scorer", str(path), allowed) from exc
    return net, Calibration(a, b), meta


def best_sentence(passages: Sequence[str], sentence_logits: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Each passage's best sentence logit (MaxP), every sentence of every passage in one call."""
    if len(passages) == 0:
        return np.zeros(0, dtype=np.float64)
    sents = [[p[a:b] for a, b in sentence_spans(p)] or [p] for p in passages]
    flat = sentence_logits([s for ss in sents for s in ss])
    return np.array([part.max() for part in split_sizes(flat, [len(ss) for ss in sents])], dtype=np.float64)


class MeveCrossEncoderScorer:
    """The :class:`~meve.scoring.protocols.Scorer` over meve's cross-encoder (module docstring).

    ``weights``: the safetensors file (default: the one shipped with meve). Sentence logits are
    kept per query (bounded), so pruning the passages a query kept runs no model again.
    """

    @classmethod
    def shipped(cls, name: str, *, batch_size: int = 32, cache_size: int = 4096, device: str = "auto") -> MeveCrossEncoderScorer:
        """A cross-encoder shipped with meve, by its scorer name, run as that name runs it."""
        if name not in SHIPPED:
            raise ConfigError("scorer", name, f"one of meve's cross-encoders: {', '.join(map(repr, SHIPPED))}")
        path, quantized = SHIPPED[name]
        return cls(path, quantized=quantized, batch_size=batch_size, cache_size=cache_size, device=device)

    def __init__(
        self, weights: str | Path | None = None, *, quantized: bool = False, batch_size: int = 32, cache_size: int = 4096, device: str = "auto"
    ) -> None:
        """``device``: "auto" (CUDA, then Apple MPS, then the CPU, decided at load). An int8
        (``quantized``) network runs on the CPU whatever ``device`` says "auto" (PyTorch's dynamic
        quantization is CPU-only); naming another device for it is refused."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 4096:
            raise ConfigError("batch_size", batch_size, "an int in [1, 4096] (pairs per forward pass)")
        self.requested_device = check_device(device)
        if quantized and device not in ("auto", "cpu"):
            raise ConfigError("device", device, '"auto" or "cpu" for an int8 cross-encoder (PyTorch\'s dynamic quantization runs on the CPU only)')
        self._device: str | None = "cpu" if quantized else None
        self.path = Path(weights) if weights is not None else CROSS_ENCODER_PATH
        if not self.path.is_file():
            raise ConfigError("scorer", str(self.path), "an existing meve cross-encoder safetensors file (make train-verifier builds it)")
        self.quantized = quantized
        self.batch_size = batch_size
        self.name = f"meve-cross-encoder:{self.path.name}{' (int8)' if quantized else ''}"
        self.pairs_scored = 0
        self._logits: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def device(self) -> str:
        """The device the network runs on (``device`` resolved once, when first asked)."""
        if self._device is None:
            self._device = resolve_device(self.requested_device)
        return self._device

    def _loaded(self) -> tuple[MiniLMCrossEncoder, Calibration, dict[str, str]]:
        key = f"{self.path}|{'int8' if self.quantized else 'fp32'}"
        device = self.device

        def factory() -> tuple[MiniLMCrossEncoder, Calibration, dict[str, str]]:
            net, calibration, meta = load_weights(self.path, self.quantized)
            return net.to(device), calibration, meta

        return registry.get("meve-ce", key, device, factory, label=self.name)  # type: ignore[no-any-return]

    @property
    def network(self) -> MiniLMCrossEncoder:
        return self._loaded()[0]

    @property
    def calibration(self) -> Calibration:
        return self._loaded()[1]

    def warm_up(self) -> MeveCrossEncoderScorer:
        self._loaded()
        return self

    def scoring(self) -> Scoring:
        """This scorer as a MeVe runs it: passages by their best sentence, sentences from the same logits."""
        return Scoring(self, self.score_spans)

    def query_cut(self, query: str) -> dict[str, int] | None:
        """How much of ``query`` the network reads when that is not all of it (a pair keeps a quarter of
        its length for the passage: :meth:`MiniLMCrossEncoder.query_room`): ``{"pieces", "read"}``, else None."""
        net = self.network
        _, n, read = head(net.tok, query, net.query_room())
        return {"pieces": n, "read": read} if read < n else None

    def sentence_logits(self, query: str, sentences: Sequence[str]) -> np.ndarray:
        with self._lock:
            known = {s: self._logits.get((query, s)) for s in sentences}
        todo = list(dict.fromkeys(s for s, v in known.items() if v is None))
        if todo:
            net = self.network
            with registry.lock_of(net):
                fresh = net.infer(query, todo, self.batch_size, default_batch_tokens(self.device))
            self.pairs_scored += len(todo)
            with self._lock:
                for s, v in zip(todo, fresh, strict=True):
                    known[s] = float(v)
                    self._logits[(query, s)] = float(v)
                while len(self._logits) > self._cache_size:
                    self._logits.popitem(last=False)
        return np.array([known[s] for s in sentences], dtype=np.float64)

    def raw_scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Each passage's best sentence logit (what the calibration was fitted on)."""
        return best_sentence(passages, lambda sents: self.sentence_logits(query, sents))

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray:
        """Calibrated P(relevant); ``query_vec`` is unused (a cross-encoder reads the query itself)."""
        return self.calibration(self.raw_scores(query, passages))

    def score_spans(self, query: str, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> list[np.ndarray]:
        """P(relevant) of each sentence span, from the logits scoring the passage already made."""
        flat = [t[a:b] for t, sp in zip(texts, spans, strict=True) for a, b in sp]
        return split_sizes(self.calibration(self.sentence_logits(query, flat)), [len(sp) for sp in spans])
