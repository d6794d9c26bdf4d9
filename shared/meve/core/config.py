"""Validated configuration records with the papers' defaults.

Both records are frozen; :meth:`MeVeConfig.replace` returns a new, re-validated
copy, which is how per-call overrides are applied (``is None`` checks, never
``or``, so a real ``0`` or ``0.0`` survives).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from meve.core.errors import ConfigError

Prioritisation = Literal["redundancy", "novelty", "none"]
Retrieval = Literal["dense", "hierarchical"]
Fusion = Literal["weighted", "rrf"]
Cut = Literal["none", "gap", "ratio"]
Prune = Literal["none", "scorer", "embedder"]
Candidates = Literal["dense", "hybrid"]

PRIORITISATIONS: tuple[str, ...] = ("redundancy", "novelty", "none")
RETRIEVALS: tuple[str, ...] = ("dense", "hierarchical")
FUSIONS: tuple[str, ...] = ("weighted", "rrf")
CUTS: tuple[str, ...] = ("none", "gap", "ratio")
PRUNES: tuple[str, ...] = ("none", "scorer", "embedder")
CANDIDATES: tuple[str, ...] = ("dense", "hybrid")


def _int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, f"an int >= {low}")
    if value < low or (high is not None and value > high):
        allowed = f"an int in [{low}, {high}]" if high is not None else f"an int >= {low}"
        raise ConfigError(name, value, allowed)


def _float(name: str, value: Any, low: float, high: float, *, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(name, value, f"a number in {'(' if low_open else '['}{low}, {high}]")
    if value < low or value > high or (low_open and value == low):
        raise ConfigError(name, value, f"a number in {'(' if low_open else '['}{low}, {high}]")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "one of " + ", ".join(repr(a) for a in allowed))


def check_names(owner: str, given: Mapping[str, Any], allowed: Collection[str]) -> None:
    """Refuse keywords ``owner`` does not have, naming the first one and the nearest valid name
    (a misspelled ``t_max`` must not pass silently or surface as a bare TypeError)."""
    unknown = sorted(set(given) - set(allowed))
    if not unknown:
        return
    name = unknown[0]
    near = difflib.get_close_matches(name, sorted(allowed), n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise ConfigError(name, given[name], f"a keyword of {owner} ({hint}allowed: {', '.join(sorted(allowed))})")


C = TypeVar("C")


def strict(cls: type[C]) -> type[C]:
    """A dataclass whose constructor refuses unknown keywords with :func:`check_names`."""
    init = cls.__init__
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @functools.wraps(init)
    def __init__(self: Any, **kwargs: Any) -> None:
        check_names(cls.__name__, kwargs, names)
        init(self, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def _replace(obj: Any, overrides: Mapping[str, Any]) -> Any:
    check_names(type(obj).__name__, overrides, [f.name for f in dataclasses.fields(obj)])
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(obj, **given) if given else obj


@strict
@dataclass(frozen=True, kw_only=True)
class MeVeConfig:
    """Settings of the five MeVe phases (defaults from the MeVe paper where it gives one).

    Attributes:
        k_init: candidates from the dense kNN search (phase 1).
        candidates: "dense" (the paper's kNN) or "hybrid": the dense top k_init and the BM25 top
            k_init fused by reciprocal rank, cut to k_init, so the verifier scores as many pairs.
        tau: relevance threshold on the verifier's [0, 1] scale (phase 2): a cross-encoder's
            sigmoid (or softmax) probability, the default verifier's calibrated P(relevant).
            The defaults of tau, cut, candidates, coverage and prune (hybrid candidates, tau 0.1,
            the ratio cut at 0.8, coverage 0.3, no pruning) were chosen together out of 48
            settings on six data sets' dev splits and checked leave-one-dataset-out on their test
            splits (``benchmarks/context.py``; BENCHMARKS.md); theta_redundancy stays at 0.95 in
            all of them, as a duplicate filter rather than a relevance knob.
            The paper's phase is tau 0.5 with no cut.
        cut: a per-query cut beside tau (phase 2): "gap" keeps only the candidates above the
            largest drop in this query's sorted scores (Adaptive-k), "ratio" those scoring
            >= cut_ratio x the best; "none" leaves tau alone. Works with any verifier.
        cut_ratio: the fraction of the best score that "ratio" keeps.
        coverage: after tau and the cut (phase 2), a candidate left out is kept when it holds
            query terms the kept passages lack, worth >= coverage of the query's weight (idf
            within the candidates): the second half of "Are X and Y both ...?". Only when
            something was verified; 0 turns it off. Works with any verifier.
        coverage_floor: query coverage never keeps a candidate the verifier scores below this.
        prune: sentence-level evidence pruning inside kept passages, after prioritisation:
            "scorer" scores each sentence with the scorer, "embedder" by cosine with the
            query (cheaper); "none" keeps passages whole.
        prune_ratio: a sentence stays if it scores >= prune_ratio x its passage's best sentence.
        prune_gate: only a passage whose best sentence scores >= this is pruned (on the pruning
            scorer's scale); one below it, where the scorer located no evidence, stays whole.
        n_min: fewer verified candidates than this trigger the BM25 fallback (phase 3).
        fallback_k: BM25 results merged in when the fallback runs.
        fallback_tau: a fallback passage the verifier scores below this is rejected, not added
            (passages between fallback_tau and tau may pad the context to n_min; 0 disables).
        fallback_min_bm25: a fallback passage needs a BM25 score above this (lexical evidence).
        min_keep: after the fallback, a context of fewer passages than this is padded with the
            candidates the verifier scored best among those left out, each with source "padded"
            (0, the default: a context nothing passed stays empty, and the budget phase's
            ``info["empty"]`` says why).
        theta_redundancy: cosine above which a lower-ranked candidate is a near-duplicate (phase 4).
            0.95 drops the same text reworded; at 0.85 the filter dropped distinct passages on the
            same topic (MS MARCO's dev split lost 0.11 of its evidence).
        prioritisation: "redundancy" (drop near-duplicates), "novelty" (SARA-style
            greedy selection) or "none" (ablation).
        novelty_lambda: in novelty mode, weight of relevance against similarity to
            what is already selected (1.0 = relevance only).
        t_max: hard token budget of the packed context (phase 5).
        verify: False switches verification off (ablation): every candidate is kept, unverified.
        fallback: False switches the BM25 fallback off (ablation).
        retrieval: "dense" (kNN over passages) or "hierarchical" (documents first,
            then passages inside them; needs a corpus built with documents).
        separator: joins packed passages; its tokens count against t_max.
        max_passages: at most this many passages in the context (None: only t_max limits);
            the adapters map their ``k`` onto it.
        neighbours: after packing, a kept passage whose best sentence (the verifier's) opens or ends its
            text is joined, as one passage, with its neighbour on that side in its source (LlamaIndex
            PREVIOUS/NEXT, LangChain ``source``/``start_index``; their overlap once) when the room left in
            t_max holds what it adds (:mod:`meve.pipeline.neighbours`). On: chosen left out (BENCHMARKS.md, "Neighbours").
        k_docs: documents chosen by the document stage (hierarchical retrieval).
        passage_tokens: size of the sentence windows scored inside chosen documents.
    """

    # Phase 1. The defaults of phases 2-4 and pruning were chosen leave-one-dataset-out
    # (BENCHMARKS.md, "Context"); the paper has dense candidates, tau 0.5, n_min 3 and no pruning.
    k_init: int = 20
    candidates: Candidates = "hybrid"
    retrieval: Retrieval = "dense"
    k_docs: int = 5
    passage_tokens: int = 150
    # Phase 2 (coverage_floor: coverage never keeps a candidate the verifier scores below it).
    tau: float = 0.1
    cut: Cut = "ratio"
    cut_ratio: float = 0.8
    coverage: float = 0.3
    coverage_floor: float = 0.05
    # Phase 3.
    n_min: int = 1
    fallback_k: int = 5
    fallback_tau: float = 0.1
    fallback_min_bm25: float = 0.0
    min_keep: int = 0
    # Phase 4.
    theta_redundancy: float = 0.95
    prioritisation: Prioritisation = "redundancy"
    novelty_lambda: float = 0.7
    # Sentence pruning: off by default (it cost evidence sentences on every data set; BENCHMARKS.md).
    prune: Prune = "none"
    prune_ratio: float = 0.5
    prune_gate: float = 0.2
    # Phase 5.
    t_max: int = 512
    separator: str = "\n\n"
    max_passages: int | None = None
    neighbours: bool = True
    # Ablations.
    verify: bool = True
    fallback: bool = True

    def __post_init__(self) -> None:
        _int("k_init", self.k_init, 1, 10_000)
        _choice("candidates", self.candidates, CANDIDATES)
        _float("tau", self.tau, 0.0, 1.0)
        _choice("cut", self.cut, CUTS)
        _float("cut_ratio", self.cut_ratio, 0.0, 1.0, low_open=True)
        _float("coverage", self.coverage, 0.0, 1.0)
        _float("coverage_floor", self.coverage_floor, 0.0, 1.0)
        _int("n_min", self.n_min, 0)
        _int("fallback_k", self.fallback_k, 0, 10_000)
        _float("fallback_tau", self.fallback_tau, 0.0, 1.0)
        _float("fallback_min_bm25", self.fallback_min_bm25, 0.0, 1e6)
        _int("min_keep", self.min_keep, 0)
        _float("theta_redundancy", self.theta_redundancy, 0.0, 1.0, low_open=True)
        _choice("prioritisation", self.prioritisation, PRIORITISATIONS)
        _float("novelty_lambda", self.novelty_lambda, 0.0, 1.0)
        _choice("prune", self.prune, PRUNES)
        _float("prune_ratio", self.prune_ratio, 0.0, 1.0)
        _float("prune_gate", self.prune_gate, 0.0, 1.0)
        _int("t_max", self.t_max, 1)
        for flag in ("verify", "fallback", "neighbours"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(flag, getattr(self, flag), "True or False")
        _choice("retrieval", self.retrieval, RETRIEVALS)
        if self.max_passages is not None:
            _int("max_passages", self.max_passages, 1, 10_000)
        _int("k_docs", self.k_docs, 1, 10_000)
        _int("passage_tokens", self.passage_tokens, 8, 100_000)
        if not isinstance(self.separator, str):
            raise ConfigError("separator", self.separator, "a str")

    def replace(self, **overrides: Any) -> MeVeConfig:
        """A validated copy with the given fields changed; ``None`` values are ignored."""
        result: MeVeConfig = _replace(self, overrides)
        return result

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (JSON-ready)."""
        return dataclasses.asdict(self)


# What asks about time: a question for a date, a day, a duration or a time relative to now, or one
# that names a date. Bare "may", "first", "last", "time(s)", "before" and "after" are left out: they
# fire on "may I", "the first book", "how many times", "after work" and cost dated lines there.
# Measured on labelled dev questions only (LoCoMo's category 2 and MemoryBank's dated questions; the
# registry's dev splits, benchmarks/fitted/time_detector.json): LoCoMo precision 0.42 -> 0.53 at recall
# 0.99 -> 0.97, MemoryBank 0.78 -> 0.91 at recall 1.0 (BENCHMARKS.md, "Chat memory").
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_TIME = re.compile(
    r"\b(when|what (?:date|day|year|month|week|time)|which (?:date|day|year|month|week)|how long|how many (?:days|weeks|months|years|hours)|"
    r"since when|until when|ago|yesterday|today|tomorrow|tonight|(?:last|next|this) (?:week|month|year|weekend|night|time)|"
    rf"{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}|"
    rf"(?:in|of|since|during|before|after|until)\s+(?:{_MONTH}|\d{{4}})|(?:week|month|year|weekend|day)s? (?:before|after|of)|"
    r"date|dates|dated|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    re.IGNORECASE,
)


def asks_about_time(query: str) -> bool:
    """Whether ``query`` asks about time (a date, a day, a duration, a time relative to now, or
    one it names): ``dates="auto"`` dates the rebuilt lines for such a query only."""
    return _TIME.search(query) is not None


def time_words(query: str) -> str | None:
    """The words that make ``query`` ask about time (what the trace cites), or None."""
    found = _TIME.search(query)
    return found.group(0) if found else None


def _default_weights() -> dict[str, float]:
    # With dates="auto", keep_recent="short" and partner turns worth 0.5: chosen on the dev splits of LoCoMo, SelQA-chat, MemoryBank,
    # RealMem and LongMemEval by the best worst-case margin over plain fills (BENCHMARKS.md, "Chat memory, leave-one-dataset-out").
    return {"bm25": 0.5, "dense": 0.5}


def validate_weights(weights: Any, embedder_names: tuple[str, ...] | None = None) -> dict[str, float]:
    """Check fusion weights: non-negative numbers keyed by 'bm25', 'dense' or an embedder name, summing > 0;
    ``embedder_names=None`` accepts any str key (checked later against the actual embedders)."""
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError("weights", weights, "a non-empty mapping like {'bm25': 0.3, 'dense': 0.7}")
    allowed = ("bm25", "dense", *(embedder_names or ()))
    out: dict[str, float] = {}
    for key, value in weights.items():
        if not isinstance(key, str) or (embedder_names is not None and key not in allowed):
            raise ConfigError(f"weights[{key!r}]", value, "a key among " + ", ".join(repr(a) for a in allowed))
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0:
            raise ConfigError(f"weights[{key!r}]", value, "a finite number >= 0")
        out[key] = float(value)
    total = sum(out.values())
    if not total > 0 or math.isinf(total):
        raise ConfigError("weights", dict(weights), "weights whose sum is a finite number > 0")
    return out


_KEEP_RECENT = "True, False, 'short' (a follow-up: at most six words, or nothing earlier bears on it) or 'auto' (a follow-up by its words)"


@strict
@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Settings of Momentary Contexts reconstruction (Jeong, 2024).

    Attributes:
        top_k: at most this many past turns chosen by hybrid relevance (besides the recent ones);
            None (default) fills ``l_max`` in fused-priority order.
        l_max: hard token budget of the rebuilt context.
        recent_turns: how many of the most recent turns are kept first (with ``keep_recent``): 2,
            the latest exchange (the user's last turn and the reply next to it), so "Continue" or
            "Summarize your last answer" always gets the reply it follows.
        fusion: "weighted" (min-max normalised weighted sum, eq. 12-13) or "rrf" (eq. 14).
        weights: per-signal weights: 'bm25', 'dense' (all embedders) or an embedder's name.
        rrf_k: the RRF damping constant.
        max_turn_chars: longest turn accepted (longer raises InputError).
        max_clock_skew_s: a timestamp further than this ahead of the clock is refused (one turn from
            the future would make every later turn look out of order); also the window in which turns
            from other processes are looked for.
        stemming: BM25 over English Snowball stems (PyStemmer) instead of plain words.
        partner_turns: a turn recalled by relevance brings its partner (the adjacent turn by the
            other role: the reply, or the question) in as a candidate of its own.
        partner_weight: how much of a partner turn's worth comes from its anchor: ``partner_weight``
            x the anchor's score + (1 - ``partner_weight``) x its own (its own alone if higher); it
            takes budget only from turns worth less. 1.0: right after its anchor; 0.0: its own score.
        dates: every rendered line carries its turn's date (``[2023-05-08] user: ...``, counted in
            ``l_max``), so a model can answer "when" questions about recalled turns; "auto" dates
            the lines only for a query that asks about time (:func:`asks_about_time`), so other
            queries spend those tokens on turns.
        keep_recent: "short" (default) keeps the ``recent_turns`` most recent turns before anything
            else for a query that leans on them (:func:`meve.memory.decide.leans_on_latest`): one of
            at most six words ("Continue", "Translate to French"), or one no turn before them is
            about: none near (``follow_up_cosine``), or, with no cosine, none holds a word of it
            ("Can you turn that into a checklist?"); any other competes by relevance. True keeps them
            for every query (the paper's anchor; see ``recent_share``); "auto" (0.2.0's) only for a
            query that reads as a follow-up (:func:`meve.memory.decide.follow_up_words`); False never.
            A kept turn longer than the room left is cut to its part the query matches, marked.
        recent_share: with ``keep_recent=True``, for a query of its own subject, each kept recent turn
            keeps at most this share of ``l_max`` of its text, cut to its part the query matches (or its
            end); a query that leans on them gets them whole when they fit, or half of ``l_max`` each
            when a turn before them is about it too ("What am I allergic to?"). 1.0: whole, always.
        follow_up_cosine: a query of more than six words whose best cosine with a turn before
            the latest exchange is below this finds nothing there to be about, so it leans on
            that exchange ("Please rewrite the whole thing in a friendlier tone"); at or above it,
            the query is about that turn, shared word or not ("allergy", "allergic"). A cosine of the
            first embedder, 0.3 chosen for the default all-MiniLM-L6-v2 on the memory sets' dev splits
            and follow-up probes (BENCHMARKS.md, "The latest exchange"); another embedder: its own, or None.
        role_cue: a query in the first person alone ("what do I ...", "my ...") asks about the
            user's own turns, one in the second person alone ("what did you ...") about the
            assistant's: the other roles' fused scores count half for that query
            (:func:`meve.memory.decide.decide_role`). A query in both persons, or neither, is
            left alone. False: never.
        query_sentences: a query of three or more sentences (a chat message that says several
            things) is also matched sentence by sentence: each turn's vector score is half its
            cosine with the whole query and half its best cosine with one of the sentences
            (:func:`meve.memory.decide.decide_parts`; one more embedding pass per sentence, in
            the same batch). Shorter queries are matched whole. False: always whole.
        user_statements: of the two turns nearest the query by the first embedder's vector, the
            user's at or above ``follow_up_cosine`` go in before the relevance fill, whole, within half
            of ``l_max`` (:func:`meve.memory.signals.stated`): "I can't stand horror films" for "Recommend a film".
        cap_turns: a turn recalled by relevance (or as a partner) that fits the room left but whose line is over half of
            ``l_max`` comes in as its part the query matches, of that size, so it cannot take the room of shorter ones
            ranked after it; the best of the ranking comes in whole. False: whole or not at all (the paper's fill).
    """

    top_k: int | None = None
    l_max: int = 1024
    recent_turns: int = 2
    fusion: Fusion = "weighted"
    weights: Mapping[str, float] = field(default_factory=_default_weights)
    rrf_k: int = 60
    max_turn_chars: int = 4_000_000
    max_clock_skew_s: float = 300.0
    stemming: bool = True
    partner_turns: bool = True
    partner_weight: float = 0.5
    dates: bool | Literal["auto"] = "auto"
    keep_recent: bool | Literal["auto", "short"] = "short"
    recent_share: float = 0.0625
    follow_up_cosine: float | None = 0.3
    role_cue: bool = True
    query_sentences: bool = True
    user_statements: bool = True
    cap_turns: bool = True

    def __post_init__(self) -> None:
        if self.top_k is not None:
            _int("top_k", self.top_k, 0, 10_000)
        _int("l_max", self.l_max, 1)
        _int("recent_turns", self.recent_turns, 0, 1_000)
        _choice("fusion", self.fusion, FUSIONS)
        object.__setattr__(self, "weights", validate_weights(self.weights))
        _int("rrf_k", self.rrf_k, 0)
        _int("max_turn_chars", self.max_turn_chars, 1)
        _float("max_clock_skew_s", self.max_clock_skew_s, 0.0, 86_400.0)
        _float("partner_weight", self.partner_weight, 0.0, 1.0)
        _float("recent_share", self.recent_share, 0.0, 1.0, low_open=True)
        cos = self.follow_up_cosine
        if cos is not None and (isinstance(cos, bool) or not isinstance(cos, int | float) or not -1.0 <= cos <= 1.0):
            raise ConfigError("follow_up_cosine", cos, "a cosine in [-1, 1], or None (off)")
        for flag in ("stemming", "partner_turns", "role_cue", "query_sentences", "user_statements", "cap_turns"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(flag, getattr(self, flag), "True or False")
        if not isinstance(self.dates, bool) and self.dates != "auto":
            raise ConfigError("dates", self.dates, "True, False or 'auto' (dated lines only for a query about time)")
        if not isinstance(self.keep_recent, bool) and self.keep_recent not in ("auto", "short"):
            raise ConfigError("keep_recent", self.keep_recent, _KEEP_RECENT)

    def replace(self, **overrides: Any) -> MemoryConfig:
        """A validated copy with the given fields changed; ``None`` values are ignored."""
        result: MemoryConfig = _replace(self, overrides)
        return result
