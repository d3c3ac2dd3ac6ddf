"""Free-recall summary statistics, psifr-exact: SPC, PFR/PNR and lag rank.

All take an events dataset or a psifr long table (DataFrame) and ``by`` = ``"subject"``
(default), ``"trial"`` or ``None`` (pooled over everyone), and return labelled datasets with
counts:

* :func:`spc` - serial position curve: ``prob[serial_position]`` = fraction of lists in which
  that position was recalled at least once (psifr ``fr.spc``).
* :func:`pnr` / :func:`pfr` - probability of nth / first recall: at the n-th *valid* recall
  (intrusions and repeats skipped, as psifr ``fr.pnr``), ``actual`` counts the position
  recalled and ``possible`` every position still available. PFR is output 1, so lists with no
  correct recall do not count.
* :func:`lag_rank` - mean percentile rank of each transition's absolute lag among the
  available ones, 1 = always the closest (psifr ``fr.lag_rank``).
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import xarray as xr

from . import _recall_stats
from ._numeric import ratio
from .events import as_events, group_index, unit_coordinates
from .masks import item_mask, transition_mask
from ._repetition import repeated_pnr_counts, repeated_spc_counts
from ._presentations import has_repeats, presentation_items, refuse_repeats
from .schema import provenance_attrs, validate, validate_recall_stat

__all__ = ["spc", "pnr", "pfr", "lag_rank"]


def _prepared(events, by):
    events = as_events(events)  # validated once: the arrays are read from its variables directly
    recalls = events.variables["recalls"]
    if recalls.dims != ("trial", "output_position"):
        recalls = recalls.transpose("trial", "output_position")
    recalls = np.ascontiguousarray(recalls.values, dtype=np.int64)
    lengths = np.ascontiguousarray(events.variables["list_length"].values, dtype=np.int64)
    group, labels = _group_index(events, by)
    return events, recalls, lengths, group, int(group.max()) + 1, labels


def _group_index(events, by):
    """:func:`cmr.events.group_index`, kept for the last few subject columns (by content).

    The kept arrays are only read (by the kernels, and as index labels, which are read-only).
    """
    subjects = events.variables["subject"].values if by == "subject" else None
    if subjects is None or subjects.dtype.hasobject or subjects.nbytes > _MAX_KEY_BYTES:
        return group_index(events, by)
    key = (subjects.dtype.str, subjects.shape, subjects.tobytes())
    found = _GROUPS.get(key)
    if found is None:
        found = group_index(events, by)
        _GROUPS[key] = found
        try:
            while len(_GROUPS) > _MAX_GROUPS:
                _GROUPS.popitem(last=False)  # the oldest
        except KeyError:  # emptied meanwhile by another thread
            pass
    return found


_GROUPS: OrderedDict = OrderedDict()
_MAX_GROUPS = 8
_MAX_KEY_BYTES = 2**20  # longer subject columns are grouped afresh (the kept keys stay small)


def _stat_dataset(events, by, labels, stat_kind, created_by, dims, coords, data):
    attrs = {
        **provenance_attrs("recall_stat", created_by, by="pooled" if by is None else by),
        "stat_kind": stat_kind,
        "unit_kind": "pooled" if by is None else by,
    }
    values = {name: value[0] if by is None else value for name, (value, _) in data.items()}
    key = _layout_key(by, labels, stat_kind, dims, coords, data)
    template = _LAYOUTS.get(key) if key is not None else None
    if template is None:
        unit_dims, unit_coords = unit_coordinates(events, by, labels)
        variables = {name: (unit_dims + dims, values[name], var_attrs) for name, (_, var_attrs) in data.items()}
        ds = xr.Dataset(variables, coords={**unit_coords, **coords}, attrs=attrs)
        validate(ds, "recall_stat")
        if key is not None:
            _remember_layout(key, ds)
        return ds
    # the layout of a dataset that passed validate: only the values and the provenance are new,
    # so only what they can break is checked again
    ds = template.copy(deep=False, data=values)
    ds.attrs = attrs
    validate_recall_stat(ds)
    return ds


#: labelled layouts of recent results (coords, indexes, variable attrs), by what makes them;
#: building the two indexes of a dataset costs more than the counting itself
_LAYOUTS: OrderedDict = OrderedDict()
_MAX_LAYOUTS = 32


def _layout_key(by, labels, stat_kind, dims, coords, data):
    """What fixes a result's layout; None where it is not cheap to tell (by trial, object labels)."""
    if by == "trial" or (labels is not None and labels.dtype.hasobject):
        return None
    arrays = [] if labels is None else [labels]
    arrays += list(coords.values())
    if any(not isinstance(a, np.ndarray) or a.dtype.hasobject for a in arrays):
        return None
    return (
        by, stat_kind, dims,
        None if labels is None else (labels.dtype.str, labels.shape, labels.tobytes()),
        tuple((name, value.dtype.str, value.shape, value.tobytes()) for name, value in coords.items()),
        tuple((name, np.asarray(value).dtype.str, np.shape(value), tuple(attrs.items()))
              for name, (value, attrs) in data.items()),
    )


def _remember_layout(key, ds):
    while len(_LAYOUTS) >= _MAX_LAYOUTS:
        try:
            _LAYOUTS.popitem(last=False)  # the oldest
        except KeyError:  # emptied meanwhile by another thread
            break
    _LAYOUTS[key] = ds.copy(deep=False)  # a copy: changes to the returned dataset stay there


def spc(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Serial position curve.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    item_query, test_key, test
        The masks of :func:`pnr` (psifr's ``spc`` has none): only studied items in the pool
        and passing ``test(value)`` count, as recalled and as studied.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="spc"``; dims ``(unit, serial_position)``;
        ``prob`` = ``actual / possible``, ``actual`` lists with the position recalled,
        ``possible`` lists with the position studied.
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    n_pos = int(lengths.max())
    if has_repeats(events):  # each presentation of a recalled item counts as recalled (docs/repetition.md)
        _refuse_masks(events, "spc", item_query, test_key, test)
        actual, possible = repeated_spc_counts(recalls, presentation_items(events)[:, :n_pos], group, n_groups)
    elif item_query is None and test_key is None and test is None:
        actual, possible = _recall_stats.count_recalled(recalls, lengths, group, n_groups, n_pos)
    else:
        in_pool, code, passes = item_mask(events, item_query=item_query, test_key=test_key, test=test)
        counted = in_pool & passes[code]
        recalled = np.zeros((recalls.shape[0], n_pos + 1), dtype=bool)
        rows, cols = np.nonzero(recalls > 0)
        recalled[rows, recalls[rows, cols]] = True
        actual = np.zeros((n_groups, n_pos), dtype=np.int64)
        possible = np.zeros((n_groups, n_pos), dtype=np.int64)
        np.add.at(actual, group, (recalled[:, 1:] & counted).astype(np.int64))
        np.add.at(possible, group, counted.astype(np.int64))
    return _stat_dataset(
        events, by, labels, "spc", "cmr.spc", ("serial_position",),
        {"serial_position": np.arange(1, n_pos + 1, dtype=np.int64)},
        {
            "prob": (ratio(actual, possible), {"long_name": "recall probability"}),
            "actual": (actual, {"long_name": "lists in which the position was recalled"}),
            "possible": (possible, {"long_name": "lists in which the position was studied"}),
        },
    )


def pnr(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Probability of nth recall by output and serial position.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    item_query : str, optional
        psifr's pool restriction (see :mod:`cmr.masks`): items failing it are never possible
        and recalling one does not count as an output.
    test_key, test : str and callable, optional
        A column and a test of one value, ``test(value) -> bool``: recalls of items failing it
        are not counted (they still take their output position) and such items are never
        possible. psifr 0.10's ``pnr`` raises IndexError with a test; this is what it means.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="pnr"``; dims ``(unit, output_position,
        serial_position)``; ``prob``, ``actual``, ``possible``.
    """
    events, labels, actual, possible, positions = _nth_recall_counts(events, by, item_query, test_key, test)
    return _stat_dataset(
        events, by, labels, "pnr", "cmr.pnr", ("output_position", "serial_position"),
        {"output_position": positions, "serial_position": positions}, _nth_recall_variables(actual, possible),
    )


def pfr(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Probability of first recall: :func:`pnr` at output position 1 (``stat_kind="pfr"``; same masks)."""
    events, labels, actual, possible, positions = _nth_recall_counts(events, by, item_query, test_key, test)
    # pnr's counts at the first output, in one dataset: what pnr(...).sel(output_position=1, drop=True) holds
    return _stat_dataset(
        events, by, labels, "pfr", "cmr.pnr", ("serial_position",), {"serial_position": positions},
        _nth_recall_variables(actual[:, 0], possible[:, 0]),
    )


def _nth_recall_counts(events, by, item_query, test_key, test):
    """The events dataset, unit labels, pnr's counts (unit, output_position, serial_position) and the positions."""
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    n_pos = int(lengths.max())
    if has_repeats(events):  # the nth recall counts at each presentation of its item (docs/repetition.md)
        _refuse_masks(events, "pnr", item_query, test_key, test)
        actual, possible = repeated_pnr_counts(recalls, presentation_items(events)[:, :n_pos], group, n_groups)
    elif item_query is None and test_key is None and test is None:
        actual, possible = _recall_stats.count_outputs(recalls, lengths, group, n_groups, n_pos)
    else:
        in_pool, code, passes = item_mask(events, item_query=item_query, test_key=test_key, test=test)
        actual, possible = _recall_stats.count_outputs_masked(recalls, lengths, group, n_groups, n_pos, in_pool,
                                                              code, passes)
    return events, labels, actual, possible, np.arange(1, n_pos + 1, dtype=np.int64)


def _refuse_masks(events, analysis, item_query, test_key, test):
    """The masks have no convention for repeated items: refused by name where a list has repeats."""
    if item_query is not None or test_key is not None or test is not None:
        refuse_repeats(events, f"{analysis} with item_query, test_key or test")


def _nth_recall_variables(actual, possible) -> dict:
    return {
        "prob": (ratio(actual, possible), {"long_name": "probability of nth recall"}),
        "actual": (actual, {"long_name": "nth correct recalls of the position"}),
        "possible": (possible, {"long_name": "nth correct recalls when the position was available"}),
    }


def lag_rank(events, *, by="subject", item_query=None, test_key=None, test=None) -> xr.Dataset:
    """Mean lag rank of transitions (1 = always the closest available lag, 0.5 = chance).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    by : {"subject", "trial", None}
    item_query, test_key, test
        psifr's masks, as in :func:`cmr.lag_crp` (see :mod:`cmr.masks`): items failing the query
        leave the pool; only transitions with ``test(prev, curr)`` true are ranked, among the
        available positions passing the test.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="lag_rank"``; dims ``(unit,)``; ``rank`` (NaN when
        no transition could be ranked) and ``n_transitions`` (ranked transitions).
    """
    events, recalls, lengths, group, n_groups, labels = _prepared(events, by)
    refuse_repeats(events, "lag_rank")
    mask = transition_mask(events, item_query=item_query, test_key=test_key, test=test)
    rank_sum, n_ranked = _recall_stats.rank_lags(recalls, lengths, group, n_groups, mask.in_pool, mask.code,
                                                 mask.allowed)
    return _stat_dataset(
        events, by, labels, "lag_rank", "cmr.lag_rank", (), {},
        {
            "rank": (ratio(rank_sum, n_ranked), {"long_name": "mean absolute-lag percentile rank"}),
            "n_transitions": (n_ranked, {"long_name": "transitions ranked"}),
        },
    )
