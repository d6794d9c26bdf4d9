"""Context quality over long chunks (issue 52): the context benchmark's protocol on passages of
~512 and ~1024 tokens, cut as the frameworks' usual splitters cut them.

The context sets (:mod:`benchmarks.context`) are chunked at <= 150 tokens of whole sentences, or
are paragraphs and passages of that order. A LlamaIndex or LangChain user gets 512-1024-token
chunks; a verifier that read only its model's first 256 word pieces judged a quarter of each.
Here each split's corpus is rebuilt from the documents its passages came from
(:func:`benchmarks.harness.data.long_variant`), one variant per splitter
(:data:`benchmarks.harness.data.LONG_VARIANTS`):

- SQuAD: each article's paragraphs, joined, cut by the splitter;
- COVID-QA: each article's full text, cut by the splitter;
- HotpotQA: each question's candidate paragraphs (those no earlier question placed), and
  MS MARCO: each query's BM25 candidates (likewise): a question's own documents are that short,
  so consecutive ones are joined in corpus order up to the chunk size, then cut;
- WikiQA: each summary (title and sentences; ~300 tokens at most), and SelQA: each section's
  sentences: joined in file order up to the chunk size, then cut.

Questions, answers and evidence sentences are the context sets' own (the same fixed samples),
and evidence is counted by the text of the context. On each variant the protocol is the context
benchmark's, unchanged (the grid and the top-k curves on every dev split, the choice for each
left-out set on the other five), with one change: the budget. MeVe's ``t_max`` (512) cannot hold
one 1,024-token chunk, so the budget phase would drop every passage and the context be empty;
every setting here runs at ``t_max`` = three chunks (:data:`T_MAX`, dense top-3's scale). Test
rows give MeVe as shipped (``MeVeConfig()``'s knobs at that budget), the same at ``t_max`` 512
(exactly what a user gets), the LODO choice made on this variant's dev splits, the paper's
phases and the shipped default without verification, each against the top-k frontier at its
own tokens. Nothing here is written to ``benchmarks/fitted``: the shipped default is chosen by
``--only context`` alone.

    python -m benchmarks.run --full --only context_long
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.context import PAPER, SHIPPED_AT_START, load_sets, lodo_protocol
from benchmarks.harness.data import CONTEXT_SETS, LONG_VARIANTS, long_variant
from meve import MeVeConfig, get_token_counter

#: The budget every setting runs at, per variant: three chunks.
T_MAX = {variant: 3 * int(variant.split("-")[1]) for variant in LONG_VARIANTS}


def _arms(chosen: dict[str, Any], default: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        "shipped_default": SHIPPED_AT_START,
        "shipped_default_t_max_as_shipped": {**SHIPPED_AT_START, "t_max": MeVeConfig().t_max},
        "lodo_choice": chosen,
        "paper": PAPER,
        "shipped_default_no_verification": {**SHIPPED_AT_START, "verify": False},
    }


def run(
    data: Path, dev_limit: int = 200, test_limit: int = 300, variants: Sequence[str] = LONG_VARIANTS, names: Sequence[str] = CONTEXT_SETS
) -> dict[str, Any]:
    """The protocol on every long-chunk variant of the context sets."""
    t0 = time.perf_counter()
    counter = get_token_counter()
    sets = load_sets(data, dev_limit, test_limit, names)
    out: dict[str, Any] = {"protocol": __doc__, "shipped_default": SHIPPED_AT_START, "variants": {}}
    for variant in variants:
        long_sets = {name: long_variant(ds, variant, counter) for name, ds in sets.items()}
        result = lodo_protocol(long_sets, _arms, tag=f"-{variant}", base={"t_max": T_MAX[variant]})
        for name, ds in long_sets.items():
            texts = ds.splits["test"].texts
            result["datasets"][name]["test"]["passage_tokens_mean"] = round(sum(counter.count(t) for t in texts) / max(1, len(texts)), 1)
        out["variants"][variant] = result
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return out
