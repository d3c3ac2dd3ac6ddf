"""Semantic organisation of free recall, psifr-exact: distance CRP and distance ranks.

Transitions are scored by the distance between the two items in a square item-by-item
``distances`` matrix (e.g. 1 - cosine similarity of word embeddings; psifr ships one for
Morton2013, read by ``icl_cmr.adapters.recall_data.load_item_distances``):

* :func:`distance_crp` - probability of a transition per distance bin (psifr ``distance_crp``;
  Howard & Kahana 2002);
* :func:`distance_rank` - mean percentile rank of each transition's distance among the
  available ones, 1 = always the closest (psifr ``distance_rank``);
* :func:`distance_rank_shifted` - the same relative to items recalled 1..k transitions back
  (psifr ``distance_rank_shifted``; Morton & Polyn 2017);
* :func:`distance_rank_window` and :func:`distance_rank_window_asym` - relative to the items
  studied around the previous item (psifr ``distance_rank_window`` and ``_asym``).

Every function takes ``index_key`` (a column with each studied item's row in ``distances``)
and ``distances`` (an array), or ``index_key=None`` and a DataArray whose ``item`` coordinate
names the rows (items are then looked up by name). Masks as :func:`cmr.lag_crp`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from . import _distance
from ._numeric import ratio
from .checks import integer
from .constants import MAX_LAG
from .errors import ParameterError
from ._stat import stat_dataset
from .events import as_events, group_index, to_recall_matrix
from .masks import study_values, transition_mask

__all__ = [
    "distance_crp",
    "distance_rank",
    "distance_rank_shifted",
    "distance_rank_window",
    "distance_rank_window_asym",
]


def _prepared(events, index_key, distances, by, item_query=None, test_key=None, test=None, analysis="distance_crp"):
    """Events, recall matrix, groups, item rows (int64, n_trials x n_study), matrix and masks."""
    events = as_events(events, analysis)
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    matrix = np.ascontiguousarray(np.asarray(distances, dtype=np.float64))
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ParameterError(f"distances must be a square item-by-item matrix; got shape {matrix.shape}")
    studied = np.arange(events.sizes["study_position"])[None, :] < lengths[:, None]
    index = np.zeros(studied.shape, dtype=np.int64)
    if index_key is None:
        if not isinstance(distances, xr.DataArray) or distances.dims[0] not in distances.coords:
            raise ParameterError(
                "index_key=None needs distances as an xarray.DataArray whose first coordinate names the items "
                "(as load_item_distances returns); otherwise give index_key, a column of row numbers"
            )
        rows = pd.Index(distances[distances.dims[0]].values.astype(str)).get_indexer(
            study_values(events, "item")[studied].astype(str))
        if (rows < 0).any():
            missing = study_values(events, "item")[studied][rows < 0]
            raise ParameterError(
                f"{int((rows < 0).sum())} studied item(s) are not in the distance matrix (e.g. {missing[0]!r})")
        index[studied] = rows
    else:
        values = study_values(events, index_key)[studied]
        if values.dtype.kind not in "iuf":
            values = pd.to_numeric(pd.Series(values.tolist()), errors="coerce").to_numpy()
        values = values.astype(np.float64)
        if not (np.isfinite(values) & (values == np.round(values)) & (values >= 0) & (values < matrix.shape[0])).all():
            raise ParameterError(
                f"index_key {index_key!r} must give each studied item's row in distances: whole numbers "
                f"0..{matrix.shape[0] - 1}"
            )
        index[studied] = values.astype(np.int64)
    # only the studied items' rows and columns: small, so the kernels' lookups stay in cache
    used, compact = np.unique(index[studied], return_inverse=True)
    index[studied] = compact.reshape(-1)
    matrix = np.ascontiguousarray(matrix[np.ix_(used, used)])
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    return events, recalls, lengths, group, labels, index, matrix, mask


def distance_crp(events, index_key, distances, edges, *, centers=None, count_unique=False, by="subject",
                 item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Conditional response probability by distance bin (psifr's ``distance_crp``).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    index_key : str or None
        Column with each studied item's row in ``distances`` (0-based), or None to look items
        up by name in a DataArray.
    distances : array_like or xarray.DataArray, shape (n_items, n_items)
    edges : array_like of float, shape (n_bins + 1,)
        Increasing bin edges; bins are right-closed ``(edges[k], edges[k+1]]`` as psifr's
        ``pandas.cut``; distances outside are not counted.
    centers : array_like of float, shape (n_bins,), optional
        Label of each bin (default: midpoints).
    count_unique : bool
        Count a bin once per transition however many available items fall in it.
    by, item_query, test_key, test
        As :func:`cmr.lag_crp`.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="distance_crp"``; dims ``(unit, center)`` with
        coords ``bin_left`` and ``bin_right``; ``prob``, ``actual``, ``possible``.
    """
    events, recalls, lengths, group, labels, index, matrix, mask = _prepared(
        events, index_key, distances, by, item_query, test_key, test)
    edges = np.ascontiguousarray(np.asarray(edges, dtype=np.float64))
    if edges.ndim != 1 or edges.size < 2 or not (np.diff(edges) > 0).all():
        raise ParameterError(f"edges must be at least two strictly increasing numbers; got {edges.tolist()}")
    centers = edges[:-1] + np.diff(edges) / 2 if centers is None else np.asarray(centers, dtype=np.float64)
    if centers.shape != (edges.size - 1,):
        raise ParameterError(f"centers needs one value per bin ({edges.size - 1}); got shape {centers.shape}")
    cut = _distance.bin_distances(matrix, edges, False)
    histogram = _distance.bin_distances(matrix, edges, True) if count_unique else cut
    actual, possible = _distance.count_distance(recalls, lengths, group, int(group.max()) + 1, index, cut, histogram,
                                                mask.in_pool, mask.code, mask.allowed, edges.size - 1,
                                                bool(count_unique))
    return stat_dataset(events, by, labels, "distance_crp", ("center",),
                    {"center": centers, "bin_left": ("center", edges[:-1]), "bin_right": ("center", edges[1:])}, {
                        "prob": (ratio(actual, possible), {"long_name": "conditional response probability"}),
                        "actual": (actual, {"long_name": "transitions made in the distance bin"}),
                        "possible": (possible, {"long_name": "transitions possible in the distance bin"}),
                    }, index_key=index_key or "item", count_unique=int(bool(count_unique)),
                    item_query=item_query or "", test_key=test_key or "")


def _ranks(events, index_key, distances, max_shift, by, item_query, test_key, test, analysis="distance_rank"):
    events, recalls, lengths, group, labels, index, matrix, mask = _prepared(
        events, index_key, distances, by, item_query, test_key, test, analysis)
    rank_sum, n_ranked = _distance.rank_distance(recalls, lengths, group, int(group.max()) + 1, index, matrix,
                                                 mask.in_pool, mask.code, mask.allowed, max_shift)
    return events, labels, ratio(rank_sum, n_ranked), n_ranked


def distance_rank(events, index_key, distances, *, by="subject", item_query=None, test_key=None,
                  test=None) -> xr.Dataset:
    """Mean percentile rank of transition distances (psifr's ``distance_rank``).

    Each valid transition's distance is ranked among the distances from the previous item to
    every available one: 1 = the closest, 0 = the farthest, ties at their average rank;
    transitions with a single option are skipped.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="distance_rank"``; dims ``(unit,)``; ``rank`` and
        ``n_transitions``.
    """
    events, labels, rank, n = _ranks(events, index_key, distances, 1, by, item_query, test_key, test)
    return stat_dataset(events, by, labels, "distance_rank", (), {}, {
        "rank": (rank[:, 0], {"long_name": "mean distance percentile rank (1 = closest)"}),
        "n_transitions": (n[:, 0], {"long_name": "transitions ranked"}),
    }, index_key=index_key or "item", item_query=item_query or "", test_key=test_key or "")


def distance_rank_shifted(events, index_key, distances, max_shift, *, by="subject", item_query=None,
                          test_key=None, test=None) -> xr.Dataset:
    """Distance rank of each transition relative to the items recalled 1..``max_shift`` steps back.

    psifr's ``distance_rank_shifted``: over runs of ``max_shift`` adjacent valid transitions,
    shift ``-k`` ranks the distance from the item recalled k transitions before the current
    one to the current item, among the distances from it to every available item.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="distance_rank_shifted"``; dims ``(unit, shift)``
        with shifts ``-max_shift..-1``; ``rank`` and ``n_transitions``.
    """
    max_shift = integer(max_shift, "max_shift", maximum=MAX_LAG)  # a wider window would only allocate
    events, labels, rank, n = _ranks(events, index_key, distances, int(max_shift), by, item_query, test_key, test,
                                     "distance_rank_shifted")
    return stat_dataset(events, by, labels, "distance_rank_shifted", ("shift",),
                    {"shift": np.arange(-int(max_shift), 0, dtype=np.int64)}, {
                        "rank": (rank, {"long_name": "mean distance percentile rank (1 = closest)"}),
                        "n_transitions": (n, {"long_name": "transitions ranked"}),
                    }, index_key=index_key or "item", max_shift=int(max_shift))


def _window(events, index_key, distances, window_lags, by, test_key, test, exclude_prev_window,
            analysis="distance_rank_window"):
    window = np.ascontiguousarray(np.asarray(window_lags), dtype=np.int64)
    if window.ndim != 1 or window.size == 0 or (np.asarray(window_lags) != window).any():
        raise ParameterError(f"window_lags must be a non-empty sequence of integer lags; got {window_lags!r}")
    events, recalls, lengths, group, labels, index, matrix, mask = _prepared(
        events, index_key, distances, by, None, test_key, test, analysis)
    sums = _distance.rank_distance_window(recalls, lengths, group, int(group.max()) + 1, index, matrix,
                                          mask.in_pool, mask.code, mask.allowed, window, bool(exclude_prev_window))
    return events, labels, window, sums


def distance_rank_window(events, index_key, distances, window_lags, *, by="subject", test_key=None, test=None,
                         exclude_prev_window=False) -> xr.Dataset:
    """Distance rank relative to the items studied at ``window_lags`` around the previous item.

    psifr's ``distance_rank_window``: a transition counts when every window position exists
    in the list and the current item is not in the window; window items are never possible;
    with ``exclude_prev_window``, transitions whose recall before the previous one was in the
    window are skipped.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="distance_rank_window"``; dims ``(unit, lag)``;
        ``rank`` and ``n`` (transitions ranked, psifr's column name).
    """
    events, labels, window, (rank_sum, n, _, _) = _window(events, index_key, distances, window_lags, by,
                                                           test_key, test, exclude_prev_window)
    return stat_dataset(events, by, labels, "distance_rank_window", ("lag",), {"lag": window}, {
        "rank": (ratio(rank_sum, n), {"long_name": "mean distance percentile rank (1 = closest)"}),
        "n": (n, {"long_name": "transitions ranked"}),
    }, index_key=index_key or "item", window_lags=window.tolist(), exclude_prev_window=int(bool(exclude_prev_window)))


def distance_rank_window_asym(events, index_key, distances, *, by="subject", test_key=None, test=None,
                              exclude_prev_window=False) -> xr.Dataset:
    """Asymmetry of the window distance rank: rank from the item after minus from the item before.

    psifr's ``distance_rank_window_asym``: :func:`distance_rank_window` with lags ``[-1, 1]``;
    per transition ``rank[+1] - rank[-1]``, averaged where both are defined.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="distance_rank_window_asym"``; dims ``(unit,)``;
        ``asym`` and ``n``.
    """
    events, labels, _, (_, _, asym_sum, n) = _window(events, index_key, distances, [-1, 1], by, test_key, test,
                                                     exclude_prev_window, "distance_rank_window_asym")
    return stat_dataset(events, by, labels, "distance_rank_window_asym", (), {}, {
        "asym": (ratio(asym_sum, n), {"long_name": "mean rank from the next minus from the previous study item"}),
        "n": (n, {"long_name": "transitions with both ranks defined"}),
    }, index_key=index_key or "item", exclude_prev_window=int(bool(exclude_prev_window)))
