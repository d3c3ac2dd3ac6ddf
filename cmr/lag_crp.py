"""Lag-CRP (conditional response probability by lag) of free-recall data, psifr-exact.

Definition (Kahana 1996; psifr ``fr.lag_crp``): for each transition between two consecutive
recalls that are both correct first-time recalls, ``actual[lag]`` counts the lag made
(serial position of the "to" item minus that of the "from" item) and ``possible[lag]`` counts,
for each study position not yet recalled at that point (the "to" item included), the lag it
would have been. Transitions to or from intrusions or repeats are skipped, but a repeated or
intruding recall does not restore already recalled items. ``profile = actual / possible``
(NaN where ``possible == 0``). Counts are pooled over lists (and over subjects when pooled).
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from . import _lag_crp
from .errors import RecallDataError
from .schema import provenance_attrs, validate

__all__ = ["lag_crp", "lag_counts", "lag_window", "group_index", "as_events"]

_BY = ("subject", "trial", None)


def as_events(events) -> xr.Dataset:
    """A validated events dataset; a psifr long table (DataFrame) is converted first."""
    if type(events).__name__ == "DataFrame":  # pandas is only imported by cmr.events
        from .events import from_table

        return from_table(events)
    return validate(events, "events")


def lag_window(max_lag, longest_list: int) -> tuple[int, int]:
    """``(first_lag, last_lag)`` of a lag window.

    Parameters
    ----------
    max_lag : None, int or (int, int)
        ``None``: every possible lag, ``-(longest_list-1)..longest_list-1``; an int ``K``:
        ``-K..K``; a pair ``(lo, hi)``: ``lo..hi`` inclusive.
    longest_list : int
    """
    if max_lag is None:
        return -(longest_list - 1), longest_list - 1
    if isinstance(max_lag, (int, np.integer)) and not isinstance(max_lag, bool):
        if max_lag < 0:
            raise RecallDataError(f"max_lag must be >= 0; got {max_lag}")
        return -int(max_lag), int(max_lag)
    try:
        lo, hi = max_lag
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (lo, hi)):
            raise TypeError
    except (TypeError, ValueError):
        raise RecallDataError(
            f"max_lag must be None, an integer K (lags -K..K) or a pair (first, last); got {max_lag!r}"
        ) from None
    if lo > hi:
        raise RecallDataError(f"lag window (first, last) needs first <= last; got ({lo}, {hi})")
    return int(lo), int(hi)


def _recall_arrays(recalls, list_length):
    """Validate and coerce a recall matrix and list lengths for the kernels."""
    recalls = np.asarray(recalls)
    lengths = np.asarray(list_length)
    if recalls.ndim != 2 or recalls.dtype.kind not in "iu":
        raise RecallDataError(
            f"recalls must be a 2-d integer array (trials x outputs); got {recalls.ndim}-d {recalls.dtype}"
        )
    if lengths.ndim == 0:
        lengths = np.full(recalls.shape[0], lengths)
    if lengths.shape != (recalls.shape[0],) or lengths.dtype.kind not in "iu":
        raise RecallDataError(
            f"list_length must be an integer or one integer per trial ({recalls.shape[0]}); got {lengths.shape} {lengths.dtype}"
        )
    if recalls.shape[0] and (lengths < 1).any():
        raise RecallDataError(f"list_length must be >= 1; got {lengths.min()}")
    if ((recalls < -1) | (recalls > lengths[:, None])).any():
        raise RecallDataError(
            "recalls must be serial positions 1..list_length, 0 (padding) or -1 (intrusion); "
            f"got values {recalls.min()}..{recalls.max()} with list lengths up to {lengths.max()}"
        )
    return np.ascontiguousarray(recalls, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64)


def _windowed(actual, possible, max_lag_full, lo, hi):
    """Cut (or zero-pad) the last axis from lags -max_lag_full..max_lag_full to lo..hi."""
    n = hi - lo + 1
    out_a = np.zeros(actual.shape[:-1] + (n,), dtype=np.int64)
    out_p = np.zeros_like(out_a)
    src_lo, src_hi = max(lo, -max_lag_full), min(hi, max_lag_full)
    if src_lo <= src_hi:
        dst = slice(src_lo - lo, src_hi - lo + 1)
        src = slice(src_lo + max_lag_full, src_hi + max_lag_full + 1)
        out_a[..., dst] = actual[..., src]
        out_p[..., dst] = possible[..., src]
    return out_a, out_p


def lag_counts(recalls, list_length, max_lag=None, group=None):
    """Actual and possible lag-transition counts from a recall matrix (psifr's rule).

    The array-level API: no xarray, no labels. Use it to check any other pipeline (e.g. a
    one-hot "attention" built from a recall sequence) against the human lag-CRP counts.

    Parameters
    ----------
    recalls : array_like of int, shape (n_trials, n_outputs)
        Serial positions 1..list_length, -1 intrusion, 0 padding after the last recall.
    list_length : int or array_like of int, shape (n_trials,)
    max_lag : None, int or (int, int)
        Lag window, see :func:`lag_window`; default every possible lag.
    group : array_like of int, shape (n_trials,), optional
        Group 0..G-1 of each trial; counts are summed within groups. Default: one row per trial.

    Returns
    -------
    lags : int64 (n_lags,)
    actual, possible : int64 (n_trials or G, n_lags)
    """
    recalls, lengths = _recall_arrays(recalls, list_length)
    longest = int(lengths.max()) if lengths.size else 1
    lo, hi = lag_window(max_lag, longest)
    full = max(longest - 1, 0)
    if group is None:
        actual, possible = _lag_crp.count_lags_per_trial(recalls, lengths, full)
    else:
        group = np.ascontiguousarray(group, dtype=np.int64)
        if group.shape != (recalls.shape[0],) or (group.size and group.min() < 0):
            raise RecallDataError(f"group needs one index >= 0 per trial; got shape {group.shape}")
        n_groups = int(group.max()) + 1 if group.size else 0
        actual, possible = _lag_crp.count_lags(recalls, lengths, group, n_groups, full)
    actual, possible = _windowed(actual, possible, full, lo, hi)
    return np.arange(lo, hi + 1, dtype=np.int64), actual, possible


def group_index(events: xr.Dataset, by):
    """Group index per trial and the group labels, for ``by`` in ("subject", "trial", None)."""
    if by not in _BY:
        raise RecallDataError(f"by must be 'subject', 'trial' or None (pooled); got {by!r}")
    n_trials = events.sizes["trial"]
    if by is None:
        return np.zeros(n_trials, dtype=np.int64), None
    if by == "trial":
        return np.arange(n_trials, dtype=np.int64), None
    labels, index = np.unique(events["subject"].values, return_inverse=True)
    return index.astype(np.int64).reshape(-1), labels


def _parsed(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _ratio(actual, possible):
    """actual / possible as float64, NaN where possible == 0 (no warning)."""
    out = np.full(actual.shape, np.nan)
    np.divide(actual, possible, out=out, where=possible > 0)
    return out


def _sem_across(profiles):
    """Standard error across axis 0, ignoring NaN; NaN where fewer than two values."""
    valid = ~np.isnan(profiles)
    n = valid.sum(axis=0)
    filled = np.where(valid, profiles, 0.0)
    mean = _ratio(filled.sum(axis=0), n)
    dev = np.where(valid, profiles - mean, 0.0)
    var = _ratio((dev**2).sum(axis=0), np.maximum(n - 1, 0))
    return np.where(n >= 2, np.sqrt(var) / np.sqrt(np.maximum(n, 1)), np.nan)


def lag_crp(events: xr.Dataset, by="subject", max_lag=None) -> xr.Dataset:
    """Lag-CRP of an events dataset, per subject, per trial or pooled.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Kind ``"events"`` (see :func:`cmr.events.from_table`), or a psifr long table.
    by : {"subject", "trial", None}
        ``"subject"``: counts pooled over each subject's lists (psifr's subject-level CRP);
        ``"trial"``: one profile per list; ``None``: pooled over everyone.
    max_lag : None, int or (int, int)
        Lag window: every possible lag (default), ``-K..K`` or ``(first, last)``.

    Returns
    -------
    xarray.Dataset
        Kind ``"lag_profile"``, ``profile_kind="lag_crp"``; dims ``(subject, lag)``,
        ``(trial, lag)`` or ``(lag,)``. Variables ``actual`` and ``possible`` (int64),
        ``profile = actual / possible`` (NaN where nothing was possible) and ``sem``:
        per subject or trial, the binomial standard error ``sqrt(p (1 - p) / possible)``
        (treats transitions as independent, so it is a lower bound); pooled, the standard
        error across subjects of the per-subject profiles.
    """
    events = as_events(events)
    recalls = np.ascontiguousarray(events["recalls"].transpose("trial", "output_position").values, dtype=np.int64)
    lengths = np.ascontiguousarray(events["list_length"].values, dtype=np.int64)
    group, labels = group_index(events, by)
    lo, hi = lag_window(max_lag, int(lengths.max()))
    full = int(lengths.max()) - 1
    if by is None:
        subj_group, _ = group_index(events, "subject")
        n_subj = int(subj_group.max()) + 1
        actual_s, possible_s = _lag_crp.count_lags(recalls, lengths, subj_group, n_subj, full)
        actual_s, possible_s = _windowed(actual_s, possible_s, full, lo, hi)
        actual, possible = actual_s.sum(axis=0), possible_s.sum(axis=0)
        profile = _ratio(actual, possible)
        sem = _sem_across(_ratio(actual_s, possible_s))
        dims = ("lag",)
        coords = {}
    else:
        n_groups = int(group.max()) + 1
        actual, possible = _lag_crp.count_lags(recalls, lengths, group, n_groups, full)
        actual, possible = _windowed(actual, possible, full, lo, hi)
        profile = _ratio(actual, possible)
        sem = np.sqrt(_ratio(profile * (1.0 - profile), possible.astype(np.float64)))
        if by == "subject":
            dims = ("subject", "lag")
            coords = {"subject": labels}
        else:
            dims = ("trial", "lag")
            coords = {name: events[name] for name in ("trial", "subject", "list")}
    coords["lag"] = np.arange(lo, hi + 1, dtype=np.int64)
    ds = xr.Dataset(
        {
            "profile": (dims, profile, {"long_name": "conditional response probability"}),
            "sem": (dims, sem, {"long_name": "standard error of the profile"}),
            "actual": (dims, actual, {"long_name": "transitions made at this lag"}),
            "possible": (dims, possible, {"long_name": "transitions possible at this lag"}),
        },
        coords=coords,
        attrs={
            **provenance_attrs(
                "lag_profile",
                "cmr.lag_crp.lag_crp",
                by="pooled" if by is None else by,
                lag_window=[lo, hi],
                events_provenance=_parsed(events.attrs.get("provenance", "{}")),
            ),
            "profile_kind": "lag_crp",
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "lag_profile")
