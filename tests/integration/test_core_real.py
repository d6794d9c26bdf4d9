"""The core with real models: all-MiniLM-L6-v2 (offline package), real Chroma, and the real
sentence-transformers CrossEncoder code path through a tiny BERT built by the tests."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from meve import ConfigError, CrossEncoderScorer, MeVe, MeVeConfig
from meve.cli.commands import demo_corpus
from meve.retrieval.chroma import chroma_client
from meve.scoring.cosine import CosineScorer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(minilm):
    corpus = demo_corpus()["passages"]
    return MeVe.from_texts([p["text"] for p in corpus], ids=[p["id"] for p in corpus], embedder=minilm, config=MeVeConfig(k_init=8, t_max=120))


def test_meve_on_real_minilm_removes_duplicates_and_respects_the_budget(demo):
    base = demo.baseline("How do pneumatic tyres make cycling more comfortable?", k=8)
    r = demo.run("How do pneumatic tyres make cycling more comfortable?")
    ids = [d.id for d in r.documents]
    assert ids[0] == "dunlop"
    assert "dunlop-dup" not in ids  # near-duplicate of the higher-ranked 'dunlop'
    assert any(d.id == "dunlop-dup" and "near-duplicate of dunlop" in d.reason for d in r.phase("prioritise").dropped)
    assert r.token_count <= 120 < base.token_count
    assert r.phase("verify").info["scorer"] == "late-interaction:all-MiniLM-L6-v2"  # the default, no scorer given


def test_fallback_tops_up_to_n_min_with_lexical_hits_the_verifier_did_not_keep(demo):
    # The verifier keeps only "frame" of the 2 dense candidates, so the BM25 fallback runs; it must
    # not re-add what was verified, and it adds only BM25 hits the verifier does not reject.
    # The paper's phases (tau 0.5, no adaptive cut, n_min 3): what the cut leaves out is never re-added.
    r = demo.run("history of the bicycle frame", k_init=2, tau=0.5, cut="none", n_min=3)
    assert r.phase("verify").kept == ("frame",)
    fb = r.phase("fallback")
    assert fb.info["triggered"] is True and fb.info["added"] and "frame" not in fb.info["added"]
    assert len(fb.kept) == 1 + len(fb.info["added"]) >= 3
    added = [d for d in r.documents if d.id in fb.info["added"]]
    assert added and all(d.source == "fallback" and d.relevance >= 0.1 for d in added)  # fallback_tau; outside the dense top-2, so never scored in phase 2


def test_fallback_refuses_bm25_hits_the_verifier_rejects(demo):
    # The old fallback padded this context with frame and draisine-3 (BM25 hits on "bicycle").
    r = demo.run("When was the safety bicycle introduced?", k_init=2, tau=0.5, cut="none", n_min=3)
    assert r.phase("verify").kept == ("safety-bicycle",)
    fb = r.phase("fallback")
    assert fb.info["triggered"] is True and fb.info["added"] == []
    assert {d.id for d in fb.dropped} >= {"frame", "draisine-3"}
    assert all("rejected by the verifier" in d.reason for d in fb.dropped)
    assert [d.id for d in r.documents] == ["safety-bicycle"]
    padded = demo.run("When was the safety bicycle introduced?", k_init=2, tau=0.5, cut="none", n_min=3, fallback_tau=0.0)
    assert {"frame", "draisine-3"} <= set(padded.phase("fallback").info["added"])


def test_novelty_mode_on_real_embeddings(demo):
    r = demo.run("Who invented the first bicycle?", prioritisation="novelty", t_max=400)
    ids = [d.id for d in r.documents]
    assert len(ids) == len(set(ids)) and r.token_count <= 400
    assert not ({"draisine-1", "draisine-2"} <= set(ids))


def test_persistent_chroma_reopened_in_a_new_client(minilm, chroma_dir):
    corpus = demo_corpus()["passages"]
    MeVe.from_texts([p["text"] for p in corpus], ids=[p["id"] for p in corpus], client=chroma_client(chroma_dir), collection_name="bikes", embedder=minilm)
    again = MeVe.from_chroma(chroma_client(chroma_dir).get_collection("bikes"), embedder=minilm, scorer=CosineScorer(minilm))
    assert again.store.count() == len(corpus)
    assert again.run("What does the derailleur do?").documents[0].id == "derailleur"


def test_cross_encoder_code_path_with_a_tiny_bert(tiny_cross_encoder, minilm):
    """The tiny BERT is random: its scores mean nothing. What is checked is the code path."""
    from sentence_transformers import CrossEncoder

    scorer = CrossEncoderScorer(tiny_cross_encoder, batch_size=4)
    passages = ["short", "a much longer passage " * 20, "medium length passage here", "x"]
    got = scorer.score("query", passages)
    assert got.shape == (4,) and np.all((got >= 0) & (got <= 1))
    # Length-sorted batching returns scores in input order, equal to a plain predict with sigmoid.
    ref = CrossEncoder(tiny_cross_encoder, device="cpu").predict([("query", p) for p in passages])
    assert np.allclose(got, np.asarray(ref, dtype=np.float64), atol=1e-5)  # num_labels=1 defaults to sigmoid
    # A max_length cap above every pair's length changes nothing.
    assert np.allclose(scorer.score("query", passages[::2], max_length=500), got[::2], atol=1e-5)
    # Batches capped in padded tokens: more forward passes, the long passage alone, the same scores.
    sizes: list[int] = []
    for cap, expected in ((None, [4]), (64, [3, 1])):
        capped = CrossEncoderScorer(tiny_cross_encoder, batch_tokens=cap)
        model, sizes[:] = capped.model, []
        real = model.predict
        model.predict = lambda pairs, _real=real, **kw: (sizes.append(len(pairs)), _real(pairs, **kw))[1]
        try:
            assert np.allclose(capped.score("query", passages), got, atol=1e-5)
        finally:
            del model.predict
        assert sizes == expected
    with pytest.raises(ConfigError, match="batch_tokens"):
        CrossEncoderScorer("no/such-model", batch_tokens=0)
    assert scorer.pairs_scored == 6
    corpus = demo_corpus()["passages"]
    m = MeVe.from_texts([p["text"] for p in corpus], embedder=minilm, scorer=scorer, config=MeVeConfig(k_init=5, tau=0.0))
    r = m.run("derailleur gears")
    assert r.phase("verify").info["scorer"] == f"cross-encoder:{tiny_cross_encoder}"
    assert r.phase("verify").info["pairs_scored"] == 5


def test_a_cross_encoder_scores_a_passage_past_its_length_by_its_best_window(tiny_cross_encoder_sharp):
    """Issue 52: a pair longer than the model reads was truncated, so the passage's tail never
    counted. The tiny BERT is random: what is checked is that the tail is read, not what it means."""
    import torch
    from sentence_transformers import CrossEncoder

    from meve.scoring.windows import text_windows

    query = "What does a derailleur do?"
    scorer = CrossEncoderScorer(tiny_cross_encoder_sharp, max_length=64)
    head = "Chains and gears wear together, so they are cleaned and oiled together. " * 6  # ~90 pieces
    tails = ["A derailleur moves the chain between sprockets.", "Sourdough rises thanks to wild yeast."]
    one, two = scorer.score(query, [head + tails[0], head + tails[1]])
    assert abs(one - two) > 0.01  # the same first 64 pieces: equal when only they were read
    # The score is the best of the passage's windows, each a pair within the 64 pieces it reads.
    tokenizer = scorer.model.tokenizer
    room = 64 - 3 - len(tokenizer(query, add_special_tokens=False)["input_ids"])  # [CLS] query [SEP] window [SEP]
    windows = text_windows(tokenizer, head + tails[1], room)
    assert len(windows) > 1 and windows[-1].endswith(tails[1])
    assert all(len(tokenizer(query, w)["input_ids"]) <= 64 for w in windows)
    raw = CrossEncoder(tiny_cross_encoder_sharp, device="cpu").predict([(query, w) for w in windows], activation_fn=torch.nn.Sigmoid())
    assert two == pytest.approx(float(np.max(raw)), abs=1e-5)
    assert scorer.pairs_scored == 2  # pairs of query and passage, however many windows each took


def test_cli_index_query_and_demo(tmp_path, minilm, capsys):
    from meve.cli import main

    docs = tmp_path / "docs.jsonl"
    docs.write_text("\n".join(json.dumps({"id": p["id"], "text": p["text"], "title": p["title"]}) for p in demo_corpus()["passages"]))
    notes = tmp_path / "notes.md"
    notes.write_text("Chain lubrication keeps the drivetrain quiet. Clean the chain before oiling it.\n\nA dry chain wears sprockets faster.")
    db = str(tmp_path / "db")
    assert main(["index", str(docs), str(notes), "--db", db]) == 0
    assert "indexed 19 chunks from 2 file(s)" in capsys.readouterr().out
    assert main(["query", "Why keep the chain lubricated?", "--db", db, "--json", "--t-max", "80"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["documents"][0]["id"].startswith("notes.md#")
    assert out["token_count"] <= 80 and [r["phase"] for r in out["trace"]][-1] == "budget"
    assert main(["query", "anything", "--db", db, "--collection", "nope"]) == 2


def test_a_two_logit_cross_encoder_is_scored_by_softmax_and_a_three_way_head_is_refused(tiny_cross_encoder_heads):
    import torch
    from sentence_transformers import CrossEncoder

    passages = ["short", "a longer passage about gears and chains", "x"]
    raw = CrossEncoder(tiny_cross_encoder_heads[2], device="cpu").predict([("query", p) for p in passages], activation_fn=torch.nn.Identity())
    logits = np.asarray(raw, dtype=np.float64)
    softmax = np.exp(logits[:, 1]) / np.exp(logits).sum(axis=1)
    got = CrossEncoderScorer(tiny_cross_encoder_heads[2]).score("query", passages)
    assert np.allclose(got, softmax, atol=1e-5)
    assert not np.allclose(got, 1.0 / (1.0 + np.exp(-logits[:, 1])), atol=1e-3)  # not sigmoid of the last logit
    with pytest.raises(ConfigError, match="has 3"):
        CrossEncoderScorer(tiny_cross_encoder_heads[3]).score("query", passages)


def test_a_length_cap_never_leaks_into_a_concurrent_uncapped_call(tiny_cross_encoder):
    import threading

    scorer = CrossEncoderScorer(tiny_cross_encoder)
    model = scorer.model
    original = model.max_length
    passages = ["a passage long enough that a cap of eight tokens cuts it short " * 3]
    reference = scorer.score("query", passages)
    capped_inside, seen = threading.Event(), []
    real_predict = model.predict

    def predict(pairs, **kwargs):
        seen.append(model.max_length)
        if model.max_length == 8:  # the capped call: give the other thread every chance to run now
            capped_inside.set()
            time.sleep(0.5)
        return real_predict(pairs, **kwargs)

    model.predict = predict
    try:
        capped = threading.Thread(target=scorer.score, args=("query", passages), kwargs={"max_length": 8})
        capped.start()
        capped_inside.wait(timeout=10)
        uncapped = scorer.score("query", passages)
        capped.join()
    finally:
        del model.predict
    assert seen == [8, original]  # the uncapped call waited for the capped one and ran at the model's own length
    assert np.allclose(uncapped, reference) and model.max_length == original


def test_counts_kept_at_ingestion_spare_the_query_and_an_edited_text_is_recounted(minilm, chroma_dir):
    from langchain_meve import MeVeRetriever
    from meve.core.tokens import read_stamp

    texts = [p["text"] for p in demo_corpus()["passages"]][:12]
    meve = MeVe.from_texts(texts, embedder=minilm, client=chroma_client(chroma_dir), collection_name="stamps", scorer="cosine")
    counter = meve.token_counter

    def real_encode(text: str) -> list[list[float]]:
        return minilm.encode([text]).tolist()

    stored = meve.store.collection.get(include=["documents", "metadatas"])
    for text, meta in zip(stored["documents"], stored["metadatas"], strict=True):
        assert read_stamp(meta["meve:tokens:o200k_base"], text) == counter.count(text)

    counted: list[str] = []
    real_count, real_many = counter.count, counter.count_many
    counter.count = lambda t: (counted.append(t), real_count(t))[1]  # type: ignore[method-assign]
    counter.count_many = lambda ts: (counted.extend(ts), real_many(ts))[1]  # type: ignore[method-assign]
    try:
        query = "What does the verifier do?"
        result = meve.run(query, t_max=400)
        assert not set(counted) & set(texts)  # no stored passage counted again
        kept = sum(counter.count(p.text) for p in meve.store.get([p for p in result.trace[0].kept]))
        assert result.trace[0].tokens_out == kept

        # A plain Chroma client edits one candidate's text; its stamp no longer fits and it is recounted.
        first = result.trace[0].kept[0]
        edited = "An edited passage about verifiers " * 5
        meve.store.collection.update(ids=[first], documents=[edited], embeddings=real_encode(edited))
        counted.clear()
        again = meve.run(query, t_max=400)
        assert edited in counted
        assert again.trace[0].tokens_out == sum(real_count(p.text) for p in meve.store.get(list(again.trace[0].kept)))
    finally:
        del counter.count, counter.count_many

    # The stamp is meve's bookkeeping: the LangChain documents do not carry it.
    docs = MeVeRetriever(meve=meve).invoke("What does the verifier do?")
    assert docs and not any(k.startswith("meve:tokens") for d in docs for k in d.metadata)


def test_the_ingestion_progress_bar_shows_passages_per_second(minilm, capsys):
    texts = [f"Passage {i} about bicycle chains, tyres and gears." for i in range(300)]
    MeVe.from_texts(texts, embedder=minilm, show_progress=True, batch_size=100).close()
    bar = capsys.readouterr().err  # not a terminal here: progress lines, not tqdm's redraws (issue 77 #4)
    assert "meve: embedding: 300/300 passages, done in" in bar and "\r" not in bar
    assert "passages/s" in bar  # the rate, read by issue 49's ingestion figures
