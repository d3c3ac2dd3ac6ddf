"""Recall dynamics beyond psifr: inter-response times, latency by lag, stop probability.

As pybeh and the MATLAB behavioural toolbox (EMBAM) compute them (Kahana 1996; Howard &
Kahana 1999; Kahana, Howard, Zaromb & Wingfield 2002):

* :func:`irt` - mean inter-response time by output position: the time from the recall at
  output k - 1 to the one at output k, over transitions between two first-time correct
  recalls (the lag-CRP's rule);
* :func:`lag_crl` - conditional response latency: the mean inter-response time of those
  transitions by their lag;
* :func:`stop_probability` - the probability that recall ends after output k, given that
  output k was reached (every recall event counts toward k).

Times come from a column on the recall rows (``time_key``: the onset of each recall, in the
table's units, counted from any fixed point of the recall period). psifr's bundled Morton2013
has no such column: its ``response_time`` on recall rows repeats the studied item's
study-task response time (equal for 99.9 % of matched recalls), so it is not a recall latency.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from . import _timing
from ._numeric import ratio
from .errors import ParameterError
from ._stat import stat_dataset
from .events import as_events, group_index, to_recall_matrix

__all__ = ["irt", "lag_crl", "stop_probability"]


def _latencies(events, time_key, by, analysis=None):
    events = as_events(events, analysis)
    name = f"recall_{time_key}"
    if name not in events or events[name].dtype.kind != "f":
        columns = [v[len("recall_"):] for v in events.data_vars if v.startswith("recall_") and v != "recall_item"
                   and events[v].dtype.kind == "f"]
        raise ParameterError(f"no numeric recall-time column {time_key!r} on the recall rows; numeric recall "
                             f"columns: {', '.join(columns) or 'none'}")
    recalls, lengths = to_recall_matrix(events)
    times = np.ascontiguousarray(events[name].transpose("trial", "output_position").values, dtype=np.float64)
    group, labels = group_index(events, by)
    max_lag = int(lengths.max()) - 1
    sums = _timing.sum_latencies(recalls, lengths, group, int(group.max()) + 1, times, max_lag)
    return events, labels, max_lag, sums


def irt(events, *, time_key="rt", by="subject") -> xr.Dataset:
    """Mean inter-response time by output position.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    time_key : str
        Column with each recall's onset time (recall rows).
    by : {"subject", "trial", None}

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="irt"``; dims ``(unit, output_position)``;
        ``irt`` (mean time from the previous recall, in the column's units; NaN at output 1
        and where no transition counted) and ``n_transitions``.
    """
    events, labels, _, (total, n, _, _) = _latencies(events, time_key, by)
    return stat_dataset(events, by, labels, "irt", ("output_position",),
                 {"output_position": np.arange(1, total.shape[1] + 1, dtype=np.int64)}, {
                     "irt": (ratio(total, n), {"long_name": "mean inter-response time", "units": time_key}),
                     "n_transitions": (n, {"long_name": "transitions timed"}),
                 }, time_key=time_key)


def lag_crl(events, *, time_key="rt", by="subject") -> xr.Dataset:
    """Conditional response latency: mean inter-response time by lag (Kahana 1996).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="lag_crl"``; dims ``(unit, lag)``; ``crl`` (mean
        inter-response time of transitions at the lag) and ``n_transitions``.
    """
    events, labels, max_lag, (_, _, total, n) = _latencies(events, time_key, by, "lag_crl")
    return stat_dataset(events, by, labels, "lag_crl", ("lag",), {"lag": np.arange(-max_lag, max_lag + 1, dtype=np.int64)}, {
        "crl": (ratio(total, n), {"long_name": "mean inter-response time at the lag", "units": time_key}),
        "n_transitions": (n, {"long_name": "transitions timed"}),
    }, time_key=time_key)


def stop_probability(events, *, by="subject") -> xr.Dataset:
    """Probability that recall stops after output k, given that it reached output k.

    Every recall event (intrusions and repeats too) advances the output position; output 0 is
    the start, so ``prob`` at 0 is the share of lists with no recall.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="stop_probability"``; dims ``(unit,
        output_position)`` with positions 0..n_outputs; ``prob``, ``actual`` (lists ending
        at k), ``possible`` (lists reaching k).
    """
    events = as_events(events)
    recalls, _ = to_recall_matrix(events)
    group, labels = group_index(events, by)
    n_groups = int(group.max()) + 1
    n_made = (recalls != 0).sum(axis=1)
    positions = np.arange(recalls.shape[1] + 1)
    actual = np.zeros((n_groups, positions.size), dtype=np.int64)
    possible = np.zeros_like(actual)
    np.add.at(actual, (group, n_made), 1)
    np.add.at(possible, group, (positions[None, :] <= n_made[:, None]).astype(np.int64))
    return stat_dataset(events, by, labels, "stop_probability", ("output_position",), {"output_position": positions}, {
        "prob": (ratio(actual, possible), {"long_name": "probability of stopping after the output"}),
        "actual": (actual, {"long_name": "lists whose last recall is at the output"}),
        "possible": (possible, {"long_name": "lists that reached the output"}),
    })
