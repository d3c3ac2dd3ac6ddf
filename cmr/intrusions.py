"""Intrusions: prior-list intrusions by list lag (psifr ``pli_list_lag``) and intrusion rates.

A recall that matches no item studied in its list is an intrusion (``recalls == -1`` in the
events dataset). It is a *prior-list* intrusion when the subject studied the item in an
earlier list, with list lag = this list's number minus that list's (the most recent such list);
otherwise an *extra-list* intrusion. Lists are numbered 1..n in each subject's order (sessions
in order when the table had ``list_keys``), as psifr assumes of its ``list`` column.

psifr 0.10 counts an intrusion once per earlier (and later) list that studied the item, since
its merge repeats the row; here each recall counts once, at its most recent earlier list.
The two agree wherever a subject studied each item at most once before it intruded.
"""
from __future__ import annotations


import numpy as np
import pandas as pd
import xarray as xr

from . import _intrusions
from .checks import integer, parse_json
from .constants import MAX_LAG
from ._numeric import ratio
from .errors import ParameterError, RecallDataError
from .events import as_events, group_index, to_recall_matrix, unit_coordinates
from .lab_tables import item_keys
from .schema import provenance_attrs, validate

__all__ = ["intrusion_list_lags", "pli_list_lag", "intrusion_rates"]


def intrusion_list_lags(events) -> np.ndarray:
    """List lag of each recall's item: 0 correct or padding, k >= 1 prior-list intrusion, -1 extra-list.

    Returns
    -------
    numpy.ndarray of int64, shape (n_trials, n_outputs)
    """
    events = as_events(events)
    recalls, lengths = to_recall_matrix(events)
    subject, _ = group_index(events, "subject")
    return _list_lags(events, recalls, lengths, subject, _list_numbers(subject))


def _list_numbers(subject):
    """Number 1..n of each trial within its subject (trials come grouped by subject, in order)."""
    return (pd.Series(subject).groupby(subject).cumcount().to_numpy() + 1).astype(np.int64)


def _list_lags(events, recalls, lengths, subject, ordinal):
    normalize = bool(events.attrs.get("normalize_items", 0))
    study = events["study_item"].transpose("trial", "study_position").values
    r_trial, r_col = np.nonzero(recalls == -1)  # only intrusions need a code
    intruded = events["recall_item"].transpose("trial", "output_position").values[r_trial, r_col]
    codes, uniques = pd.factorize(np.concatenate([item_keys(study.ravel(), normalize), item_keys(intruded, normalize)]))
    study_code = np.ascontiguousarray(codes[:study.size].reshape(study.shape), dtype=np.int64)
    recall_code = np.full(recalls.shape, -1, dtype=np.int64)
    recall_code[r_trial, r_col] = codes[study.size:]
    return _intrusions.intrusion_lags(recalls, lengths, subject, ordinal, study_code, recall_code, len(uniques))


def _by_subject_or_pooled(by):
    if by not in ("subject", None):
        raise ParameterError(f"by must be 'subject' or None (pooled) for list-lag statistics; got {by!r}")


def pli_list_lag(events, max_lag, *, by="subject") -> xr.Dataset:
    """Prior-list intrusions by list lag (psifr's ``pli_list_lag``).

    The first ``max_lag`` lists of each subject are left out, so every lag 1..max_lag was
    possible for the lists counted.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    max_lag : int
        Largest list lag counted (>= 1).
    by : {"subject", None}

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="pli_list_lag"``; dims ``(unit, list_lag)``;
        ``count`` (prior-list intrusions at the lag, int64), ``per_list`` (count / lists
        counted), ``prob`` (count / every intrusion in the lists counted, extra-list ones
        included; NaN without intrusions); and per unit ``n_lists``, ``n_intrusions``.
    """
    _by_subject_or_pooled(by)
    max_lag = integer(max_lag, "max_lag", maximum=MAX_LAG)  # a wider window would only allocate
    events = as_events(events)
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, "subject")
    ordinal = _list_numbers(group)
    lags = _list_lags(events, recalls, lengths, group, ordinal)
    n_groups = int(group.max()) + 1
    counted = ordinal > max_lag
    n_lists = np.bincount(group[counted], minlength=n_groups).astype(np.int64)
    n_intrusions = np.bincount(group[counted], weights=(recalls[counted] == -1).sum(axis=1),
                               minlength=n_groups).astype(np.int64)
    count = np.zeros((n_groups, max_lag), dtype=np.int64)
    t, o = np.nonzero((lags >= 1) & (lags <= max_lag) & counted[:, None])
    np.add.at(count, (group[t], lags[t, o] - 1), 1)
    if by is None:
        count, n_lists, n_intrusions = count.sum(0, keepdims=True), n_lists.sum(keepdims=True), n_intrusions.sum(
            keepdims=True)
    unit_dims, unit_coords = unit_coordinates(events, by, labels)
    pick = (lambda x: x[0]) if by is None else (lambda x: x)
    ds = xr.Dataset(
        {
            "count": (unit_dims + ("list_lag",), pick(count), {"long_name": "prior-list intrusions at the list lag"}),
            "per_list": (unit_dims + ("list_lag",), pick(ratio(count, n_lists[:, None])),
                         {"long_name": "prior-list intrusions at the list lag per list counted"}),
            "prob": (unit_dims + ("list_lag",), pick(ratio(count, n_intrusions[:, None])),
                     {"long_name": "share of all intrusions at the list lag"}),
            "n_lists": (unit_dims, pick(n_lists), {"long_name": "lists counted (after the first max_lag)"}),
            "n_intrusions": (unit_dims, pick(n_intrusions), {"long_name": "intrusions in the lists counted"}),
        },
        coords={**unit_coords, "list_lag": np.arange(1, max_lag + 1, dtype=np.int64)},
        attrs={
            **provenance_attrs("recall_stat", "cmr.pli_list_lag", by="pooled" if by is None else by, max_lag=max_lag),
            "stat_kind": "pli_list_lag",
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "recall_stat")


def intrusion_rates(events, *, by="subject") -> xr.Dataset:
    """Recalls, intrusions (prior-list and extra-list apart) and repeats, per list on average.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="intrusion_rates"``; dims ``(unit,)``; counts
        ``n_lists``, ``n_recalls`` (every recall event), ``n_correct`` (first-time correct),
        ``n_repeats``, ``n_prior_list``, ``n_extra_list`` (int64) and the rates per list
        ``correct_per_list``, ``repeats_per_list``, ``prior_list_per_list``,
        ``extra_list_per_list`` and ``intrusion_share`` (intrusions / recalls).
    """
    events = as_events(events)
    recalls, lengths = to_recall_matrix(events)
    subject, _ = group_index(events, "subject")
    lags = _list_lags(events, recalls, lengths, subject, _list_numbers(subject))
    group, labels = group_index(events, by)
    n_groups = int(group.max()) + 1
    positive = np.where(recalls > 0, recalls, 0)
    first = np.zeros(recalls.shape, dtype=bool)
    for o in range(recalls.shape[1]):  # over outputs (tens), not events: a recall is first unless seen before
        first[:, o] = (positive[:, o] > 0) & ~(positive[:, :o] == positive[:, o:o + 1]).any(axis=1)
    per_trial = {
        "n_recalls": (recalls != 0).sum(1),
        "n_correct": first.sum(1),
        "n_repeats": ((recalls > 0) & ~first).sum(1),
        "n_prior_list": (lags >= 1).sum(1),
        "n_extra_list": (lags == -1).sum(1),
    }
    counts = {name: np.bincount(group, weights=value, minlength=n_groups).astype(np.int64)
              for name, value in per_trial.items()}
    counts["n_lists"] = np.bincount(group, minlength=n_groups).astype(np.int64)
    unit_dims, unit_coords = unit_coordinates(events, by, labels)
    pick = (lambda x: x[0]) if by is None else (lambda x: x)
    variables = {name: (unit_dims, pick(value), {"long_name": name.replace("n_", "number of ").replace("_", " ")})
                 for name, value in counts.items()}
    for name in ("correct", "repeats", "prior_list", "extra_list"):
        variables[f"{name}_per_list"] = (unit_dims, pick(ratio(counts[f"n_{name}"], counts["n_lists"])),
                                         {"long_name": f"{name.replace('_', '-')} recalls per list"})
    variables["intrusion_share"] = (unit_dims, pick(ratio(counts["n_prior_list"] + counts["n_extra_list"],
                                                          counts["n_recalls"])),
                                    {"long_name": "intrusions / recall events"})
    ds = xr.Dataset(variables, coords=unit_coords, attrs={
        **provenance_attrs("recall_stat", "cmr.intrusion_rates", by="pooled" if by is None else by,
                           events_provenance=parse_json(events.attrs.get("provenance", "{}"),
                                                                        "events attribute provenance", RecallDataError)),
        "stat_kind": "intrusion_rates",
        "unit_kind": "pooled" if by is None else by,
    })
    return validate(ds, "recall_stat")
