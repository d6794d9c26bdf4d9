"""The shipped verifier files stay within the issue's budget: safetensors only, one folder, <= 60 MB."""

from __future__ import annotations

from pathlib import Path

import meve

VERIFIER_DIR = Path(meve.__file__).resolve().parent / "weights"


def test_the_shipped_weights_are_safetensors_in_one_folder_within_60_mb():
    files = [p for p in VERIFIER_DIR.rglob("*") if p.is_file()]
    weights = [p for p in files if p.suffix != ".md"]
    assert weights and all(p.suffix == ".safetensors" and p.parent == VERIFIER_DIR for p in weights), weights
    total = sum(p.stat().st_size for p in weights)
    assert total <= 60 * 10**6, f"{total / 1e6:.1f} MB of weights in {VERIFIER_DIR}"
