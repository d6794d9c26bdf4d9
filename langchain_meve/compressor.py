"""LangChain document compressor: MeVe's verify → fallback → prioritise → budget over any retriever's documents."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from meve import MeVeConfig
from meve.lexical import IncrementalBM25, top_k
from meve.models import Embedder, RelevanceScorer, default_embedder, default_scorer
from meve.phases import PhaseOutput, drop_redundant, fallback, novelty_select, pack_budget, verify
from meve.pipeline import check_query
from meve.records import Passage
from meve.tokens import count_many, get_token_counter


class MeVeCompressor(BaseDocumentCompressor):
    """Verification + fallback-to-top-N + prioritisation + token budget for documents from any retriever.

    ``MeVeCompressor()`` works offline with the defaults; any MeVeConfig field can be
    passed (``MeVeCompressor(tau=0.6, t_max=256)``). When fewer than ``n_min``
    documents pass, the best of the rest (by BM25 over the given documents, then
    the retriever's order) fill up to ``n_min``. Input documents are never mutated.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: MeVeConfig = Field(default_factory=MeVeConfig)
    embedder: Any = None
    scorer: Any = None
    token_counter: Any = None
    _embedder: Embedder | None = PrivateAttr(default=None)
    _scorer: RelevanceScorer | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        fields = {f for f in MeVeConfig.__dataclass_fields__}
        overrides = {k: data.pop(k) for k in list(data) if k in fields}
        if overrides:
            data["config"] = data.get("config", MeVeConfig()).replace(**overrides)
        super().__init__(**data)

    def _models(self) -> tuple[Embedder, RelevanceScorer]:
        if self._embedder is None:
            self._embedder = self.embedder if self.embedder is not None else default_embedder()
        if self._scorer is None:
            self._scorer = self.scorer if self.scorer is not None else default_scorer(self._embedder)
        return self._embedder, self._scorer

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        query = check_query(query)
        cfg = self.config
        if not documents:
            return []
        embedder, scorer = self._models()
        texts = [d.page_content for d in documents]
        vecs = embedder.encode([query, *texts])
        passages = tuple(Passage(id=str(i), text=t, embedding=vecs[i + 1], dense_score=float(vecs[i + 1] @ vecs[0])) for i, t in enumerate(texts))
        rel = [float(s) for s in scorer.score(query, texts)] if cfg.verify else [p.dense_score or 0.0 for p in passages]
        out = verify(passages, rel, cfg.tau) if cfg.verify else PhaseOutput(passages)
        if cfg.fallback and len(out.kept) < cfg.n_min:
            bm25 = IncrementalBM25(texts).get_scores(query)
            order = [i for i, _ in top_k(bm25, len(texts))] + list(range(len(texts)))
            rescued = [passages[i].with_(relevance=float(rel[i]), bm25_score=float(bm25[i])) for i in dict.fromkeys(order)]
            out = fallback(out.kept, rescued, cfg.n_min, cfg.n_min - len(out.kept))
        if cfg.prioritisation == "redundancy":
            out = drop_redundant(out.kept, cfg.theta_redundancy)
        elif cfg.prioritisation == "novelty":
            out = novelty_select(out.kept, cfg.novelty_lambda, cfg.theta_redundancy)
        counter = get_token_counter(self.token_counter)
        kept = out.kept
        out = pack_budget(kept, count_many(counter, [p.text for p in kept]), cfg.t_max, counter.count(cfg.separator), cfg.max_passages)
        result = []
        for p in out.kept:
            src = documents[int(p.id)]
            meta = {**src.metadata, "meve_score": p.score, "meve_source": "verified" if p.source == "dense" else "fallback", "meve_tokens": p.tokens}
            result.append(Document(page_content=src.page_content, metadata=meta, id=src.id))
        return result

    async def acompress_documents(self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None) -> Sequence[Document]:
        return await asyncio.to_thread(self.compress_documents, documents, query, callbacks)
