"""Measures of in-context learning with power, beside the study's ICL score (docs/ablation.md).

Token indices are 0-based positions in the passage text (a BOS token, prepended when the
tokenizer has one, is not counted); ``loss(t) = -log p(x_t | BOS, x_0 .. x_{t-1})`` in nats.
Every measure is a per-passage score; the effect of a head set is ``score ablated - score
intact``, and every measure is signed so that a positive effect means the ablation hurts
in-context learning.

``icl``
    The study's score: mean loss over ``late +- window`` minus mean loss over ``early +- window``.
``wide_icl``
    The same over wide windows: mean loss over tokens ``wide_late`` (default 400..505) minus
    mean loss over tokens ``wide_early`` (default 20..100), bounds inclusive.
``bigram``
    On the same natural-text passes: mean loss over the tokens that complete an earlier bigram
    (token ``t`` where the pair ``(x_{t-1}, x_t)`` occurred at some ``s < t``, an
    induction-predictable token) minus the mean loss over the other tokens, over tokens
    ``1 .. last`` (``last``: the last token any natural-text measure reads, ``late + window``).
    Its effect is the loss change on bigram-completing tokens minus the change on the others.
``repeated_tokens``
    Separate short passages: ``repeat_length`` (100) token ids drawn uniformly from the
    vocabulary without special tokens, then the same ids again (``numpy.random.default_rng(seed + 2)``);
    the score is the mean loss over the second copy's tokens ``repeat_length + 1 .. 2 repeat_length - 1``
    minus the mean loss over the same tokens of the first copy, ``1 .. repeat_length - 1`` (the
    second copy's first token cannot be predicted by copying, so both copies' first tokens are
    left out). Its effect is what ablation does to copying, net of the damage it does to
    predicting the same tokens without a copy. The second copy's absolute loss is kept beside it
    (``repeated_second_copy_loss``, and ``repeated_first_copy_loss``), outside the tests.
"""
from __future__ import annotations

import json

import numpy as np
from tqdm.auto import tqdm
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError
from cmr.multiple_comparisons import holm

from ...adapters.lm.ablation_engine import donor_passages, set_losses
from ...adapters.lm.interventions import bos_id
from .statistics import HOLM_FAMILIES, STAT_NAMES, comparison_statistics, comparison_text, unit_name

__all__ = ["MEASURES", "NATURAL_MEASURES", "CONVENTIONS", "check_measures", "check_window", "repeated_token_passages",
           "repeated_positions", "copy_losses",
           "bigram_completions", "natural_positions", "measure_scores", "run_measures", "measure_variables", "measure_summary_lines"]

#: measures of in-context learning, the study's first
MEASURES = ("icl", "wide_icl", "bigram", "repeated_tokens")
#: measures read from the natural-text passes
NATURAL_MEASURES = ("icl", "wide_icl", "bigram")

CONVENTIONS = {
    "icl": "mean loss over text tokens late-window..late+window minus over early-window..early+window "
           "(0-based text positions, BOS not counted; nats); effect = ablated - intact, > 0: ablation hurts ICL",
    "wide_icl": "mean loss over text tokens wide_late minus over wide_early (inclusive bounds, 0-based text "
                "positions, BOS not counted; nats); effect = ablated - intact, > 0: ablation hurts ICL",
    "bigram": "mean loss over text tokens t in 1..last whose pair (x[t-1], x[t]) occurred earlier in the passage "
              "minus mean loss over the other tokens of 1..last (0-based text positions, BOS not counted; nats); "
              "effect = ablated - intact, > 0: ablation hurts induction-predictable tokens more (hurts ICL)",
    "repeated_tokens": "mean loss over the second copy's tokens repeat_length+1..2*repeat_length-1 minus mean loss "
                       "over the first copy's tokens 1..repeat_length-1, in passages of repeat_length random token "
                       "ids (uniform over the vocabulary without special tokens) followed by the same ids again "
                       "(0-based text positions, BOS not counted; nats); effect = ablated - intact, > 0: ablation "
                       "hurts copying more than it hurts the same tokens without a copy",
}


def check_measures(measures) -> tuple[str, ...]:
    """``measures`` (names or a comma list; ``all``) in :data:`MEASURES` order, ``icl`` always first."""
    if isinstance(measures, str):
        measures = [m.strip() for m in measures.split(",") if m.strip()]
    chosen = set(MEASURES) if "all" in measures else set(measures)
    unknown = sorted(chosen - set(MEASURES))
    if unknown or not chosen:
        raise ParameterError(f"measures must be among {', '.join(MEASURES)} or all; got {', '.join(unknown) or 'none'}")
    return tuple(m for m in MEASURES if m in chosen | {"icl"})


def check_window(window, n_tokens: int, name: str) -> tuple[int, int]:
    """``(first, last)`` text positions, inclusive, inside 1..n_tokens - 1."""
    try:
        first, last = (int(v) for v in window)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be two token positions FIRST:LAST; got {window!r}") from None
    if not 1 <= first <= last < int(n_tokens):
        raise ParameterError(f"{name} must satisfy 1 <= first <= last < {n_tokens} (passages of {n_tokens} tokens); "
                             f"got {first}:{last}")
    return first, last


@keyword_only
@renamed_keywords(seed="rng")
def repeated_token_passages(n_vocab: int, special_ids, *, n_passages: int, repeat_length: int = 100,
                            rng=0) -> np.ndarray:
    """(n_passages, 2 * repeat_length) int64: random ids, then the same ids again.

    Ids are drawn uniformly with replacement from ``0 .. n_vocab - 1`` without ``special_ids``,
    with ``numpy.random.default_rng(rng)`` (a Generator ``rng`` is used as is).
    """
    if int(repeat_length) < 2 or int(n_passages) < 1:
        raise ParameterError(f"repeated-token passages need repeat_length >= 2 and n_passages >= 1; "
                             f"got {repeat_length} and {n_passages}")
    pool = np.setdiff1d(np.arange(int(n_vocab), dtype=np.int64), np.asarray(list(special_ids), dtype=np.int64))
    if pool.size < 2:
        raise ParameterError(f"the vocabulary of {n_vocab} ids has {pool.size} ids outside the special tokens")
    first = pool[as_generator(rng).integers(0, pool.size, size=(int(n_passages), int(repeat_length)))]
    return np.ascontiguousarray(np.concatenate([first, first], axis=1))


def bigram_completions(passages, positions) -> np.ndarray:
    """(n_passage, n_position) bool: token ``t`` completes a bigram ``(x[t-1], x[t])`` seen at some ``s < t``."""
    passages = np.asarray(passages)
    positions = np.asarray(positions, dtype=np.int64)
    out = np.zeros((passages.shape[0], positions.size), dtype=bool)
    column = {int(t): i for i, t in enumerate(positions)}
    for p, row in enumerate(passages.tolist()):
        seen = set()
        for t in range(1, int(positions.max()) + 1):
            pair = (row[t - 1], row[t])
            if t in column and pair in seen:
                out[p, column[t]] = True
            seen.add(pair)
    return out


@keyword_only
def natural_positions(measures, *, last: int, wide_early=(20, 100), wide_late=(400, 505)) -> np.ndarray | None:
    """Text positions the natural-text measures other than ``icl`` read (None when none does)."""
    needed = []
    if "bigram" in measures:
        needed.append(np.arange(1, int(last) + 1))
    if "wide_icl" in measures:
        needed += [np.arange(wide_early[0], wide_early[1] + 1), np.arange(wide_late[0], wide_late[1] + 1)]
    return np.unique(np.concatenate(needed)).astype(np.int64) if needed else None


def _mean_at(losses, positions, first, last):
    columns = (positions >= first) & (positions <= last)
    return losses[..., columns].mean(axis=-1)


def repeated_positions(repeat_length: int) -> np.ndarray:
    """Text positions a ``repeated_tokens`` passage is scored at: first copy 1..r-1, second r+1..2r-1."""
    r = int(repeat_length)
    return np.r_[1:r, r + 1:2 * r].astype(np.int64)


@keyword_only
def copy_losses(losses, positions, *, repeat_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(first-copy, second-copy) mean losses of repeated-token passages at :func:`repeated_positions`."""
    positions, r = np.asarray(positions, dtype=np.int64), int(repeat_length)
    first = (positions >= 1) & (positions <= r - 1)
    second = (positions >= r + 1) & (positions <= 2 * r - 1)
    return losses[..., first].mean(axis=-1), losses[..., second].mean(axis=-1)


def measure_scores(measure, losses, positions, *, passages=None, wide_early=(20, 100), wide_late=(400, 505),
                   last=None, repeat_length=None) -> np.ndarray:
    """A measure's per-passage score from losses (..., n_passage, n_position) at text ``positions``.

    ``bigram`` needs the ``passages`` (their ids); a passage without a bigram-completing token
    (or without another token) has score NaN. ``repeated_tokens`` needs ``repeat_length`` and
    losses at :func:`repeated_positions`.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if measure == "wide_icl":
        return _mean_at(losses, positions, *wide_late) - _mean_at(losses, positions, *wide_early)
    if measure == "repeated_tokens":
        if repeat_length is None:
            raise ParameterError("the repeated_tokens score needs repeat_length (second copy minus first copy)")
        first, second = copy_losses(losses, positions, repeat_length=repeat_length)
        return second - first
    if measure == "bigram":
        keep = positions <= (positions.max() if last is None else int(last))
        completes = bigram_completions(passages, positions[keep])
        values = losses[..., keep]
        with np.errstate(invalid="ignore", divide="ignore"):
            hit = (values * completes).sum(axis=-1) / completes.sum(axis=-1)
            miss = (values * ~completes).sum(axis=-1) / (~completes).sum(axis=-1)
        return hit - miss
    raise ParameterError(f"measure must be one of {', '.join(MEASURES[1:])}; got {measure!r}")


@keyword_only
@renamed_keywords(seed="rng")
def run_measures(bridge, passages, sets, *, modes, measures, scores, base, extra, last, wide, families, rng,
                 n_boot, repeat_length, batch_size, progress, articles=None):
    """The measures beside the ICL score (:func:`icl_cmr.analyses.causal.ablation.run_ablation`): scores from the
    natural-text losses (``extra``: what :func:`set_losses` gave at the extra positions), then the
    repeated-token passes; returns :func:`measure_variables`. ``rng``: an int is the seed
    (repeated tokens from ``seed + 2``, resample donors from ``seed + 3``); a Generator draws one
    (``int(rng.integers(2**63))``)."""
    seed = seed_of(rng)

    done = passages.shape[0]
    rows = [scores[0]]
    baselines = [base[0]]
    positions = natural_positions(measures, last=last, **wide)
    copies = {}
    for measure in measures[1:]:
        if measure == "repeated_tokens":
            tokenizer = getattr(bridge, "tokenizer", None)
            special = set(getattr(tokenizer, "all_special_ids", []) or []) | {bos_id(bridge)} - {None}
            n_vocab = int(bridge.cfg.d_vocab) if tokenizer is None else min(int(bridge.cfg.d_vocab), len(tokenizer))
            repeated = repeated_token_passages(n_vocab, special, n_passages=done, repeat_length=repeat_length,
                                               rng=seed + 2)
            scored = repeated_positions(repeat_length)
            donors = donor_passages(done, rng=seed + 3) if "resample" in modes else None
            with tqdm(total=done, desc="repeated-token passages", unit="passage", disable=not progress) as bar:
                rep_base, rep_losses, _ = set_losses(bridge, repeated, scored, sets, modes=modes, batch_size=batch_size,
                                                     progress=bar, donors=donors)
            rows.append(measure_scores(measure, rep_losses, scored, repeat_length=repeat_length))
            baselines.append(measure_scores(measure, rep_base, scored, repeat_length=repeat_length))
            (first, second), (base_first, base_second) = (copy_losses(rep_losses, scored, repeat_length=repeat_length),
                                                          copy_losses(rep_base, scored, repeat_length=repeat_length))
            copies = {"repeated_first_copy_loss": (("mode", "head_set", "passage"), first),
                      "repeated_second_copy_loss": (("mode", "head_set", "passage"), second),
                      "baseline_repeated_first_copy_loss": (("passage",), base_first),
                      "baseline_repeated_second_copy_loss": (("passage",), base_second)}
            continue
        extra_base, extra_losses = extra[0]["base"], extra[0]["losses"]
        kw = dict(passages=passages, last=last, **wide)
        rows.append(measure_scores(measure, extra_losses, positions, **kw))
        baselines.append(measure_scores(measure, extra_base, positions, **kw))
    info = dict(wide_early=f"{wide['wide_early'][0]}:{wide['wide_early'][1]}",
                wide_late=f"{wide['wide_late'][0]}:{wide['wide_late'][1]}", bigram_last_token=int(last),
                repeat_length=int(repeat_length), repeated_tokens_seed=int(seed) + 2,
                resample_donors=f"numpy.random.default_rng({int(seed) + 3}): a random cyclic order of the passages, "
                                "passage p takes every ablated head's hook_z from the next one (natural text and "
                                "repeated tokens alike)")
    block = measure_variables(np.stack(rows), np.stack(baselines), measures=measures, families=families, rng=seed,
                              n_boot=n_boot, info=info, articles=articles)
    block["variables"].update(copies)
    return block


@keyword_only
@renamed_keywords(seed="rng")
def measure_variables(scores, baselines, *, measures, families, rng, n_boot, info, articles=None) -> dict:
    """Dataset variables of the measures: scores (measure, mode, head_set, passage), baselines, the
    statistics of every comparison (measure, mode, comparison) and Holm's correction over them all
    (:data:`~icl_cmr.analyses.causal.statistics.HOLM_FAMILIES`: ``all measures``); ``articles``:
    the article of each passage, the unit of the contrasts; ``rng`` as in
    :func:`~icl_cmr.analyses.causal.statistics.comparison_statistics`."""
    seed = seed_of(rng)

    effects = scores - baselines[:, None, None, :]
    tables = []
    for k in range(len(measures)):
        usable = np.isfinite(effects[k]).all(axis=(0, 1))  # a passage without bigram-completing tokens: left out
        keep = usable if usable.any() else slice(0, 1)
        comparisons, table = comparison_statistics(effects[k][:, :, keep], families, rng=seed, n_boot=n_boot,
                                                   articles=None if articles is None else np.asarray(articles)[keep])
        if not usable.any():  # no passage has this measure: every statistic undefined
            table[:] = np.nan
        tables.append(table)
    finite = np.isfinite(effects)
    counts = finite.sum(axis=-1)
    mean_effect = np.divide(np.where(finite, effects, 0.0).sum(axis=-1), counts, out=np.full(counts.shape, np.nan),
                            where=counts > 0)
    table = np.stack(tables)
    dims = ("measure", "mode", "comparison")
    out = {"measure_score": (("measure", "mode", "head_set", "passage"), scores),
           "baseline_measure_score": (("measure", "passage"), baselines),
           "measure_mean_effect": (("measure", "mode", "head_set"), mean_effect)}
    for k, name in enumerate(STAT_NAMES):
        out[f"measure_{name}"] = (dims, table[..., k])
    out["measure_holm_rank_pvalue"] = (dims, holm(table[..., STAT_NAMES.index("rank_pvalue")]))
    out["measure_holm_t_pvalue"] = (dims, holm(table[..., STAT_NAMES.index("t_pvalue")]))
    coords = {"measure": list(measures), "measure_definition": ("measure", [CONVENTIONS[m] for m in measures])}
    attrs = {"measure_conventions": json.dumps({m: CONVENTIONS[m] for m in measures}),
             "holm_family": "measure_holm_*: family 'all measures', " + HOLM_FAMILIES["all measures"] + "; holm_*: "
                            "family 'primary', " + HOLM_FAMILIES["primary"],
             **info}
    return dict(variables=out, coords=coords, comparisons=comparisons, attrs=attrs)


_LONG_NAMES = {
    "measure_score": "per-passage score of each measure, heads ablated (nats; conventions in measure_definition)",
    "baseline_measure_score": "per-passage score of each measure, unablated model",
    "measure_mean_effect": "mean over passages of measure_score - baseline_measure_score (> 0: ablation hurts ICL)",
    "measure_holm_rank_pvalue": "rank_pvalue adjusted by Holm across measures, modes and comparisons "
                                "(family: all measures)",
    "measure_holm_t_pvalue": "t_pvalue adjusted by Holm across measures, modes and comparisons (family: all measures)",
    "repeated_first_copy_loss": "mean loss over the first copy's tokens 1..repeat_length-1 of the repeated-token "
                                "passages, heads ablated (nats)",
    "repeated_second_copy_loss": "mean loss over the second copy's tokens repeat_length+1..2*repeat_length-1 of the "
                                 "repeated-token passages, heads ablated (nats; the repeated_tokens score before the "
                                 "first copy is subtracted)",
    "baseline_repeated_first_copy_loss": "repeated_first_copy_loss of the unablated model",
    "baseline_repeated_second_copy_loss": "repeated_second_copy_loss of the unablated model",
}


def describe(ds: xr.Dataset) -> None:
    """long_name attrs of the measure variables."""
    for name, text in _LONG_NAMES.items():
        if name in ds:
            ds[name].attrs["long_name"] = text
    for name in ds.data_vars:
        base = str(name)[len("measure_"):]
        if str(name).startswith("measure_") and name not in _LONG_NAMES and base in ds:
            ds[name].attrs["long_name"] = f"{ds[base].attrs.get('long_name', base)}, per measure"


def measure_summary_lines(result: xr.Dataset) -> list[str]:
    """One line per measure, mode and comparison, each test with its Holm value and family (``all measures``)."""
    if "measure" not in result.dims:
        return []
    lines = []
    for measure in result["measure"].values:
        for mode in result["mode"].values:
            for comparison in result["comparison"].values:
                row = result.sel(measure=measure, mode=mode, comparison=comparison)
                v = {k: float(row[f"measure_{k}"]) for k in (*STAT_NAMES, "holm_t_pvalue", "holm_rank_pvalue")
                     if f"measure_{k}" in row}
                lines.append(f"{measure} {mode} {comparison}: " + comparison_text(v, "all measures", units=unit_name(result)))
    return lines
