"""The default verifier: calibrated late interaction over the bundled MiniLM's token embeddings.

Each query token takes its best cosine over the passage's tokens (MaxSim, as in
ColBERT) and the mean over query tokens is the raw score. A Platt scaling fitted
on SQuAD v1.1 dev articles that are never reported on maps it to P(relevant), so
``tau = 0.5`` means what it says. Why this and not a cross-encoder: no pretrained
one can be had offline, and meve's own (``meve.cross_encoder``, trained on SQuAD)
is sharper on SQuAD and WikiQA but weaker on MS MARCO and HotpotQA and costs
two orders of magnitude more per query (BENCHMARKS.md, "Verifier").

Cost: token vectors come from the same forward pass that makes the passage's
dense embedding, so ``MeVe`` keeps them (int8, one scale per token) at ingestion
and verification is a few small matrix products. Passages the cache has not
seen (another retriever's results, a reopened collection) are encoded on first
use and then cached, bounded by bytes. A passage longer than MiniLM's window is
read in overlapping windows (:mod:`meve.scoring.windows`): one vector per word
piece of the whole passage, one model pass per window.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from meve.core.errors import ConfigError
from meve.scoring.batching import default_batch_tokens
from meve.scoring.calibration import CALIBRATION_PATH, COMPRESSED_CALIBRATION_PATH, Calibration
from meve.scoring.embedders import default_embedder
from meve.scoring.protocols import Scoring, SharedPass
from meve.scoring.token_pass import Pass, forward, window_size
from meve.scoring.token_store import TokenStore
from meve.scoring.token_vectors import TokenVectorCache, dequantize, quantize, sentence_transformer_of, shared_cache, text_key, warn_query_time
from meve.scoring.windows import fits, pieces, text_pieces

#: Texts whose token offsets a scorer keeps (8 bytes a word piece: ~8 KB for a 1,024-token passage).
_OFFSET_TEXTS = 4096

__all__ = ["LateInteractionScorer", "TokenVectorCache", "dequantize", "maxsim", "quantize", "shared_cache", "text_key"]


def maxsim(query_tokens: np.ndarray, passage_tokens: np.ndarray) -> float:
    """Mean over query tokens of the best cosine over passage tokens (rows are unit vectors)."""
    if len(query_tokens) == 0 or len(passage_tokens) == 0:
        return 0.0
    return float((query_tokens @ passage_tokens.T).max(axis=1).mean())


class LateInteractionScorer:
    """The default verifier (see the module docstring). ``embedder`` defaults to meve's MiniLM.

    ``calibration`` is a :class:`Calibration` or a path to one; the default is the file
    shipped with meve. ``cache_bytes`` bounds the in-memory token-vector cache (int8). With a
    ``store`` (:class:`~meve.scoring.token_store.TokenStore`, 32 bytes per vector on disk, see
    :meth:`attach`) token vectors are kept there instead, unbounded and across restarts.
    """

    def __init__(
        self,
        embedder: Any = None,
        *,
        calibration: Calibration | str | Path | None = None,
        cache_bytes: int = 512 * 2**20,
        cache: TokenVectorCache | None = None,
    ) -> None:
        """``cache``: a token-vector cache to share (:func:`shared_cache`: every default component
        over one model in a process reads the same), else one of its own of ``cache_bytes``."""
        self._st = sentence_transformer_of(embedder if embedder is not None else default_embedder())
        self.calibration = calibration if isinstance(calibration, Calibration) else Calibration.load(calibration or CALIBRATION_PATH)
        self._own_calibration = calibration is not None
        self.cache = cache if cache is not None else TokenVectorCache(cache_bytes)
        self.store: TokenStore | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._qlock = threading.Lock()
        # Sentence pruning reads a passage's token offsets on every query that keeps it: tokenizing a
        # 1,024-token passage again costs ~10 ms on a CPU, so the offsets are kept per text (guarded by _qlock).
        self._offsets: OrderedDict[str, np.ndarray] = OrderedDict()
        self.name = f"late-interaction:{self._st.name}"
        self.pairs_scored = 0
        self.encoded_at_query_time = 0
        self.encoded_ahead = 0  # texts read by embed_passages outside a query (indexing, warm_up)

    def scoring(self) -> Scoring:
        """This scorer as a MeVe runs it (:class:`meve.scoring.protocols.Scoring`): sentences scored in
        their passage's context (:meth:`score_spans`), and a shared pass that makes the embedder's
        dense vectors while keeping their token vectors. ``MeVe(scorer="late-interaction")`` builds
        this, and so does ``MeVe(scorer=my_scorer)`` for a scorer you configured."""
        shared = SharedPass(self._st.name, self.embed_and_cache, self.embed_query, self.embed_for_query, self.embed_windows_and_cache)
        return Scoring(self, self._score_span_lists, shared)

    def attach(self, store: TokenStore) -> LateInteractionScorer:
        """Keep token vectors in ``store`` from now on (MeVe does this for a persistent collection).
        One store per scorer: a scorer serving two collections would write one's vectors into the
        other's directory."""
        if self.store is not None and self.store.path.resolve() != store.path.resolve():
            held = str(self.store.path)
            raise ConfigError("store", str(store.path), f"the folder this scorer keeps its token vectors in ({held!r}); one scorer per collection")
        self.store = store
        if not self._own_calibration:  # the shipped scaling for the vectors it will now read
            self.calibration = Calibration.load(COMPRESSED_CALIBRATION_PATH)
        return self

    def _keep(
        self, texts: Sequence[str], tokens: Sequence[np.ndarray], vecs: np.ndarray | None = None, *, disk: bool = True
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Keep ``texts``' token vectors (the store, else the cache, on disk too unless ``disk`` is
        False); returns the int8 rows and scales the cache was given (what it reads back), none
        when a store keeps them."""
        if self.store is not None:
            self.store.put_many([(text_key(t), tok) for t, tok in zip(texts, tokens, strict=True)])
            return []
        rows = [quantize(np.asarray(tok, dtype=np.float32)) for tok in tokens]
        self.cache.keep([text_key(t) for t in texts], rows, vecs, disk=disk)
        return rows

    def cache_info(self) -> dict[str, int]:
        """The in-memory cache's :meth:`TokenVectorCache.info`, with ``encoded_at_query_time``
        (texts this scorer sent through the model for a query, not at ingestion)."""
        return {**self.cache.info(), "encoded_at_query_time": self.encoded_at_query_time}

    def _lookup_many(self, keys: list[str]) -> list[np.ndarray | None]:
        return self.store.get_many(keys) if self.store is not None else self.cache.get_many(keys)

    def warm_up(self) -> LateInteractionScorer:
        """Load the model now (it otherwise loads on first use); returns self."""
        _ = self._st.model
        return self

    def _forward(self, texts: Sequence[str], *, query: bool = False) -> Pass:
        """Dense vectors and token vectors of ``texts`` (:func:`meve.scoring.token_pass.forward`): a
        text longer than the model's window is read in overlapping windows (a query: its first window
        alone, :meth:`query_cut`), each text is tokenized once, and batches are length-sorted and
        capped in padded tokens on a CPU (a query's 20 candidates in one batch pad to the longest,
        which costs a CPU 1.8x the time)."""
        return forward(self._st.model, texts, max_items=self._st.batch_size, max_tokens=default_batch_tokens(self._st.device), all_windows=not query)

    def query_cut(self, query: str) -> dict[str, int] | None:
        """How much of ``query`` this scorer reads, when that is not all of it: a query is read as
        one window of the model (its dense vector is that window's anyway), so a 5,000-word one costs
        what a 200-word one does; ``{"pieces": its word pieces, "read": those read}``, else None."""
        model = self._st.model
        read = window_size(model)
        text = query.strip()
        if fits(text, read):
            return None
        (p,) = text_pieces(model.tokenizer, [text])
        return {"pieces": len(p), "read": read} if len(p) > read else None

    def embed_and_cache(self, texts: Sequence[str]) -> np.ndarray:
        """Dense embeddings of ``texts`` (as the shared embedder makes them), keeping their token vectors."""
        return self.embed_windows_and_cache(texts)[0]

    def embed_windows_and_cache(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`embed_and_cache`, with each text's later windows' vectors from the same pass."""
        if not texts:
            return np.zeros((0, self._st.dimension), dtype=np.float32), []
        out = self._forward(texts)
        # MeVe's own ingestion: its corpus keeps them (its token store, or this process's memory), so
        # the disk cache, which serves the framework paths, is not filled with a copy.
        self._keep(texts, out.tokens, out.vecs, disk=False)
        return out.vecs, out.windows

    def embed_for_query(self, texts: Sequence[str]) -> np.ndarray:
        """Dense embeddings of another retriever's ``texts`` for one query: a text whose token
        vectors and dense vector are cached (an earlier query saw it) runs no model; the rest go
        through one pass that keeps both (counted in ``encoded_at_query_time``)."""
        return self.embed_passages(texts, at_query_time=True)

    def embed_passages(self, texts: Sequence[str], *, at_query_time: bool = False) -> np.ndarray:
        """Dense embeddings of passages, as the embedder makes them: a text whose dense vector is
        kept (in memory, or on disk from an earlier process) runs no model; the rest go through
        one pass that keeps their token vectors too, so the verifier reads them without the model
        (``MeVeEmbedding`` / ``MeVeEmbeddings`` index through this)."""
        if not texts:
            return np.zeros((0, self._st.dimension), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        known = self.cache.vectors(keys) if self.store is None else {}
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in known))
        if todo:
            vecs, tokens, _ = self._forward(todo)
            if at_query_time:
                self.encoded_at_query_time += len(todo)
                warn_query_time(self._st.name, len(todo), self.cache.disk is not None)
            else:
                self.encoded_ahead += len(todo)
            self._keep(todo, tokens, vecs)
            known.update(zip((text_key(t) for t in todo), vecs, strict=True))
        return np.stack([known[k] for k in keys]).astype(np.float32, copy=False)

    def _passage_tokens(self, passages: Sequence[str]) -> list[np.ndarray]:
        keys = [text_key(p) for p in passages]
        found = self._lookup_many(keys)
        missing = list(dict.fromkeys(p for p, f in zip(passages, found, strict=True) if f is None))
        if missing:
            out = self._forward(missing)
            self.encoded_at_query_time += len(missing)
            warn_query_time(self._st.name, len(missing), self.store is not None or self.cache.disk is not None)
            rows = self._keep(missing, out.tokens, out.vecs)
            # Score what is kept (the store's rows, or the cache's int8 rows even when it is too small
            # to hold them), so a passage scores the same on its first query as on later ones.
            kept = self._lookup_many([text_key(t) for t in missing]) if self.store is not None else [dequantize(q, scale) for q, scale in rows]
            fresh = dict(zip(missing, kept, strict=True))
            found = [f if f is not None else fresh[p] for p, f in zip(passages, found, strict=True)]
        return [f for f in found if f is not None]

    def embed_query(self, query: str) -> np.ndarray:
        """The query's dense embedding, keeping its token vectors for the verification that follows
        (one forward pass serves retrieval and verification)."""
        (vec,), (tok,), _ = self._forward([query], query=True)
        self._remember_query(query, tok)
        return vec

    def _remember_query(self, query: str, tokens: np.ndarray) -> None:
        with self._qlock:
            self._queries[query] = tokens
            self._queries.move_to_end(query)
            while len(self._queries) > 1024:
                self._queries.popitem(last=False)

    def _query_tokens(self, query: str) -> np.ndarray:
        with self._qlock:
            hit = self._queries.get(query)
            if hit is not None:
                self._queries.move_to_end(query)
                return hit
        _, (tok,), _ = self._forward([query], query=True)
        self._remember_query(query, tok)
        return tok

    def raw_scores(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """Uncalibrated MaxSim scores (what the calibration was fitted on)."""
        if len(passages) == 0:
            return np.zeros(0, dtype=np.float64)
        q = self._query_tokens(query)
        tokens = self._passage_tokens(passages)
        sizes = np.array([len(t) for t in tokens])
        if len(q) == 0 or not sizes.all():  # maxsim's empty cases, one passage at a time
            return np.array([maxsim(q, p) for p in tokens], dtype=np.float64)
        # One product for every passage, then each passage's best per query token (same as maxsim).
        sims = q @ np.concatenate(tokens).T
        best = np.maximum.reduceat(sims, np.concatenate([[0], np.cumsum(sizes)[:-1]]), axis=1)
        return best.mean(axis=0).astype(np.float64)

    def _token_offsets(self, text: str) -> np.ndarray:
        """Character offsets in ``text`` of the token vectors :meth:`_forward` keeps for it: every
        piece of the whole text (windows cover what one pass cannot) but the special ones, under
        the same tokenizer (sentence-transformers tokenizes the stripped text, hence the shift)."""
        key = text_key(text)
        with self._qlock:
            hit = self._offsets.get(key)
            if hit is not None:
                self._offsets.move_to_end(key)
                return hit
        tokenizer = self._st.model.tokenizer
        stripped = text.strip()
        shift = len(text) - len(text.lstrip())
        p = pieces(tokenizer, stripped)
        offsets = (p.offsets[~np.isin(p.ids, np.asarray(sorted(tokenizer.all_special_ids)))] + shift).astype(np.int32)
        offsets.flags.writeable = False  # shared between queries
        with self._qlock:
            self._offsets[key] = offsets
            while len(self._offsets) > _OFFSET_TEXTS:
                self._offsets.popitem(last=False)
        return offsets

    def score_spans(self, query: str, text: str, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """P(relevant) of each character span of ``text`` (its sentences) from the passage's own
        contextual token vectors: MaxSim over the tokens that start inside the span, so a pronoun
        carries what the model read around it and no model runs when the passage is cached (a
        passage longer than the model's window has a vector for every piece, from its windows).
        A span holding no piece at all (characters the tokenizer drops) is encoded alone."""
        if not spans:
            return np.zeros(0, dtype=np.float64)
        q = self._query_tokens(query)
        (tokens,) = self._passage_tokens([text])
        offsets = self._token_offsets(text)
        if len(offsets) != len(tokens):
            raise RuntimeError(f"late interaction: {len(offsets)} token offsets for {len(tokens)} token vectors of one passage; tokenizer and model disagree")
        raw: list[float | None] = []
        for a, b in spans:
            inside = (offsets[:, 0] >= a) & (offsets[:, 0] < b)
            raw.append(maxsim(q, tokens[inside]) if inside.any() else None)
        alone = [text[a:b] for (a, b), r in zip(spans, raw, strict=True) if r is None]
        if alone:
            extra = iter(self._passage_tokens(alone))
            raw = [r if r is not None else maxsim(q, next(extra)) for r in raw]
        self.pairs_scored += len(spans)
        return self.calibration(np.asarray(raw, dtype=np.float64))

    def _score_span_lists(self, query: str, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> list[np.ndarray]:
        return [self.score_spans(query, t, sp) for t, sp in zip(texts, spans, strict=True)]

    def score(self, query: str, passages: Sequence[str], query_vec: np.ndarray | None = None) -> np.ndarray:
        """Calibrated P(relevant); ``query_vec`` is unused (the query's token vectors are kept by text)."""
        raw = self.raw_scores(query, passages)
        self.pairs_scored += len(passages)
        return self.calibration(raw)
