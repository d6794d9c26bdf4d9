"""Constrained title generation with a tiny randomly initialised GPT-2 built here: whatever the
weights, every generated title must be a real one (its outputs are otherwise meaningless)."""

from __future__ import annotations

import pytest

from meve.mindref.locate import TitleTrie

pytestmark = pytest.mark.integration

TITLES = ["Eiffel Tower", "Mount Everest", "Banana", "Bicycle", "Safety bicycle", "Karl Drais", "Tour de France"]


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TITLES * 3 + ["question: which title? answer:"], trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<pad>", "</s>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="</s>")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_generated_title_is_real(seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    tok = _tokenizer()
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2, n_head=2, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    )
    model.eval()
    trie = TitleTrie(TITLES, tok)
    prompt = tok("question: which title? answer:", return_tensors="pt").input_ids
    out = model.generate(
        prompt,
        max_new_tokens=12,
        num_beams=4,
        num_return_sequences=4,
        do_sample=False,
        prefix_allowed_tokens_fn=trie.prefix_allowed_tokens_fn(prompt.shape[1]),
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    for seq in out:
        title = trie.title_for(seq[prompt.shape[1] :].tolist())
        assert title in TITLES, tok.decode(seq[prompt.shape[1] :])
