"""Free-recall summary statistics, psifr-exact: SPC, PFR/PNR, compound lag-CRP, lag rank.

All take an events dataset (see :mod:`cmr.events`; a psifr long table is converted) and ``by`` = ``"subject"`` (default),
``"trial"`` or ``None`` (pooled over everyone), and return labelled datasets with counts:

* :func:`spc` - serial position curve: ``prob[serial_position]`` = fraction of lists in which
  that position was recalled at least once (psifr ``fr.spc``).
* :func:`pnr` / :func:`pfr` - probability of nth / first recall: at the n-th *valid* recall
  (intrusions and repeats skipped, as psifr ``fr.pnr``), ``actual`` counts the position
  recalled and ``possible`` every position still available. PFR is output 1, so lists with no
  correct recall do not count.
* :func:`lag_crp_compound` - lag-CRP conditional on the lag of the previous transition
  (psifr ``fr.lag_crp_compound``); a ``lag_profile`` with batch dim ``previous_lag``.
* :func:`lag_rank` - mean percentile rank of each transition's absolute lag among the
  available ones, 1 = always the closest (psifr ``fr.lag_rank``).
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from . import _lag_crp, _recall_stats
from .lag_crp import _ratio, as_events, group_index
from .schema import provenance_attrs, validate

__all__ = ["spc", "pnr", "pfr", "lag_crp_compound", "lag_rank"]


def _prepared(events, by):
    events = as_events(events)
    recalls = np.ascontiguousarray(events["recalls"].transpose("trial", "output_position").values, dtype=np.int64)
    lengths = np.ascontiguousarray(events["list_length"].values, dtype=np.int64)
    group, labels = group_index(events, by)
    n_groups = int(group.max()) + 1
    return events, recalls, lengths, group, n_groups, labels


def _unit_coords(events, by, labels):
    if by is None:
        return (), {}
    if by == "subject":
        return ("subject",), {"subject": labels}
    return ("trial",), {name: events[name] for name in ("trial", "subject", "list")}


def _squeeze(array, by):
    """Drop the single pooled group axis."""
    return array[0] if by is None else array


def _stat_dataset(events, by, labels, stat_kind, created_by, dims, coords, data):
    unit_dims, unit_coords = _unit_coords(events, by, labels)
    variables = {name: (unit_dims + dims, _squeeze(value, by), attrs) for name, (value, attrs) in data.items()}
    ds = xr.Dataset(
        variables,
        coords={**unit_coords, **coords},
        attrs={
            **provenance_attrs("recall_stat", created_by, by="pooled" if by is None else by),
            "stat_kind": stat_kind,
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "recall_stat")


def spc(events: xr.Dataset, by="subject") -> xr.Dataset:
    """Serial position curve.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="spc"``; dims ``(unit, serial_position)``;
        ``prob`` = ``actual / possible``, ``actual`` lists with the position recalled,
        ``possible`` lists with the position studied.
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    n_pos = int(lengths.max())
    actual, possible = _recall_stats.count_recalled(recalls, lengths, group, n_groups, n_pos)
    return _stat_dataset(
        events, by, labels, "spc", "cmr.recall_stats.spc", ("serial_position",),
        {"serial_position": np.arange(1, n_pos + 1, dtype=np.int64)},
        {
            "prob": (_ratio(actual, possible), {"long_name": "recall probability"}),
            "actual": (actual, {"long_name": "lists in which the position was recalled"}),
            "possible": (possible, {"long_name": "lists in which the position was studied"}),
        },
    )


def pnr(events: xr.Dataset, by="subject") -> xr.Dataset:
    """Probability of nth recall by output and serial position.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="pnr"``; dims ``(unit, output_position,
        serial_position)``; ``prob``, ``actual``, ``possible``.
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    n_pos = int(lengths.max())
    actual, possible = _recall_stats.count_outputs(recalls, lengths, group, n_groups, n_pos)
    positions = np.arange(1, n_pos + 1, dtype=np.int64)
    return _stat_dataset(
        events, by, labels, "pnr", "cmr.recall_stats.pnr", ("output_position", "serial_position"),
        {"output_position": positions, "serial_position": positions},
        {
            "prob": (_ratio(actual, possible), {"long_name": "probability of nth recall"}),
            "actual": (actual, {"long_name": "nth correct recalls of the position"}),
            "possible": (possible, {"long_name": "nth correct recalls when the position was available"}),
        },
    )


def pfr(events: xr.Dataset, by="subject") -> xr.Dataset:
    """Probability of first recall: :func:`pnr` at output position 1 (``stat_kind="pfr"``)."""
    first = pnr(events, by).sel(output_position=1, drop=True)
    first.attrs["stat_kind"] = "pfr"
    return validate(first, "recall_stat")


def lag_crp_compound(events: xr.Dataset, by="subject") -> xr.Dataset:
    """Lag-CRP conditional on the previous transition's lag.

    Returns
    -------
    xarray.Dataset
        Kind ``"lag_profile"``, ``profile_kind="lag_crp_compound"``; dims
        ``(unit, previous_lag, lag)``; ``profile``, ``actual``, ``possible``.
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    max_lag = int(lengths.max()) - 1
    actual, possible = _lag_crp.count_lags_compound(recalls, lengths, group, n_groups, max_lag)
    actual, possible = _squeeze(actual, by), _squeeze(possible, by)
    unit_dims, unit_coords = _unit_coords(events, by, labels)
    lags = np.arange(-max_lag, max_lag + 1, dtype=np.int64)
    dims = unit_dims + ("previous_lag", "lag")
    ds = xr.Dataset(
        {
            "profile": (dims, _ratio(actual, possible), {"long_name": "conditional response probability"}),
            "actual": (dims, actual, {"long_name": "transitions made at this lag"}),
            "possible": (dims, possible, {"long_name": "transitions possible at this lag"}),
        },
        coords={**unit_coords, "previous_lag": lags, "lag": lags},
        attrs={
            **provenance_attrs("lag_profile", "cmr.recall_stats.lag_crp_compound", by="pooled" if by is None else by),
            "profile_kind": "lag_crp_compound",
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "lag_profile")


def lag_rank(events: xr.Dataset, by="subject") -> xr.Dataset:
    """Mean lag rank of transitions (1 = always the closest available lag, 0.5 = chance).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="lag_rank"``; dims ``(unit,)``; ``rank`` (NaN when
        no transition could be ranked) and ``n_transitions`` (ranked transitions).
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    rank_sum, n_ranked = _recall_stats.rank_lags(recalls, lengths, group, n_groups)
    return _stat_dataset(
        events, by, labels, "lag_rank", "cmr.recall_stats.lag_rank", (), {},
        {
            "rank": (_ratio(rank_sum, n_ranked), {"long_name": "mean absolute-lag percentile rank"}),
            "n_transitions": (n_ranked, {"long_name": "transitions ranked"}),
        },
    )
