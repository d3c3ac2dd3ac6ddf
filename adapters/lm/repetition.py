"""Attention of every head on study lists with repeated words, through the repetition lag-CRP.

One forward pass per prompt (:func:`icl_cmr.adapters.repetition_heads.build_repetition_prompts`)
through :func:`icl_cmr.adapters.lm.extraction.attention_pass`; of its attention only the
recall-pass queries on the study positions are read (M x L per head; the prompts are short,
1 + L + M tokens, so whole matrices cost little). The statistics are those of
:mod:`icl_cmr.adapters.repetition_heads`. torch is imported inside the functions called.
"""
from __future__ import annotations

import numpy as np

from cmr.deprecation import renamed_keywords

from .. import prompts, repetition_heads
from ._model_files import with_run_record
from .extraction import attention_pass, log_prior
from .loading import as_loaded_model, measure_peak_memory

__all__ = ["make_repetition_prompts", "recall_pass_attention", "extract_repetition_heads"]


@renamed_keywords(seed="rng")
def make_repetition_prompts(model, *, n_words: int = 100, n_prompts: int = 40, rng=0,
                            **design) -> repetition_heads.RepetitionPrompts:
    """Repeated-word prompts for ``model``, words drawn from the top ``n_words`` of its unigram prior.

    ``design``: keywords of :func:`icl_cmr.adapters.repetition_heads.build_repetition_prompts`
    (``list_length``, ``n_massed``, ``n_spaced``, ``n_thrice``, ``min_spacing``, ``max_spacing``).
    """
    model = as_loaded_model(model)
    word_ids, words = prompts.select_words(model.tokenizer, log_prior(model), n_words)
    return repetition_heads.build_repetition_prompts(word_ids, words, n_prompts=n_prompts, rng=rng,
                                                     bos_id=model.bos_id, n_ctx=model.n_ctx, **design)


def recall_pass_attention(model, tokens, list_length: int) -> np.ndarray:
    """float32 (layer, head, M, L): attention of the recall-pass queries on the study positions, one pass."""
    _, probs, _ = attention_pass(as_loaded_model(model), tokens)
    return np.ascontiguousarray(probs[:, :, int(list_length) + 1:, 1:int(list_length) + 1])


@renamed_keywords(seed="rng")
def extract_repetition_heads(model, *, n_words: int = 100, n_prompts: int = 40, rng=0, max_lag: int = 5,
                             min_lag: int = 4, rule: str = "query_only", checkpoint: int = -1, progress=None,
                             **design):
    """The repetition lag-CRP and first-presentation bias of every head of ``model``.

    Parameters
    ----------
    model : anything :func:`icl_cmr.adapters.lm.loading.as_loaded_model` accepts
    n_words : int, the word pool (top of the unigram prior) each list draws its words from
    n_prompts, rng : the prompts (:func:`make_repetition_prompts`)
    max_lag : int, stored lags -max_lag..max_lag
    min_lag : int, presentations more than this apart are tabulated (jaxcmr's repcrp)
    rule : key of :data:`icl_cmr.adapters.repetition_heads.RULES`
    checkpoint : int, stored as the ``checkpoint`` coordinate
    progress : optional callable, called with 1 after each prompt
    design : list design (``list_length`` 40, ``n_massed`` 4, ``n_spaced`` 8, ``n_thrice`` 2,
        ``min_spacing`` 6, ``max_spacing`` 15)

    Returns
    -------
    xarray.Dataset of kind ``repetition_heads``
        (:func:`icl_cmr.adapters.repetition_heads.repetition_heads_dataset`); attrs record the
        device, dtype and peak memory.
    """
    model = as_loaded_model(model)
    with measure_peak_memory(model.device) as memory:
        made = make_repetition_prompts(model, n_words=n_words, n_prompts=n_prompts, rng=rng, **design)
        # an unknown rule fails here
        repetition_heads.unavailable_positions(made.presentation[0], made.recalls[0], rule=rule)
        summaries = []
        for p, row in enumerate(made.tokens):
            probs = recall_pass_attention(model, row, made.list_length)
            summaries.append(repetition_heads.repetition_summary(
                probs, made.presentation[p], made.recalls[p], made.kind[p], min_lag=min_lag, rule=rule))
            if progress is not None:
                progress(1)
    info = model.provenance()
    info.update(prompt={**made.settings, "selection": prompts.WORD_RULE, "words": list(made.words),
                        "bos_id": model.bos_id, "layout": repetition_heads.LAYOUT})
    ds = repetition_heads.repetition_heads_dataset(
        repetition_heads.pool_repetition(summaries), list_length=made.list_length, model=model.name,
        checkpoint=checkpoint, max_lag=max_lag, min_lag=min_lag, rule=rule, provenance=info)
    return with_run_record(ds, device=model.device, dtype=model.dtype, **memory)
