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
import pandas as pd
import xarray as xr

from . import _crp
from .checks import lag_window, recall_arrays
from ._numeric import ratio, sem_across
from ._stat import stat_dataset
from .errors import ParameterError, RecallDataError
from .events import as_events, group_index, to_recall_matrix, unit_coordinates
from .masks import study_values, transition_mask
from .schema import provenance_attrs, validate

__all__ = ["lag_crp", "lag_counts", "lag_crp_compound", "input_crp"]


def _windowed(actual, possible, max_lag_full, lags):
    """Select ``lags`` from counts over -max_lag_full..max_lag_full (zeros beyond the list)."""
    out_a = np.zeros(actual.shape[:-1] + (lags.size,), dtype=np.int64)
    out_p = np.zeros_like(out_a)
    inside = np.abs(lags) <= max_lag_full
    out_a[..., inside] = actual[..., lags[inside] + max_lag_full]
    out_p[..., inside] = possible[..., lags[inside] + max_lag_full]
    return out_a, out_p


def lag_counts(recalls, list_length, *, lags=None, group=None):
    """Actual and possible lag-transition counts from a recall matrix (psifr's rule).

    The array-level API: no xarray, no labels. Use it to check any other pipeline (e.g. a
    one-hot "attention" built from a recall sequence) against the human lag-CRP counts.

    Parameters
    ----------
    recalls : array_like of int, shape (n_trials, n_outputs)
        Serial positions 1..list_length, -1 intrusion, 0 padding after the last recall.
    list_length : int or array_like of int, shape (n_trials,)
    lags : None, int or sequence of int
        Lag window: every possible lag (default), an int K for -K..K, or the lags themselves.
    group : array_like of int, shape (n_trials,), optional
        Group 0..G-1 of each trial; counts are summed within groups. Default: one row per trial.

    Returns
    -------
    lags : int64 (n_lags,)
    actual, possible : int64 (n_trials or G, n_lags)
    """
    recalls, lengths = recall_arrays(recalls, list_length)
    longest = int(lengths.max()) if lengths.size else 1
    window = lag_window(lags, longest=longest)
    full = max(longest - 1, 0)
    if group is None:
        actual, possible = _crp.count_lags_per_trial(recalls, lengths, full)
    else:
        group = np.ascontiguousarray(group, dtype=np.int64)
        if group.shape != (recalls.shape[0],) or (group.size and group.min() < 0):
            raise RecallDataError(f"group needs one index >= 0 per trial; got shape {group.shape}")
        n_groups = int(group.max()) + 1 if group.size else 0
        actual, possible = _crp.count_lags(recalls, lengths, group, n_groups, full)
    actual, possible = _windowed(actual, possible, full, window)
    return window, actual, possible


def _parsed(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # kept as text: provenance is a record, not an input
        return text


def _lag_counts(events, recalls, lengths, group, n_groups, lag_key, count_unique, item_query, test_key, test):
    """Actual and possible lag counts per group, over every lag the labels allow, and that span."""
    if lag_key is None and not count_unique and item_query is None and test_key is None and test is None:
        full = int(lengths.max()) - 1
        return (*_crp.count_lags(recalls, lengths, group, n_groups, full), full)
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    if lag_key is None:
        labels = study_values(events, "input")
    else:
        values = study_values(events, lag_key)
        studied = np.arange(values.shape[1])[None, :] < lengths[:, None]
        numbers = pd.to_numeric(pd.Series(values[studied].tolist()), errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(numbers).all() or (numbers != np.round(numbers)).any():
            raise ParameterError(f"lag_key {lag_key!r} must hold whole numbers for every studied item")
        labels = np.zeros(values.shape, np.int64)
        labels[studied] = numbers.astype(np.int64)
    studied = np.arange(labels.shape[1])[None, :] < lengths[:, None]
    full = int(labels[studied].max() - labels[studied].min())
    actual, possible = _crp.count_lags_masked(recalls, lengths, group, n_groups, full,
                                              np.ascontiguousarray(labels), mask.in_pool, mask.code,
                                              mask.allowed, bool(count_unique))
    return actual, possible, full


def lag_crp(events, *, by="subject", lags=None, lag_key=None, count_unique=False, item_query=None,
            test_key=None, test=None) -> xr.Dataset:
    """Lag-CRP of an events dataset, per subject, per trial or pooled.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Kind ``"events"`` (see :func:`cmr.from_table`), or a psifr long table.
    by : {"subject", "trial", None}, keyword only
        ``"subject"``: counts pooled over each subject's lists (psifr's subject-level CRP);
        ``"trial"``: one profile per list; ``None``: pooled over everyone.
    lags : None, int or sequence of int
        Lag window: every possible lag (default), an int K for ``-K..K``, or the lags
        themselves (e.g. ``range(-5, 6)``).
    lag_key : str, optional
        Column of the studied items whose difference is the lag (psifr's ``lag_key``; e.g. a
        block or position-in-category number); default the serial position. Whole numbers.
    count_unique : bool
        Count a possible lag once per transition however many available items have it
        (psifr's ``count_unique``; matters with ``lag_key``).
    item_query, test_key, test
        Restrict the items and transitions counted, as psifr does (see :mod:`cmr.masks`):
        e.g. ``item_query="input <= 12"``, or ``test_key="category", test=lambda a, b: a == b``
        for within-category transitions.

    Returns
    -------
    xarray.Dataset
        Kind ``"lag_profile"``, ``profile_kind="lag_crp"``; dims ``(subject, lag)``,
        ``(trial, lag)`` or ``(lag,)``. Variables ``actual`` and ``possible`` (int64),
        ``profile = actual / possible`` (psifr's ``prob``; NaN where nothing was possible;
        ``profile`` is the values' name in every lag profile, docs/schema.md) and ``sem``:
        per subject or trial, the binomial standard error ``sqrt(p (1 - p) / possible)``
        (treats transitions as independent, so it is a lower bound); pooled, the standard
        error across subjects of the per-subject profiles.
    """
    events = as_events(events, "lag_crp")
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    options = (lag_key, count_unique, item_query, test_key, test)
    if by is None:
        subj_group, _ = group_index(events, "subject")
        n_subj = int(subj_group.max()) + 1
        actual_s, possible_s, full = _lag_counts(events, recalls, lengths, subj_group, n_subj, *options)
        window = lag_window(lags, longest=full + 1)
        actual_s, possible_s = _windowed(actual_s, possible_s, full, window)
        actual, possible = actual_s.sum(axis=0), possible_s.sum(axis=0)
        profile = ratio(actual, possible)
        sem = sem_across(ratio(actual_s, possible_s))
        dims = ("lag",)
        coords = {}
    else:
        n_groups = int(group.max()) + 1
        actual, possible, full = _lag_counts(events, recalls, lengths, group, n_groups, *options)
        window = lag_window(lags, longest=full + 1)
        actual, possible = _windowed(actual, possible, full, window)
        profile = ratio(actual, possible)
        sem = np.sqrt(ratio(profile * (1.0 - profile), possible.astype(np.float64)))
        unit_dims, coords = unit_coordinates(events, by, labels)
        dims = unit_dims + ("lag",)
    coords["lag"] = window
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
                "cmr.lag_crp",
                by="pooled" if by is None else by,
                lags=window.tolist(),
                lag_key=lag_key or "input",
                count_unique=int(bool(count_unique)),
                item_query=item_query or "",
                test_key=test_key or "",
                events_provenance=_parsed(events.attrs.get("provenance", "{}")),
            ),
            "profile_kind": "lag_crp",
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "lag_profile")


def lag_crp_compound(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Lag-CRP conditional on the previous transition's lag.

    ``item_query``, ``test_key`` and ``test`` restrict both transitions of a pair, as psifr
    does (see :func:`lag_crp`).

    Returns
    -------
    xarray.Dataset
        Kind ``"lag_profile"``, ``profile_kind="lag_crp_compound"``; dims
        ``(unit, previous_lag, lag)``; ``profile``, ``actual``, ``possible``.
    """
    events = as_events(events, "lag_crp_compound")
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    n_groups = int(group.max()) + 1
    max_lag = int(lengths.max()) - 1
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    actual, possible = _crp.count_lags_compound(recalls, lengths, group, n_groups, max_lag, mask.in_pool, mask.code,
                                                mask.allowed)
    if by is None:
        actual, possible = actual[0], possible[0]
    unit_dims, unit_coords = unit_coordinates(events, by, labels)
    lags = np.arange(-max_lag, max_lag + 1, dtype=np.int64)
    dims = unit_dims + ("previous_lag", "lag")
    ds = xr.Dataset(
        {
            "profile": (dims, ratio(actual, possible), {"long_name": "conditional response probability"}),
            "actual": (dims, actual, {"long_name": "transitions made at this lag"}),
            "possible": (dims, possible, {"long_name": "transitions possible at this lag"}),
        },
        coords={**unit_coords, "previous_lag": lags, "lag": lags},
        attrs={
            **provenance_attrs("lag_profile", "cmr.lag_crp_compound", by="pooled" if by is None else by),
            "profile_kind": "lag_crp_compound",
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "lag_profile")


def input_crp(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Conditional response probability by the serial positions of both items (psifr's ``input_crp``).

    For each valid transition (as the lag-CRP), ``actual[previous, current]`` counts the
    transition made and ``possible[previous, j]`` every serial position ``j`` still available.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    item_query, test_key, test
        As :func:`lag_crp` (see :mod:`cmr.masks`).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="input_crp"``; dims ``(unit, previous, current)``
        (serial positions, 1-based); ``prob``, ``actual``, ``possible``.

    Notes
    -----
    psifr 0.10 labels this table transposed: its row (previous=i, current=j) holds the counts
    of transitions from j to i. Here ``previous`` is the item recalled first.
    """
    events = as_events(events, "input_crp")
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    n_pos = int(lengths.max())
    actual, possible = _crp.count_input_pairs(recalls, lengths, group, int(group.max()) + 1, n_pos,
                                              mask.in_pool, mask.code, mask.allowed)
    positions = np.arange(1, n_pos + 1, dtype=np.int64)
    return stat_dataset(events, by, labels, "input_crp", ("previous", "current"),
                        {"previous": positions, "current": positions}, {
                            "prob": (ratio(actual, possible), {"long_name": "conditional response probability"}),
                            "actual": (actual, {"long_name": "transitions made from previous to current"}),
                            "possible": (possible, {"long_name": "transitions from previous with current available"}),
                        }, item_query=item_query or "", test_key=test_key or "")
