"""Prompt construction and word selection with a fake tokenizer (no torch, no model)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from icl_cmr.adapters import prompts
from icl_cmr.adapters.errors import PromptError


class FakeTokenizer:
    """Word-level tokenizer: id -> text; ' rabbit' splits into two tokens (' rab', 'bit')."""

    def __init__(self):
        self.vocab = ["<s>", " the", " cat", " dog", "dog", " 42", " a", " rab", "bit", " sun", " é", " tree"]
        self.all_special_ids = [0]

    def __len__(self):
        return len(self.vocab)

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

    def encode(self, text, add_special_tokens=False):
        if text == " rabbit":
            return [7, 8]
        return [self.vocab.index(text)] if text in self.vocab else [0]


def _prior(values):
    return np.log(np.asarray(values, dtype=float))


def test_select_words_takes_usable_words_by_prior_with_ties_by_id():
    tok = FakeTokenizer()
    #            <s>  the  cat  dog  dog  42   a   rab  bit  sun  é    tree
    prior = _prior([.9, .05, .2, .2, .3, .3, .3, .3, .3, .01, .3, .1])
    ids, words = prompts.select_words(tok, prior, 4)
    # 'dog' (no space), ' 42', ' a' (one letter), 'bit', ' é' (not ASCII) and <s> are rejected;
    # cat and dog tie at 0.2: the lower id comes first
    assert words == (" rab", " cat", " dog", " tree")
    assert ids.tolist() == [7, 2, 3, 11] and ids.dtype == np.int64


def test_n_words_larger_than_the_usable_vocabulary_is_a_prompt_error():
    tok = FakeTokenizer()
    prior = np.zeros(len(tok))
    assert len(prompts.select_words(tok, prior, 6)[0]) == 6  # the, cat, dog, rab, sun, tree
    with pytest.raises(PromptError, match="n_words=7 is larger than the usable vocabulary: .* only 6"):
        prompts.select_words(tok, prior, 7)
    with pytest.raises(PromptError, match="n_words must be an integer >= 2"):
        prompts.select_words(tok, prior, 1)


def test_check_single_tokens_names_the_offending_word():
    tok = FakeTokenizer()
    prompts.check_single_tokens(tok, [2, 3], [" cat", " dog"])
    with pytest.raises(PromptError, match="exactly one token; 1 are not: ' rabbit' -> \\[7, 8\\]"):
        prompts.check_single_tokens(tok, [2, 7], [" cat", " rabbit"])


def test_prompt_layout_is_bos_and_two_copies_of_a_seeded_permutation():
    word_ids = np.array([10, 11, 12, 13, 14])
    made = prompts.build_prompts(word_ids, list("abcde"), n_prompts=3, rng=7, bos_id=1, n_ctx=11)
    assert made.tokens.shape == (3, 11) and made.tokens.dtype == np.int64
    assert (made.tokens[:, 0] == 1).all()
    np.testing.assert_array_equal(made.tokens[:, 1:6], made.tokens[:, 6:])
    np.testing.assert_array_equal(made.tokens[:, 1:6], word_ids[made.permutations])
    for perm in made.permutations:
        assert sorted(perm.tolist()) == [0, 1, 2, 3, 4]
    again = prompts.build_prompts(word_ids, list("abcde"), n_prompts=5, rng=7, bos_id=1, n_ctx=11)
    np.testing.assert_array_equal(again.tokens[:3], made.tokens)  # more prompts extend the set
    other = prompts.build_prompts(word_ids, list("abcde"), n_prompts=3, rng=8, bos_id=1, n_ctx=11)
    assert not np.array_equal(other.tokens, made.tokens)
    assert made.n_words == 5 and made.n_prompts == 3


def test_prompt_longer_than_the_context_is_a_prompt_error():
    with pytest.raises(PromptError, match="2 x 5 words \\+ BOS = 11 tokens is longer than the model's context of 10"):
        prompts.build_prompts(np.arange(5), list("abcde"), n_prompts=1, rng=0, bos_id=0, n_ctx=10)
    with pytest.raises(PromptError, match="n_prompts must be an integer >= 1"):
        prompts.build_prompts(np.arange(5), list("abcde"), n_prompts=0, rng=0, bos_id=0, n_ctx=20)


def test_prompt_and_profile_modules_do_not_import_torch():
    code = (
        "import sys, icl_cmr.adapters.prompts, icl_cmr.adapters.head_profiles, icl_cmr.adapters.lm.extraction; "
        "bad = [m for m in ('torch', 'transformers', 'transformer_lens') if m in sys.modules]; "
        "sys.exit(str(bad) if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
