"""The context data sets, each split by the registry into a dev and a test corpus with questions.

Every question carries the evidence as the text the model must read (the sentences that answer
it) and its answer strings; passage ids of the gold passages are kept beside, for the
passage-level figures (labelled as such). Sources and licences: ``benchmarks/DATA.md``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.harness.metrics import normalise
from benchmarks.harness.splits import item_id, parity, squad_halves
from meve.core.text import sentence_spans
from meve.core.tokens import TokenCounter, get_token_counter

__all__ = ["CONTEXT_SETS", "LONG_VARIANTS", "Dataset", "Question", "Split", "external", "load", "long_variant", "pack", "splitter"]

#: Where data brought in with the search tool's ``fetch`` is extracted (ignored by git; see DATA.md).
EXTERNAL = Path(__file__).resolve().parents[1] / ".cache" / "external"
CONTEXT_SETS = ("squad", "hotpotqa", "wikiqa", "selqa", "msmarco", "covidqa")
#: Long-chunk variants (issue 52): chunks as the frameworks' usual splitters cut a document, by
#: meve's token counter. LlamaIndex's SentenceSplitter at its default chunk_size (1024) and at
#: 512, both with its default overlap (200); LangChain's RecursiveCharacterTextSplitter at 1000
#: tokens, overlap 200 (its default separators: paragraph, line, word).
LONG_VARIANTS = ("llamaindex-1024", "llamaindex-512", "langchain-1000")
YES_NO = {"yes", "no"}


@dataclass(frozen=True)
class Question:
    """One question: registry id, text, answer strings, evidence sentences (text), gold passage ids."""

    id: str
    text: str
    answers: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    gold: frozenset[str] = frozenset()


@dataclass
class Split:
    """One split's corpus (passage ids and texts) and its questions; ``documents`` are the texts
    the passages were cut from, (id, text) in corpus order, for the long-chunk variants."""

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    documents: list[tuple[str, str]] = field(default_factory=list)

    def add(self, pid: str, text: str) -> None:
        """Add a passage once (a passage several questions share is indexed once)."""
        if pid not in self._known:
            self._known.add(pid)
            self.ids.append(pid)
            self.texts.append(text)

    def __post_init__(self) -> None:
        self._known: set[str] = set(self.ids)

    def __contains__(self, pid: object) -> bool:
        return pid in self._known


@dataclass
class Dataset:
    """A data set's dev and test splits, and what its evidence is."""

    name: str
    evidence: str
    source: str
    splits: dict[str, Split]


def _sample(questions: list[Question], limit: int | None) -> list[Question]:
    # A fixed sample: questions in sha256 order of their id, so reruns and other machines agree.
    ordered = sorted(questions, key=lambda q: hashlib.sha256(q.id.encode()).hexdigest())
    return ordered[:limit] if limit is not None else ordered


def squad(data: Path, limit: int | None) -> Dataset:
    """SQuAD v1.1 dev: each half's paragraphs are its corpus; the evidence is the sentence holding the answer span."""
    with gzip.open(data / "train" / "squad" / "squad-v1.1-dev.explorer.json.gz", "rt", encoding="utf-8") as fh:
        articles = json.load(fh)["data"]
    halves = squad_halves(a["title"] for a in articles)
    splits = {"dev": Split(), "test": Split()}
    for a in articles:
        part = splits[halves[a["title"]]]
        part.documents.append((a["title"], "\n\n".join(p["context"] for p in a["paragraphs"])))
        for i, p in enumerate(a["paragraphs"]):
            pid, text = f"{a['title']}#{i}", p["context"]
            part.add(pid, text)
            spans = sentence_spans(text)
            for qa in p["qas"]:
                start = qa["answers"][0]["answer_start"]
                end = start + len(qa["answers"][0]["text"])
                sent = [text[x:y] for x, y in spans if x <= start < y or x < end <= y]
                answers = tuple(sorted({x["text"] for x in qa["answers"]}))
                part.questions.append(Question(item_id("squad", a["title"], qa["id"]), qa["question"], answers, tuple(sent), frozenset([pid])))
    for part in splits.values():
        part.questions = _sample(part.questions, limit)
    return Dataset("squad", "the sentence holding the answer span", "SQuAD v1.1 dev (CC BY-SA 4.0), shared/data/train/squad", splits)


def hotpotqa(data: Path, limit: int | None) -> Dataset:
    """HotpotQA dev (distractor): each split's corpus is its questions' paragraphs as "title: text";
    the evidence is the supporting sentences."""
    raw = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_500_factoid.orig.json").read_text())
    raw += json.loads((data / "hotpotqa" / "hotpot_dev_distractor_v1_first103.json").read_text())
    splits = {"dev": Split(), "test": Split()}
    seen: set[str] = set()
    for q in raw:
        if q["_id"] in seen:
            continue
        seen.add(q["_id"])
        part = splits[parity(q["_id"])]
        ctx = {t: s for t, s in q["context"]}
        new = [(title, f"{title}: {' '.join(sents)}") for title, sents in q["context"] if title not in part]
        if new:  # a question's candidate paragraphs not already placed: the nearest thing to a document
            part.documents.append((q["_id"], "\n\n".join(text for _, text in new)))
        for title, sents in q["context"]:
            part.add(title, f"{title}: {' '.join(sents)}")
        evidence = tuple(ctx[t][i].strip() for t, i in q["supporting_facts"] if t in ctx and i < len(ctx[t]))
        answers = () if str(q["answer"]).lower() in YES_NO else (str(q["answer"]),)
        gold = frozenset(t for t, _ in q["supporting_facts"])
        part.questions.append(Question(item_id("hotpotqa", q["_id"], q["_id"]), q["question"], answers, evidence, gold))
    for part in splits.values():
        part.questions = _sample(part.questions, limit)
    return Dataset("hotpotqa", "the supporting sentences", "HotpotQA dev, distractor setting (CC BY-SA 4.0), shared/data/hotpotqa", splits)


def wikiqa(data: Path, limit: int | None) -> Dataset:
    """WikiQA (official dev and test files): each split's Wikipedia summaries, cut into chunks of
    <= 150 tokens, are its corpus; the evidence is the answer sentences (questions with at least one)."""
    counter = get_token_counter()
    splits = {}
    for name in ("dev", "test"):
        with gzip.open(data / "train" / "wikiqa" / f"WikiQA-{name}.tsv.gz", "rt", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
        part = Split()
        docs: dict[str, tuple[str, list[str]]] = {}
        for r in rows:
            docs.setdefault(r["DocumentID"], (r["DocumentTitle"], []))[1].append(r["Sentence"])
        chunk_of: dict[tuple[str, str], str] = {}
        for did, (title, sents) in docs.items():
            part.documents.append((did, f"{title}: {' '.join(sents)}"))
            # Summaries run to ~300 tokens, past MiniLM's 256: chunked as SelQA's sections are, sentences kept whole.
            for j, (a, b) in enumerate(sentence_chunks(sents, counter)):
                part.add(f"{did}#{j}", f"{title}: {' '.join(sents[a:b])}")
                chunk_of.update({(did, s): f"{did}#{j}" for s in sents[a:b]})
        by_q: dict[str, list[dict[str, str]]] = {}
        for r in rows:
            by_q.setdefault(r["QuestionID"], []).append(r)
        for qid, rs in by_q.items():
            evidence = tuple(r["Sentence"] for r in rs if r["Label"] == "1")
            gold = frozenset(chunk_of[(r["DocumentID"], r["Sentence"])] for r in rs if r["Label"] == "1")
            if evidence:
                part.questions.append(Question(item_id("wikiqa", name, qid), rs[0]["Question"], (), evidence, gold))
        part.questions = _sample(part.questions, limit)
        splits[name] = part
    return Dataset("wikiqa", "the answer sentences", "WikiQA (Microsoft Research Data License, research use), shared/data/train/wikiqa", splits)


def sentence_chunks(sentences: Sequence[str], counter: TokenCounter, max_tokens: int = 150) -> list[tuple[int, int]]:
    """Consecutive sentences grouped into chunks of at most ``max_tokens`` tokens (as a user chunks
    a long section or article: WikiQA, SelQA, COVID-QA), as [start, end) sentence ranges; a
    sentence is never cut."""
    out: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, s in enumerate(sentences):
        n = counter.count(s) + 1
        if i > start and used + n > max_tokens:
            out.append((start, i))
            start, used = i, 0
        used += n
    out.append((start, len(sentences)))
    return out


def selqa(limit: int | None, root: Path = EXTERNAL / "selqa") -> Dataset:
    """SelQA answer sentence selection (official dev and test files): each split's Wikipedia
    sections, cut into chunks of <= 150 tokens, are its corpus; the evidence is the answer sentences."""
    counter = get_token_counter()
    splits = {}
    for name in ("dev", "test"):
        items = json.loads(external(root / f"selqa-ass-{name}.json").read_text())
        part = Split()
        for i, x in enumerate(items):
            key = f"{x['article']}/{x['section']}"
            cands = [c for c in x["candidates"] if c.strip()]  # SelQA holds a few empty candidates
            keep = [k for k, c in enumerate(x["candidates"]) if c.strip()]
            if f"{key}#0" not in part:  # a section's sentences, once
                part.documents.append((key, " ".join(cands)))
            answers = [keep.index(k) for k in x["answers"] if k in keep]
            gold = set()
            for j, (a, b) in enumerate(sentence_chunks(cands, counter)):
                part.add(f"{key}#{j}", " ".join(cands[a:b]))
                if any(a <= k < b for k in answers):
                    gold.add(f"{key}#{j}")
            evidence = tuple(cands[k] for k in answers)
            if not evidence:
                continue
            part.questions.append(Question(item_id("selqa", name, str(i)), x["question"], (), evidence, frozenset(gold)))
        part.questions = _sample(part.questions, limit)
        splits[name] = part
    source = "SelQA answer sentence selection (Apache-2.0), emorynlp/selqa@fef3d6a, ass/selqa-ass-{dev,test}.json"
    return Dataset("selqa", "the answer sentences", source, splits)


def msmarco(data: Path, limit: int | None) -> Dataset:
    """The MS MARCO passage sample (600 dev.small queries x BM25 top-20, qrels): each split's
    passages are its corpus; relevance is labelled per passage, so the evidence is every sentence
    of the relevant passages (a pruned passage counts by the share of its sentences kept)."""
    splits = {"dev": Split(), "test": Split()}
    with tarfile.open(data / "train" / "msmarco_tomjg14_assessed" / "msmarco-dev600-bm25top20-firebase.tar.gz") as tar:
        for member in tar.getmembers():
            if not (member.isfile() and "/sampled_files/" in member.name and member.name.endswith(".json")):
                continue
            fh = tar.extractfile(member)
            rows = json.load(io.TextIOWrapper(fh, encoding="utf-8")) if fh is not None else []
            qid = str(rows[0]["query_id"])
            part = splits[parity(qid)]
            new = [r["passage_text"] for r in rows if str(r["passage_id"]) not in part]
            if new:  # a query's BM25 candidates not already placed: the nearest thing to a document
                part.documents.append((qid, "\n\n".join(new)))
            for r in rows:
                part.add(str(r["passage_id"]), r["passage_text"])
            relevant = [r for r in rows if float(r["relevance_label"]) >= 1.0]
            if relevant:
                evidence = tuple(r["passage_text"][a:b] for r in relevant for a, b in sentence_spans(r["passage_text"]))
                gold = frozenset(str(r["passage_id"]) for r in relevant)
                part.questions.append(Question(item_id("msmarco", qid, qid), rows[0]["query_text"], (), evidence, gold))
    for part in splits.values():
        part.questions = _sample(part.questions, limit)
    source = (
        "MS MARCO passage ranking, 600 dev.small queries x BM25 top-20 (MS MARCO terms: non-commercial research), shared/data/train/msmarco_tomjg14_assessed"
    )
    return Dataset("msmarco", "every sentence of the relevant passages", source, splits)


def covidqa(limit: int | None, root: Path = EXTERNAL / "covidqa") -> Dataset:
    """COVID-QA (SQuAD format, scientific articles): each split's articles, cut into chunks of
    <= 150 tokens of whole sentences, are its corpus; the evidence is every sentence the answer
    span touches (its spans often run over several)."""
    counter = get_token_counter()
    articles = json.loads(external(root / "200423_covidQA.json").read_text())["data"]
    splits = {"dev": Split(), "test": Split()}
    for a in articles:
        for p in a["paragraphs"]:
            doc, text = str(p["document_id"]), p["context"]
            part = splits[parity(doc)]
            part.documents.append((doc, text))
            spans = sentence_spans(text)
            sents = [text[x:y] for x, y in spans]
            chunk_of: list[str] = []
            for j, (lo, hi) in enumerate(sentence_chunks(sents, counter)):
                part.add(f"{doc}#{j}", " ".join(sents[lo:hi]))
                chunk_of += [f"{doc}#{j}"] * (hi - lo)
            for qa in p["qas"]:
                ans = qa["answers"][0]
                start, end = ans["answer_start"], ans["answer_start"] + len(ans["text"])
                hit = [k for k, (x, y) in enumerate(spans) if x < end and start < y]
                if not hit or qa.get("is_impossible"):
                    continue
                answers = tuple(sorted({x["text"].strip() for x in qa["answers"]}))
                gold = frozenset(chunk_of[k] for k in hit)
                part.questions.append(Question(item_id("covidqa", doc, str(qa["id"])), qa["question"], answers, tuple(sents[k] for k in hit), gold))
    for part in splits.values():
        part.questions = _sample(part.questions, limit)
    source = "COVID-QA (Apache-2.0), deepset-ai/COVID-QA@fb2eb5e, data/question-answering/200423_covidQA.json"
    return Dataset("covidqa", "every sentence the answer span touches", source, splits)


def splitter(variant: str, counter: TokenCounter) -> Callable[[str], list[str]]:
    """The framework splitter a long-chunk variant names, counting with ``counter``."""
    framework, size = variant.split("-")
    if framework == "llamaindex":
        from llama_index.core.node_parser import SentenceSplitter

        # SentenceSplitter measures len(tokenizer(text)); meve's count stands in for its tiktoken.
        return SentenceSplitter(chunk_size=int(size), tokenizer=lambda text: range(counter.count(text))).split_text  # type: ignore[no-any-return]
    if framework == "langchain":
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        return RecursiveCharacterTextSplitter(chunk_size=int(size), chunk_overlap=200, length_function=counter.count).split_text
    raise ValueError(f"unknown long-chunk variant {variant!r}; known: {', '.join(LONG_VARIANTS)}")


def pack(documents: Sequence[tuple[str, str]], size: int, counter: TokenCounter) -> list[tuple[str, str]]:
    """Consecutive documents joined by a blank line while the join stays within ``size`` tokens
    (short documents: WikiQA summaries, SelQA sections, a HotpotQA question's paragraphs, an MS
    MARCO query's passages), as (id of the first, text); a longer document stays alone."""
    out: list[tuple[str, str]] = []
    ids: list[str] = []
    texts: list[str] = []
    used = 0
    for doc_id, text in documents:
        n = counter.count(text)
        if texts and used + n + 1 > size:
            out.append((ids[0], "\n\n".join(texts)))
            ids, texts, used = [], [], 0
        ids.append(doc_id)
        texts.append(text)
        used += n + (1 if used else 0)
    if texts:
        out.append((ids[0], "\n\n".join(texts)))
    return out


def long_variant(ds: Dataset, variant: str, counter: TokenCounter | None = None) -> Dataset:
    """``ds`` with each split's corpus rebuilt from its documents: packed up to the variant's size
    (:func:`pack`), then cut by the variant's splitter. Questions, answers and evidence sentences
    are the same (evidence still counts by text); a chunk is gold when an evidence sentence stands
    whole in it. Build it after cutting the questions to the ones run: finding gold chunks reads
    every chunk once per evidence sentence."""
    counter = counter or get_token_counter()
    cut = splitter(variant, counter)
    size = int(variant.split("-")[1])
    splits = {}
    for name, part in ds.splits.items():
        chunks = [(f"{doc_id}#{variant}-{j}", c) for doc_id, text in pack(part.documents, size, counter) for j, c in enumerate(cut(text))]
        found = [(pid, normalise(c)) for pid, c in chunks]
        questions = [replace(q, gold=frozenset(pid for pid, c in found if any(normalise(e) in c for e in q.evidence)), id=q.id) for q in part.questions]
        splits[name] = Split([pid for pid, _ in chunks], [c for _, c in chunks], questions, list(part.documents))
    return Dataset(ds.name, ds.evidence, f"{ds.source}; {variant} chunks", splits)


def external(path: Path) -> Path:
    """A file brought in with ``fetch`` and extracted under benchmarks/.cache/external (DATA.md says how)."""
    if not path.exists():
        raise SystemExit(f"{path} is missing: extract it as benchmarks/DATA.md says (a snapshot fetched with the search tool)")
    return path


def load(name: str, data: Path, limit: int | None = None) -> Dataset:
    """One context data set by name (``limit``: questions per split, a fixed sample)."""
    if name == "squad":
        return squad(data, limit)
    if name == "hotpotqa":
        return hotpotqa(data, limit)
    if name == "wikiqa":
        return wikiqa(data, limit)
    if name == "selqa":
        return selqa(limit)
    if name == "msmarco":
        return msmarco(data, limit)
    if name == "covidqa":
        return covidqa(limit)
    raise ValueError(f"unknown data set {name!r}; known: {', '.join(CONTEXT_SETS)}")
