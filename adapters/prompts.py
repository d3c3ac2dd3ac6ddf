"""Repeated word-list prompts for reading attention heads as free-recall data.

A prompt is ``BOS + w_1 ... w_N + w_1 ... w_N``: two copies of one seeded random permutation
of N common single-token words, each with a leading space (Ji-An et al. 2024).
The first copy plays "study", the second "recall". Token positions: BOS at 0, the first copy
at ``1..N`` and the second copy at ``N+1..2N``.

Word choice. The paper takes the tokens with the largest unembedding bias. Llama-style models
(SmolLM2, Gemma) have no unembedding bias, so we use the model's own unigram prior instead:
the log-probability of each token as the next token right after BOS alone (one forward pass
of length 1). That is what an unembedding bias encodes in models that have one (the logit
a token gets before any context). Candidates are tokens that decode to a space followed by
2 or more ASCII letters and re-encode to exactly that one token; the N most probable
candidates are the word set (ties broken by token id). See docs/heads.md.

This module never imports torch: the prior comes in as a numpy array and the tokenizer is
used only through ``decode``/``encode``/``convert_ids_to_tokens``-style duck typing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cmr.checks import integer, seed_of
from cmr.deprecation import renamed_keywords

from .errors import PromptError

__all__ = [
    "WORD_RULE",
    "PromptSet",
    "select_words",
    "check_single_tokens",
    "build_prompts",
]

WORD_RULE = (
    "unigram prior: top-N tokens by log p(token | BOS) among tokens that decode to ' ' + "
    ">=2 ASCII letters and re-encode to exactly that one token"
)


@dataclass(frozen=True)
class PromptSet:
    """Token ids of repeated-list prompts and how they were made.

    Attributes
    ----------
    tokens : int64 (n_prompts, 2 * n_words + 1)
        BOS, first copy, second copy.
    permutations : int64 (n_prompts, n_words)
        Index into ``word_ids`` of the word at each serial position (0-based).
    word_ids : int64 (n_words,)
        The word set, most probable first.
    words : tuple of str
        Decoded words (with their leading space), aligned with ``word_ids``.
    seed : int
        The seed the permutations were drawn from.
    selection : str
        How the words were chosen.
    """

    tokens: np.ndarray
    permutations: np.ndarray
    word_ids: np.ndarray
    words: tuple
    seed: int
    selection: str = WORD_RULE
    settings: dict = field(default_factory=dict)

    @property
    def n_words(self) -> int:
        return int(self.word_ids.shape[0])

    @property
    def n_prompts(self) -> int:
        return int(self.tokens.shape[0])


def _is_word(text: str) -> bool:
    return len(text) >= 3 and text[0] == " " and text[1:].isascii() and text[1:].isalpha()


def _encode(tokenizer, text: str) -> list:
    return list(tokenizer.encode(text, add_special_tokens=False))


def select_words(tokenizer, log_prior, n_words: int) -> tuple[np.ndarray, tuple]:
    """The ``n_words`` usable word tokens with the largest prior, most probable first.

    A token is usable when it is not a special token, decodes to ``' '`` followed by two or
    more ASCII letters, and that text encodes back to exactly this one token. Tokens are
    examined in order of decreasing prior (ties: lower id first) until ``n_words`` are found,
    so only a few hundred are decoded for the usual N.

    Parameters
    ----------
    tokenizer : a Hugging Face tokenizer (``decode`` and ``encode`` are used)
    log_prior : float (vocab,)
        Log-probability (or any score) per token id; larger is more common.
    n_words : int

    Returns
    -------
    ids : int64 (n_words,)
    words : tuple of str (with the leading space)

    Raises
    ------
    PromptError
        If ``n_words`` is below 2 or larger than the number of usable tokens.
    """
    n_words = integer(n_words, "n_words", minimum=2, error=PromptError)
    prior = np.asarray(log_prior, dtype=np.float64)
    n_vocab = min(prior.shape[0], len(tokenizer))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    # Stable sort on -prior keeps the lower token id first among ties; NaN sorts last.
    order = np.argsort(-np.nan_to_num(prior[:n_vocab], nan=-np.inf), kind="stable")
    ids, words = [], []
    for token_id in order.tolist():
        if token_id in special:
            continue
        text = tokenizer.decode([token_id])
        if _is_word(text) and _encode(tokenizer, text) == [token_id]:
            ids.append(token_id)
            words.append(text)
            if len(ids) == n_words:
                return np.asarray(ids, dtype=np.int64), tuple(words)
    raise PromptError(
        f"n_words={n_words} is larger than the usable vocabulary: this model has only "
        f"{len(ids)} single-token words with a leading space (rule: {WORD_RULE})"
    )


def check_single_tokens(tokenizer, word_ids, words) -> None:
    """Raise PromptError unless every word encodes to exactly its one token id."""
    bad = []
    for token_id, word in zip(np.asarray(word_ids).tolist(), words):
        encoded = _encode(tokenizer, word)
        if encoded != [token_id]:
            bad.append(f"{word!r} -> {encoded} (expected [{token_id}])")
    if bad:
        shown = "; ".join(bad[:5])
        raise PromptError(
            f"every prompt word must be exactly one token; {len(bad)} are not: {shown}"
        )


@renamed_keywords(seed="rng")
def build_prompts(word_ids, words, *, n_prompts: int, rng, bos_id: int, n_ctx: int,
                  settings: dict | None = None) -> PromptSet:
    """BOS + two copies of a seeded random permutation of the words, ``n_prompts`` times.

    Prompt p uses permutation p of ``numpy.random.default_rng(seed)`` (drawn in order), so
    the same seed gives the same prompts and more prompts extend, not change, the set.
    ``rng``: an int is the seed; a Generator draws one (``int(rng.integers(2**63))``); None
    draws one from fresh entropy. The seed used is the result's ``seed``.

    Raises
    ------
    PromptError
        If the prompt (``2 * n_words + 1`` tokens) is longer than the model's context
        ``n_ctx``, or ``n_prompts`` < 1.
    """
    word_ids = np.ascontiguousarray(word_ids, dtype=np.int64)
    n_words = int(word_ids.shape[0])
    length = 2 * n_words + 1
    if length > int(n_ctx):
        raise PromptError(
            f"a prompt of 2 x {n_words} words + BOS = {length} tokens is longer than the "
            f"model's context of {int(n_ctx)} tokens; use at most {(int(n_ctx) - 1) // 2} words"
        )
    n_prompts = integer(n_prompts, "n_prompts", error=PromptError)
    seed = seed_of(rng)
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(n_words) for _ in range(int(n_prompts))]).astype(np.int64)
    listed = word_ids[perms]
    bos = np.full((int(n_prompts), 1), int(bos_id), dtype=np.int64)
    tokens = np.ascontiguousarray(np.concatenate([bos, listed, listed], axis=1))
    return PromptSet(
        tokens=tokens,
        permutations=perms,
        word_ids=word_ids,
        words=tuple(words),
        seed=int(seed),
        settings=dict(settings or {}),
    )
