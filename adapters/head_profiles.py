"""Attention of every head on a repeated word list, turned into lag profiles (no torch here).

Layout of a prompt (see :mod:`icl_cmr.adapters.prompts`): BOS at position 0, the first copy ("study")
at ``1..N``, the second copy ("recall") at ``N+1..2N``. The query at second-copy index ``k``
(0-based, position ``N+1+k``) holds the word whose earlier copy sits at ``1+k``; the key at
lag ``l`` is position ``1+k+l`` (lag +1 = the induction target, lag 0 = the earlier copy of
the same word). Only keys inside the first copy count, so every lag uses the queries for
which ``0 <= k+l < N``.

Per head (Ji-An et al. 2024):

* ``profile``/``sem``: mean pre-softmax attention score by lag over queries and prompts,
  with the SEM over all (prompt, query) samples; ``prob_profile``/``prob_sem`` the same for
  post-softmax probabilities. Scores are masked explicitly (keys after the query become NaN)
  rather than trusting the library's fill value; the lag block never reaches such keys.
* ``induction_score``: probability on the induction target (lag +1), averaged over the
  second copy; ``duplicate_token_score``: the same at lag 0; ``previous_token_score``:
  probability on the previous token, averaged over every position 1..2N.
* ``soft_crp``: the soft-transition lag-CRP, see :func:`soft_lag_counts` and docs/heads.md.

Everything is streamed prompt by prompt (:func:`prompt_summary`), then pooled
(:func:`head_profile_dataset`), so memory does not grow with the number of prompts. A model's
hooks need not keep whole (query, key) matrices: :func:`attention_blocks` names the parts the
statistics read (the lag block of the scores, the second-copy block of the probabilities and
their previous-token diagonal) and :func:`block_summary` reduces those parts alone.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from cmr import lag_window
from cmr.checks import is_integer, seed_of
from cmr.cmr_like import MASS_APPLIED, attention_mass
from cmr.constants import HEAD_DIMS, PAPER_LAGS
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import RecallDataError, SchemaError
from cmr.schema import provenance_attrs, require_dims, require_variables, validate

from . import _soft_lag_crp
from .errors import PromptError

__all__ = [
    "SOFT_CRP_RULES",
    "lag_range",
    "lag_indices",
    "lag_block",
    "attention_blocks",
    "soft_lag_counts",
    "recall_sequence_transitions",
    "teacher_forced_transitions",
    "prompt_summary",
    "block_summary",
    "pool_summaries",
    "head_profile_dataset",
    "with_attention_mass",
    "select_profile",
    "attention_pattern_dataset",
    "validate_attention_pattern",
]

SOFT_CRP_RULES = {
    "query_only": "at each step only the query's own earlier copy is unavailable (lag 0 excluded); "
    "every other first-copy word is a possible transition",
    "teacher_forced": "psifr's rule with the forced recall order 1..k: words 1..k are already "
    "recalled, so only forward lags are possible",
}


def lag_range(lags, n_words: int) -> np.ndarray:
    """The lag window (see :func:`cmr.lag_window`) checked against a list of ``n_words`` words.

    Raises
    ------
    cmr.errors.ProfileError
        A malformed window.
    PromptError
        A lag no query can have (``|lag| >= n_words``).
    """
    window = lag_window(lags, longest=n_words)
    if np.abs(window).max() >= n_words:
        raise PromptError(
            f"lag window {window[0]}..{window[-1]} is wider than the list of N={n_words} words: lags must lie "
            f"within -{n_words - 1}..{n_words - 1}; use more words or a narrower window"
        )
    return window


def _check_attention(values, n_words, what):
    arr = np.asarray(values)
    seq = 2 * n_words + 1
    if arr.ndim != 4 or arr.shape[2] != seq or arr.shape[3] != seq:
        raise PromptError(
            f"{what} must have shape (layer, head, query, key) with query = key = 2*N+1 = {seq}; "
            f"got {arr.shape}"
        )
    return arr


def lag_indices(n_words: int, lags):
    """Where the lag block lives in a (query, key) attention matrix of one prompt.

    Parameters
    ----------
    n_words : int
    lags : int (n_lags,)

    Returns
    -------
    query : int64 (N,)
        Position ``N+1+k`` of second-copy query ``k``.
    key : int64 (N, n_lags)
        Position ``1+k+lags[i]`` of its key at each lag, clipped into ``0..2N`` (so it can
        index any attention matrix of the prompt; read only where ``valid``).
    valid : bool (N, n_lags)
        The key lies in the first copy and not after the query (explicit causal mask).
    """
    lags = np.asarray(lags, dtype=np.int64)
    k = np.arange(n_words)
    query = n_words + 1 + k
    key = 1 + k[:, None] + lags[None, :]
    valid = (key >= 1) & (key <= n_words) & (key <= query[:, None])
    return query, np.clip(key, 0, 2 * n_words), valid


def _float64(values):
    """A C-ordered float64 copy: one memory layout whatever the source, so sums are reproducible."""
    return np.array(values, dtype=np.float64, order="C")


def _masked(raw, valid):
    out = _float64(raw)
    out[..., ~valid] = np.nan
    return out


def lag_block(values, n_words: int, lags) -> np.ndarray:
    """Second-copy queries against first-copy keys, arranged by lag.

    Parameters
    ----------
    values : float (layer, head, 2N+1, 2N+1)
        Attention scores or probabilities of one prompt, (query, key) over all positions.
    n_words : int
    lags : int (n_lags,)

    Returns
    -------
    float64 (layer, head, N, n_lags)
        ``out[..., k, i] = values[..., N+1+k, 1+k+lags[i]]``; NaN where the key leaves the
        first copy or (explicit causal mask) lies after the query.
    """
    arr = _check_attention(values, n_words, "attention values")
    query, key, valid = lag_indices(n_words, lags)
    return _masked(arr[:, :, query[:, None], key], valid)


def _second_copy_block(second, n_words, lags):
    """:func:`lag_block` of the probabilities, read from their second-copy block (N, N)."""
    _, key, valid = lag_indices(n_words, lags)
    k = np.arange(n_words)
    # first-copy key position p is column p-1 of the block; every such key precedes the query
    return _masked(second[:, :, k[:, None], np.clip(key - 1, 0, n_words - 1)], valid)


def attention_blocks(scores, probs, n_words: int, lags) -> dict:
    """The parts of one prompt's attention the head statistics read, cut from full matrices.

    What :func:`icl_cmr.adapters.lm.extraction.extract_heads` keeps inside each layer's
    hook instead of the (query, key) matrices; :func:`block_summary` turns it into the
    prompt's statistics.

    Parameters
    ----------
    scores, probs : float (layer, head, 2N+1, 2N+1)
    n_words : int
    lags : int (n_lags,)

    Returns
    -------
    dict of arrays in the dtype of the input
        ``score_lags`` (layer, head, N, n_lags): scores at ``lag_indices`` (unmasked);
        ``second_copy`` (layer, head, N, N): probabilities of second-copy queries on
        first-copy keys (query ``N+1+k``, key ``1+j``); ``previous`` (layer, head, 2N):
        probability of position q on q-1, for q = 1..2N.
    """
    scores = _check_attention(scores, n_words, "scores")
    probs = _check_attention(probs, n_words, "probs")
    query, key, _ = lag_indices(n_words, lags)
    pos = np.arange(1, 2 * n_words + 1)
    return {
        "score_lags": scores[:, :, query[:, None], key],
        "second_copy": probs[:, :, n_words + 1:, 1:n_words + 1],
        "previous": probs[:, :, pos, pos - 1],
    }


def soft_lag_counts(from_positions, weights, unavailable, max_lag: int):
    """Soft-transition lag counts: psifr's lag-CRP with a distribution in place of each recall.

    At step s the "recall" moves from serial position ``from_positions[s]`` to study position
    j with weight ``weights[..., s, j]``, renormalised over the positions still available
    (``unavailable[s, j] == 0``). ``actual[lag]`` sums those renormalised weights and
    ``possible[lag]`` counts the steps at which the lag was available. A step whose
    from-position is <= 0 or whose available weight is 0 is skipped entirely. With one-hot
    weights built from a recall sequence (:func:`recall_sequence_transitions`) the counts
    equal psifr's lag-CRP counts exactly.

    Parameters
    ----------
    from_positions : int (n_steps,)
    weights : float (..., n_steps, list_length), non-negative
    unavailable : bool (n_steps, list_length)
    max_lag : int

    Returns
    -------
    lags : int64 (2*max_lag+1,)
    actual : float64 (..., 2*max_lag+1)
    possible : int64 (..., 2*max_lag+1)
    """
    from_positions = np.ascontiguousarray(from_positions, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    unavailable = np.ascontiguousarray(unavailable, dtype=np.uint8)
    if weights.ndim < 2 or weights.shape[-2:] != unavailable.shape or from_positions.shape != unavailable.shape[:1]:
        raise RecallDataError(
            "soft_lag_counts needs from_positions (n_steps,), weights (..., n_steps, list_length) and "
            f"unavailable (n_steps, list_length); got {from_positions.shape}, {weights.shape}, {unavailable.shape}"
        )
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise RecallDataError("soft_lag_counts: weights must be finite and non-negative")
    batch = weights.shape[:-2]
    flat = np.ascontiguousarray(weights.reshape((-1,) + weights.shape[-2:]))
    actual, possible = _soft_lag_crp.soft_lag_counts(from_positions, flat, unavailable, int(max_lag))
    n_lags = 2 * int(max_lag) + 1
    lags = np.arange(-int(max_lag), int(max_lag) + 1, dtype=np.int64)
    return lags, actual.reshape(batch + (n_lags,)), possible.reshape(batch + (n_lags,))


def recall_sequence_transitions(recalls, list_length):
    """One-hot "attention" from recall sequences, for :func:`soft_lag_counts`.

    Each output position of each trial is one step: it transitions from the recall at output
    n to the recall at n+1 with weight 1. Steps from an intrusion, a repeat or padding are
    skipped; a step to an intrusion carries no weight, a step to a repeat lands on an
    unavailable position, so both are skipped as psifr skips them. Positions recalled so far
    (valid first-time recalls, the "from" item included) and positions beyond the trial's
    list are unavailable.

    Parameters
    ----------
    recalls : int (n_trials, n_outputs)
        Serial positions 1-based; -1 intrusion; 0 padding.
    list_length : int or int (n_trials,)

    Returns
    -------
    from_positions : int64 (n_steps,)
    weights : float64 (n_steps, max_list_length)
    unavailable : bool (n_steps, max_list_length)
    """
    recalls = np.asarray(recalls)
    if recalls.ndim != 2 or recalls.dtype.kind not in "iu":
        raise RecallDataError(f"recalls must be a 2-d integer matrix; got {recalls.ndim}-d {recalls.dtype}")
    lengths = np.broadcast_to(np.asarray(list_length, dtype=np.int64), recalls.shape[:1])
    width = int(lengths.max()) if lengths.size else 1
    n_trials, n_out = recalls.shape
    from_pos = np.zeros(n_trials * n_out, dtype=np.int64)
    weights = np.zeros((n_trials * n_out, width))
    unavailable = np.zeros((n_trials * n_out, width), dtype=bool)
    for t in range(n_trials):
        recalled = np.zeros(width, dtype=bool)
        recalled[lengths[t]:] = True
        for n in range(n_out):
            s = t * n_out + n
            here = int(recalls[t, n])
            fresh = 1 <= here <= lengths[t] and not recalled[here - 1]
            if fresh:
                recalled[here - 1] = True
                from_pos[s] = here
            unavailable[s] = recalled
            nxt = int(recalls[t, n + 1]) if n + 1 < n_out else 0
            if fresh and 1 <= nxt <= lengths[t]:
                weights[s, nxt - 1] = 1.0
    return from_pos, weights, unavailable


@keyword_only
def teacher_forced_transitions(n_words: int, *, rule: str = "query_only"):
    """Steps of the forced "recall" 1..N of the second copy, for :func:`soft_lag_counts`.

    Step k (0-based) moves from serial position k+1. ``rule`` (see ``SOFT_CRP_RULES``):
    ``"query_only"`` makes only position k+1 itself unavailable; ``"teacher_forced"`` makes
    1..k+1 unavailable (psifr's rule for the forced order; forward lags only).

    Returns
    -------
    from_positions : int64 (N,)
    unavailable : bool (N, N)
    """
    if rule not in SOFT_CRP_RULES:
        raise PromptError(f"soft-CRP rule must be one of {', '.join(SOFT_CRP_RULES)}; got {rule!r}")
    idx = np.arange(n_words)
    if rule == "query_only":
        unavailable = idx[:, None] == idx[None, :]
    else:
        unavailable = idx[None, :] <= idx[:, None]
    return idx + 1, unavailable


def _moments(block):
    """Count, mean and sum of squared deviations over axis -2 (queries), NaN-aware."""
    count = np.sum(~np.isnan(block), axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(block, axis=-2) / count
    m2 = np.nansum((block - mean[..., None, :]) ** 2, axis=-2)
    return count.astype(np.int64), mean, m2


def prompt_summary(scores, probs, n_words: int, lags, *, soft_rule: str = "query_only") -> dict:
    """Sufficient statistics of one prompt for every head (small; pool with :func:`pool_summaries`).

    Parameters
    ----------
    scores, probs : float (layer, head, 2N+1, 2N+1)
        Pre-softmax scores and post-softmax probabilities over all (query, key) positions.
    n_words : int
    lags : int (n_lags,)
        The profile window (from :func:`lag_range`).
    soft_rule : str
        Key of ``SOFT_CRP_RULES``.
    """
    lags = np.asarray(lags, dtype=np.int64)
    return block_summary(attention_blocks(scores, probs, n_words, lags), n_words, lags, soft_rule=soft_rule)


def block_summary(blocks: dict, n_words: int, lags, *, soft_rule: str = "query_only") -> dict:
    """:func:`prompt_summary` from the parts :func:`attention_blocks` keeps (same statistics).

    ``blocks`` may come from full matrices or straight from a model's hooks; values are
    converted to float64 here, after the model's own dtype (float32 in the hooks' copies).
    """
    lags = np.asarray(lags, dtype=np.int64)
    second = np.asarray(blocks["second_copy"])
    n_layers, n_heads = second.shape[:2]
    expected = {
        "score_lags": (n_layers, n_heads, n_words, lags.size),
        "second_copy": (n_layers, n_heads, n_words, n_words),
        "previous": (n_layers, n_heads, 2 * n_words),
    }
    for name, shape in expected.items():
        if np.shape(blocks[name]) != shape:
            raise PromptError(f"attention block {name!r} must have shape {shape}; got {np.shape(blocks[name])}")
    _, _, valid = lag_indices(n_words, lags)
    summary = {
        "score": _moments(_masked(blocks["score_lags"], valid)),
        "prob": _moments(_second_copy_block(second, n_words, lags)),
    }
    special = _second_copy_block(second, n_words, np.array([0, 1]))
    summary["duplicate"] = _moments(special[..., :1])
    summary["induction"] = _moments(special[..., 1:])
    previous = _float64(blocks["previous"])
    summary["previous"] = (np.full(previous.shape[:2], previous.shape[-1], dtype=np.int64), previous.sum(axis=-1))
    from_pos, unavailable = teacher_forced_transitions(n_words, rule=soft_rule)
    _, actual, possible = soft_lag_counts(from_pos, second, unavailable, n_words - 1)
    summary["soft"] = (actual, possible)
    return summary


def _combine(a, b):
    """Chan et al.'s pairwise update of (count, mean, M2)."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = np.where(n_b > 0, mean_b, 0.0) - np.where(n_a > 0, mean_a, 0.0)
        mean = np.where(n > 0, (np.where(n_a > 0, mean_a, 0.0) * n_a + np.where(n_b > 0, mean_b, 0.0) * n_b) / n, np.nan)
        m2 = m2_a + m2_b + delta**2 * n_a * n_b / np.where(n > 0, n, 1)
    return n, mean, m2


def pool_summaries(summaries) -> dict:
    """Pool per-prompt summaries: moments combined exactly, counts summed."""
    summaries = list(summaries)
    if not summaries:
        raise PromptError("no prompts to pool (n_prompts must be >= 1)")
    pooled = dict(summaries[0])
    for other in summaries[1:]:
        for name in ("score", "prob", "duplicate", "induction"):
            pooled[name] = _combine(pooled[name], other[name])
        pooled["previous"] = tuple(x + y for x, y in zip(pooled["previous"], other["previous"]))
        pooled["soft"] = tuple(x + y for x, y in zip(pooled["soft"], other["soft"]))
    return pooled


def _sem(count, m2):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 1, np.sqrt(m2 / np.maximum(count - 1, 1) / count), np.nan)


def head_profile_dataset(pooled: dict, *, lags, n_words: int, model: str, checkpoint: int = -1,
                         copying_score=None, position_loss=None, provenance: dict | None = None,
                         soft_rule: str = "query_only") -> xr.Dataset:
    """The lag-profile dataset of every head, dims (model, checkpoint, layer, head, lag).

    Parameters
    ----------
    pooled : dict from :func:`pool_summaries`
    lags : int (n_lags,)
    n_words : int
    model : str
    checkpoint : int, -1 for the released model
    copying_score : float (layer, head), optional
    position_loss : float (2N,), optional
        Mean next-token loss for the tokens at positions 1..2N (over prompts).
    provenance : dict, JSON-serialisable; model, loader, versions, prompt settings, seeds.
    soft_rule : str, recorded in the attrs of ``soft_crp``.

    Returns
    -------
    xarray.Dataset of kind ``lag_profile`` (``profile_kind="attention_score"``), see docs/schema.md.
    """
    lags = np.asarray(lags, dtype=np.int64)
    count, mean, m2 = pooled["score"]
    n_layers, n_heads = mean.shape[:2]
    pre = (1, 1)

    def head_lag(values):
        return (HEAD_DIMS + ("lag",), np.asarray(values).reshape(pre + values.shape))

    def head_only(values):
        return (HEAD_DIMS, np.asarray(values, dtype=np.float64).reshape(pre + values.shape))

    p_count, p_mean, p_m2 = pooled["prob"]
    full_lags, actual, possible = (np.arange(-(n_words - 1), n_words, dtype=np.int64),) + pooled["soft"]
    cut = np.searchsorted(full_lags, lags)
    with np.errstate(invalid="ignore", divide="ignore"):
        soft = np.where(possible > 0, actual / np.maximum(possible, 1), np.nan)[..., cut]
    prev_count, prev_sum = pooled["previous"]
    data = {
        "profile": head_lag(mean),
        "sem": head_lag(_sem(count, m2)),
        "n_samples": head_lag(count.astype(np.int64)),
        "prob_profile": head_lag(p_mean),
        "prob_sem": head_lag(_sem(p_count, p_m2)),
        "soft_crp": head_lag(soft),
        "soft_actual": head_lag(actual[..., cut]),
        "soft_possible": head_lag(possible[..., cut].astype(np.int64)),
        "induction_score": head_only(pooled["induction"][1][..., 0]),
        "duplicate_token_score": head_only(pooled["duplicate"][1][..., 0]),
        "previous_token_score": head_only(prev_sum / prev_count),
    }
    if copying_score is not None:
        data["copying_score"] = head_only(np.asarray(copying_score, dtype=np.float64).reshape(n_layers, n_heads))
    coords = {
        "model": np.array([str(model)], dtype=object),
        "checkpoint": np.array([int(checkpoint)], dtype=np.int64),
        "layer": np.arange(n_layers, dtype=np.int64),
        "head": np.arange(n_heads, dtype=np.int64),
        "lag": lags,
    }
    if position_loss is not None:
        loss = np.asarray(position_loss, dtype=np.float64)
        data["position_loss"] = (("model", "checkpoint", "position"), loss.reshape(pre + loss.shape))
        coords["position"] = np.arange(1, loss.size + 1, dtype=np.int64)
        data["loss_first_copy"] = (("model", "checkpoint"), np.nanmean(loss[1:n_words]).reshape(pre))
        data["loss_second_copy"] = (("model", "checkpoint"), np.nanmean(loss[n_words + 1:2 * n_words]).reshape(pre))
    info = dict(provenance or {})
    info.setdefault("n_words", int(n_words))
    info["lags"] = [int(v) for v in lags]
    info["soft_crp_rule"] = soft_rule
    attrs = provenance_attrs("lag_profile", "icl_cmr.adapters.head_profiles.head_profile_dataset", **info)
    attrs.update(profile_kind="attention_score", unit_kind="heads")
    ds = with_attention_mass(xr.Dataset(data, coords=coords, attrs=attrs))
    _describe(ds, soft_rule)
    return validate(ds, "lag_profile")


def with_attention_mass(heads: xr.Dataset) -> xr.Dataset:
    """A copy of a head dataset with ``attention_mass``, ``uniform_mass`` and ``amplitude`` per head.

    ``attention_mass``: the head's attention probability mass on lags -5..5 (``prob_profile``
    summed); ``uniform_mass``: what uniform attention over the visible keys puts there
    (:func:`cmr.cmr_like.uniform_attention_prob`, from the list length recorded in the
    provenance); ``amplitude``: the range (max - min) of the score ``profile`` over lags -5..5,
    the size the CMR distance cannot see. A variable that cannot be computed (no probabilities,
    no list length, a window narrower than -5..5) is left out; variables already present are kept.
    The strict "CMR-like" definition (:mod:`cmr.cmr_like`) reads the first two.
    """
    out = heads.copy()
    lags = list(PAPER_LAGS)
    if "amplitude" not in out and "profile" in out and set(lags) <= set(out["lag"].values.tolist()):
        window = out["profile"].sel(lag=lags)
        out["amplitude"] = window.max("lag", skipna=False) - window.min("lag", skipna=False)
    mass, uniform, status = attention_mass(out, lags=lags)
    if status == MASS_APPLIED and "attention_mass" not in out:
        out["attention_mass"], out["uniform_mass"] = mass, uniform
    for name in ("amplitude", "attention_mass", "uniform_mass"):
        if name in out:
            out[name].attrs.setdefault("description", _DESCRIPTIONS[name][1])
    return out


_DESCRIPTIONS = {
    "profile": ("attention_score", "mean pre-softmax attention score from a second-copy query to the first-copy key at this lag"),
    "sem": ("attention_score", "SEM of profile over all (prompt, query) samples"),
    "n_samples": ("", "number of (prompt, query) samples at this lag"),
    "prob_profile": ("attention_prob", "mean post-softmax attention probability at this lag"),
    "prob_sem": ("attention_prob", "SEM of prob_profile over all (prompt, query) samples"),
    "soft_crp": ("soft_lag_crp", "soft-transition lag-CRP: soft_actual / soft_possible"),
    "soft_actual": ("soft_lag_crp", "sum of attention renormalised over available first-copy words"),
    "soft_possible": ("soft_lag_crp", "number of steps at which the lag was available"),
    "induction_score": ("", "attention probability on the induction target (lag +1), mean over the second copy"),
    "duplicate_token_score": ("", "attention probability on the earlier copy of the same word (lag 0)"),
    "previous_token_score": ("", "attention probability on the previous token, mean over positions 1..2N"),
    "attention_mass": ("", "attention probability mass on lags -5..5 (sum of prob_profile)"),
    "uniform_mass": ("", "the mass uniform attention over the visible keys puts on lags -5..5"),
    "amplitude": ("", "range (max - min) of the score profile over lags -5..5"),
    "copying_score": ("", "OV-circuit eigenvalue ratio sum(lambda)/sum(|lambda|), see docs/heads.md"),
    "position_loss": ("", "mean next-token cross-entropy (nats) for the token at this position"),
    "loss_first_copy": ("", "mean position_loss over first-copy words 2..N"),
    "loss_second_copy": ("", "mean position_loss over second-copy words 2..N"),
}


def _describe(ds, soft_rule):
    for name, (kind, text) in _DESCRIPTIONS.items():
        if name in ds:
            ds[name].attrs["description"] = text
            if kind:
                ds[name].attrs["profile_kind"] = kind
    if "soft_crp" in ds:
        ds["soft_crp"].attrs["rule"] = SOFT_CRP_RULES[soft_rule]


_SELECT = {
    "score": ("profile", "sem", "attention_score"),
    "prob": ("prob_profile", "prob_sem", "attention_prob"),
    "soft_lag_crp": ("soft_crp", None, "soft_lag_crp"),
}


@keyword_only
def select_profile(heads: xr.Dataset, *, which: str = "score") -> xr.Dataset:
    """A plain lag-profile dataset (``profile``, ``sem``) of one kind of head profile.

    ``which``: ``"score"`` (pre-softmax, the paper's), ``"prob"`` or ``"soft_lag_crp"``.
    The head scores and the attention mass (``attention_mass``, ``uniform_mass``: the strict
    CMR-like definition reads them) are kept as variables; provenance is copied.
    """
    if which not in _SELECT:
        raise PromptError(f"which must be one of {', '.join(_SELECT)}; got {which!r}")
    validate(heads, "lag_profile")
    mean_name, sem_name, kind = _SELECT[which]
    if mean_name not in heads:
        raise PromptError(f"this dataset has no {mean_name!r} variable (was it made by head_profile_dataset?)")
    heads = with_attention_mass(heads)  # the mass stays with the heads whichever profile is selected
    keep = {"profile": heads[mean_name]}
    if sem_name is not None:
        keep["sem"] = heads[sem_name]
    if which == "soft_lag_crp":
        keep["possible"] = heads["soft_possible"]
    for name in ("induction_score", "copying_score", "previous_token_score", "duplicate_token_score",
                 "attention_mass", "uniform_mass"):
        if name in heads:
            keep[name] = heads[name]
    out = xr.Dataset(keep, attrs=dict(heads.attrs))
    out.attrs["profile_kind"] = kind
    record = json.loads(out.attrs["provenance"])
    record["selected_profile"] = which
    out.attrs["provenance"] = json.dumps(record, sort_keys=True)
    return validate(out, "lag_profile")


PATTERN_LAYOUT = "BOS (position 0) + copy 1 (positions 1..N) + copy 2 (positions N+1..2N)"


@renamed_keywords(seed="rng")
def attention_pattern_dataset(scores, probs, *, tokens, n_words: int, layer: int, head: int, model: str,
                              prompt: int, rng, provenance: dict | None = None) -> xr.Dataset:
    """One head's attention over one repeated-list prompt, as a dataset of kind ``attention_pattern``.

    Parameters
    ----------
    scores, probs : float (2N+1, 2N+1)
        Pre-softmax scores and post-softmax probabilities, (query, key) over all positions.
    tokens : sequence of str (2N+1,)
        The token at each position (BOS, copy 1, copy 2).
    n_words, layer, head, prompt : int
    rng : int or numpy.random.Generator
        The prompts' seed, kept in attrs ``seed`` (a Generator draws one: ``int(rng.integers(2**63))``).
    model : str
    provenance : dict, optional
        JSON-serialisable record of the model and prompt.

    Returns
    -------
    xarray.Dataset
        Dims ``(query, key)``: ``prob`` (0 on keys after the query) and ``score`` (NaN on keys
        after the query: the causal mask is explicit, not the library's fill value); coords
        ``query_token``/``key_token`` and ``query_copy``/``key_copy`` (0 BOS, 1, 2).
    """
    seed = seed_of(rng)
    seq = 2 * int(n_words) + 1
    scores = np.array(scores, dtype=np.float64)
    probs = np.array(probs, dtype=np.float64)
    if scores.shape != (seq, seq) or probs.shape != (seq, seq) or len(tokens) != seq:
        raise PromptError(f"an attention pattern of N={n_words} words needs ({seq}, {seq}) scores and probabilities "
                          f"and {seq} tokens; got {scores.shape}, {probs.shape} and {len(tokens)}")
    position = np.arange(seq, dtype=np.int64)
    scores[position[None, :] > position[:, None]] = np.nan
    copy = np.minimum((position + n_words - 1) // n_words, 2).astype(np.int64)
    text = np.array([str(t) for t in tokens], dtype=object)
    info = dict(provenance or {})
    info.update(layer=int(layer), head=int(head), prompt=int(prompt), seed=int(seed), n_words=int(n_words))
    attrs = provenance_attrs("attention_pattern", "icl_cmr.adapters.head_profiles.attention_pattern_dataset", **info)
    attrs.update(model=str(model), layer=int(layer), head=int(head), n_words=int(n_words), prompt=int(prompt),
                 seed=int(seed), layout=PATTERN_LAYOUT)
    ds = xr.Dataset(
        {
            "prob": (("query", "key"), probs, {"description": "post-softmax attention probability (0 after the query)"}),
            "score": (("query", "key"), scores, {"description": "pre-softmax attention score (NaN after the query)"}),
        },
        coords={
            "query": position, "key": position,
            "query_token": ("query", text), "key_token": ("key", text.copy()),
            "query_copy": ("query", copy), "key_copy": ("key", copy.copy()),
        },
        attrs=attrs,
    )
    return validate(ds, "attention_pattern")


def validate_attention_pattern(ds: xr.Dataset) -> None:
    """Check an ``attention_pattern`` dataset (one head over one prompt; see docs/schema.md)."""
    kind = "attention_pattern"
    require_variables(ds, ["prob", "score", "query", "key"], kind)
    for name in ("prob", "score"):
        require_dims(ds[name], ["query", "key"], kind, name)
    for name in ("layer", "head", "n_words"):
        value = ds.attrs.get(name)
        if not is_integer(value):
            raise SchemaError(f"attention_pattern dataset needs integer attr {name!r}; got {value!r}")
    seq = 2 * int(ds.attrs["n_words"]) + 1
    for dim in ("query", "key"):
        if not np.array_equal(ds[dim].values, np.arange(seq)):
            raise SchemaError(f"attention_pattern dataset: coord {dim!r} must be the positions 0..2N = 0..{seq - 1} "
                              f"(N = n_words = {ds.attrs['n_words']}); got {ds.sizes[dim]} values")
