"""What a long passage costs the verifier (issue 52): one passage of ~256 and one of ~1,024 word
pieces, encoded by late interaction (the windows' model passes; once per passage, then cached)
and scored by meve's cross-encoder (per query), the median of ``--repeats`` runs after a warm-up.

    python -m benchmarks.long_passage [--repeats 7]

Rough figures for docs, on whatever CPU runs it; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from meve import LateInteractionScorer
from meve.scoring.embedders import default_embedder
from meve.scoring.meve_cross_encoder import MeveCrossEncoderScorer

SENTENCES = [
    "The Rhine rises in the Swiss Alps and flows north to the North Sea.",
    "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
    "A derailleur moves the chain from one sprocket to another on a bicycle.",
    "Granite is an igneous rock made mostly of quartz and feldspar.",
    "Honey bees communicate the direction of flowers with a waggle dance.",
    "Glaciers carve U-shaped valleys as they slowly move downhill.",
]


def passage(pieces: int, tokenizer: Any) -> str:
    """Distinct sentences until the text has ``pieces`` word pieces or just under (distinct: the
    cross-encoder scores each distinct sentence once)."""
    out: list[str] = []
    while True:
        sentence = f"Note {len(out)}: {SENTENCES[len(out) % len(SENTENCES)]}"
        if len(tokenizer(" ".join([*out, sentence]), add_special_tokens=False, verbose=False)["input_ids"]) > pieces:
            return " ".join(out)
        out.append(sentence)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    li = LateInteractionScorer(default_embedder().inner).warm_up()
    ce = MeveCrossEncoderScorer(cache_size=0).warm_up()
    tokenizer = li._st.model.tokenizer
    query = "Where does the Rhine flow?"
    for size in (256, 1024):
        text = passage(size, tokenizer)
        n = len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
        encode = median_ms(partial(li._forward, [text]), args.repeats)
        score = median_ms(partial(ce.score, query, [text]), args.repeats)
        print(f"{n} word pieces: late interaction encodes it in {encode:.0f} ms; meve-cross-encoder scores it in {score:.0f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()
