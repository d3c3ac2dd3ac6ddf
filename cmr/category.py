"""Category organisation of free recall, psifr-exact: category CRP and category clustering.

* :func:`category_crp` - probability of a within-category transition when one was possible
  (psifr ``fr.category_crp``; Polyn, Norman & Kahana 2009).
* :func:`category_clustering` - list-based clustering (LBC; Stricker, Brown, Wixted, Baldo &
  Delis 2002) and the adjusted ratio of clustering (ARC; Roenker, Thompson & Brown 1971),
  averaged over lists (psifr ``fr.category_clustering``).

Both take an events dataset or a psifr long table with a category column on the study rows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from . import _category
from ._numeric import ratio
from .errors import RecallDataError
from ._stat import stat_dataset
from .events import as_events, group_index, to_recall_matrix
from .masks import study_values, transition_mask

__all__ = ["category_crp", "category_clustering"]


def _category_codes(events, category_key, lengths):
    """int64 code of each studied item's category, in sorted order of the labels (-1 for missing)."""
    values = study_values(events, category_key)
    studied = np.arange(values.shape[1])[None, :] < lengths[:, None]
    flat, uniques = pd.factorize(values[studied], use_na_sentinel=True)  # hashing: fast on text
    uniques = np.asarray(uniques, dtype=object)
    keep = np.array([u != "" for u in uniques.tolist()], dtype=bool)  # '' is a missing text cell
    try:
        order = np.argsort(uniques[keep].astype(np.float64), kind="stable")
    except (TypeError, ValueError):
        order = np.argsort(uniques[keep].astype(str), kind="stable")
    rank = np.full(uniques.size + 1, -1, dtype=np.int64)  # last entry: psifr's NaN code -1
    rank[np.nonzero(keep)[0][order]] = np.arange(order.size)
    codes = np.full(values.shape, -1, dtype=np.int64)
    codes[studied] = rank[flat]
    return codes, int(order.size), int((codes[studied] < 0).sum())


def category_crp(events, *, category_key="category", by="subject", item_query=None, test_key=None,
                 test=None) -> xr.Dataset:
    """Within-category transition probability (psifr's ``category_crp``).

    For each valid transition (both recalls correct and first-time, as the lag-CRP),
    ``actual`` counts it when both items share a category and ``possible`` counts it when an
    item of the "from" item's category was still available.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    category_key : str
        Column with each studied item's category.
    by : {"subject", "trial", None}
    item_query, test_key, test
        As :func:`cmr.lag_crp` (see :mod:`cmr.masks`).

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="category_crp"``; dims ``(unit,)``; ``prob``,
        ``actual``, ``possible`` (int64).
    """
    events = as_events(events, "category_crp")
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    codes, _, _ = _category_codes(events, category_key, lengths)
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    actual, possible, expected = _category.count_category(recalls, lengths, group, int(group.max()) + 1, codes,
                                                          mask.in_pool, mask.code, mask.allowed)
    return stat_dataset(events, by, labels, "category_crp", (), {}, {
        "prob": (ratio(actual, possible), {"long_name": "within-category transition probability"}),
        "actual": (actual, {"long_name": "within-category transitions made"}),
        "possible": (possible, {"long_name": "transitions with a same-category item available"}),
        # after psifr's variables, so their order and values stay those of fr.category_crp
        "expected": (expected, {"long_name": "within-category transitions expected by chance (sum over counted "
                                             "transitions of the same-category share of the available items)"}),
        "chance": (ratio(expected, possible), {"long_name": "within-category transition probability expected by "
                                                            "chance (expected / possible)"}),
    }, category_key=category_key, item_query=item_query or "", test_key=test_key or "")


def category_clustering(events, *, category_key="category", by="subject") -> xr.Dataset:
    """Category clustering: LBC and ARC per list, averaged per unit (psifr's ``category_clustering``).

    Intrusions and repeats are removed from each recall sequence first, as psifr does. ARC is
    undefined (NaN) for a list whose maximum clustering equals the expected one (one category
    recalled, or fewer than two recalls); such lists are left out of the mean. Lists without a
    correct recall count for LBC (observed 0, expected ``-(m - 1)/(n - 1)``), as in psifr.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    category_key : str
        Column with each studied item's category; every studied item needs one.
    by : {"subject", "trial", None}
        ``None`` averages over every list.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="category_clustering"``; dims ``(unit,)``;
        ``lbc``, ``arc`` (float64), ``n_lists`` and ``n_lists_arc`` (lists averaged).
    """
    events = as_events(events, "category_clustering")
    recalls, lengths = to_recall_matrix(events)
    group, labels = group_index(events, by)
    codes, n_categories, n_missing = _category_codes(events, category_key, lengths)
    if n_missing:
        raise RecallDataError(
            f"category clustering needs a category for every studied item; {n_missing} studied item(s) have "
            f"none in {category_key!r}"
        )
    if (lengths < 2).any():
        raise RecallDataError("category clustering needs lists of at least two items (LBC divides by n - 1)")
    lbc, arc = _category.cluster_lists(recalls, lengths, codes, max(n_categories, 1))
    n_groups = int(group.max()) + 1
    defined = ~np.isnan(arc)
    n_lists = np.bincount(group, minlength=n_groups).astype(np.int64)
    n_arc = np.bincount(group, weights=defined, minlength=n_groups).astype(np.int64)
    lbc_mean = ratio(np.bincount(group, weights=lbc, minlength=n_groups), n_lists)
    arc_mean = ratio(np.bincount(group, weights=np.where(defined, arc, 0.0), minlength=n_groups), n_arc)
    return stat_dataset(events, by, labels, "category_clustering", (), {}, {
        "lbc": (lbc_mean, {"long_name": "list-based clustering (observed - expected same-category transitions)"}),
        "arc": (arc_mean, {"long_name": "adjusted ratio of clustering"}),
        "n_lists": (n_lists, {"long_name": "lists averaged for lbc"}),
        "n_lists_arc": (n_arc, {"long_name": "lists averaged for arc (arc defined)"}),
    }, category_key=category_key)
