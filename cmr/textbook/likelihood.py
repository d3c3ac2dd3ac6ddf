"""Log-likelihood of free-recall sequences under CMR, equal to cymr's.

``log_likelihood(events, params)`` scores every trial of an events dataset exactly as
``cymr.cmr.CMR().likelihood`` with ``config_loc_cmr`` (or, with ``patterns``, the semantic
and category configuration of :mod:`cmr.textbook.patterns`) does: intrusions and repeats are
removed, each remaining correct first recall and the final stop are scored, and every event
probability is clipped to ``[1e-5, 1]`` before the log. See docs/equations.md.

Two documented differences from cymr, both where cymr has no answer:

* The choice rule ``exp(2 a / T)`` is computed as a max-shifted softmax. Where cymr's
  ``exp`` overflows (large support over small ``T``) cymr returns NaN (and its fitter then
  substitutes -1e7 without a word); here the probabilities are finite and exact.
* A NaN log-likelihood is never replaced: it is returned as NaN with a RuntimeWarning that
  names the trials.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import RecallDataError
from ..events import as_events
from . import _network
from ._trials import trial_arrays
from .parameter_sets import parameter_table
from .patterns import ItemPatterns

__all__ = ["log_likelihood"]


def log_likelihood(
    events,
    params,
    *,
    by: str | None = "subject",
    patterns: ItemPatterns | None = None,
    pool_size: int | None = None,
    event_probabilities: bool = False,
) -> xr.Dataset:
    """Log-likelihood of each trial's recall sequence under CMR (localist, semantic or category).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        An events dataset (see docs/schema.md) or a psifr long table; list lengths may vary
        across trials.
    params : mapping, mapping by subject, recall_fit dataset or DataFrame
        One parameter set for everyone (the 14 parameters in cymr's names, plus the pattern
        weights ``Sfc, Scf, Sff, Cfc, Ccf`` where ``patterns`` is given; missing weights are 0),
        a mapping ``subject -> parameters``, or a fit (see :mod:`cmr.textbook.parameter_sets`).
    by : {"subject", "trial", None}
        Grouping of the ``logl`` and ``n`` variables; None gives only the totals.
    patterns : ItemPatterns, optional
        Item pool, similarities and features (:func:`cmr.item_patterns`) for semantic and
        category CMR; the context then has one unit per pool item, as cymr's.
    pool_size : int, optional
        Localist CMR: number of items in cymr's pattern pool (``config_loc_cmr(pool_size)``)
        for a pool-sized context. Default None: a list-sized context (n items + start unit),
        identical to cymr whenever Afc = Acf = 0 or cymr's pool is the list itself.
    event_probabilities : bool
        Also return ``event_probability`` (trial, event): the raw probability of each
        scored event (correct first recalls, then the stop), NaN-padded.

    Returns
    -------
    xarray.Dataset
        ``logl`` and ``n`` (events scored) along ``by`` (``trial_logl``/``trial_n`` too),
        attrs ``total_logl`` (float), ``n`` (int), ``pool_size`` (-1 for a list-sized context)
        and ``model`` (``"localist"`` or ``"patterns"``). A NaN total comes with a
        RuntimeWarning; it is never replaced by a number.
    """
    if by not in ("subject", "trial", None):
        raise RecallDataError(f"by must be 'subject', 'trial' or None; got {by!r}")
    events = as_events(events)
    if patterns is not None and not isinstance(patterns, ItemPatterns):
        raise RecallDataError(f"patterns must come from cmr.item_patterns(...); got {type(patterns).__name__}")
    table, trial_param = parameter_table(params, events.variables["subject"].values, patterns=patterns is not None)
    arrays = trial_arrays(events, patterns, pool_size, reuse=True)  # validated above; the kernel only reads
    n_trials = arrays.n_trials
    trial_logl = np.zeros(n_trials)
    trial_n = np.zeros(n_trials, dtype=np.int64)
    event_p = np.zeros((n_trials, arrays.recalls.shape[1] + 1))
    _network.trials_log_likelihood(
        table, trial_param, arrays.trial_group, arrays.order(trial_param), *arrays.kernel_groups(),
        arrays.recalls, trial_logl, trial_n, event_p,
    )

    bad = np.flatnonzero(np.isnan(trial_logl))
    if bad.size:
        warnings.warn(
            f"CMR log-likelihood is NaN for {bad.size} trial(s) (first: trial {bad[0]}); "
            "the total is NaN and was not replaced",
            RuntimeWarning,
            stacklevel=2,
        )
    trial = events.variables["trial"].values
    subjects = events.variables["subject"].values
    key = _layout_key(by, event_probabilities, event_p.shape[1], trial, subjects)
    layout = _LAYOUTS.get(key) if key is not None else None
    if layout is not None:
        template, labels, index = layout
    elif by == "subject":
        labels, index = _factorize(subjects)
    data = {"trial_logl": trial_logl, "trial_n": trial_n}
    if by == "subject":
        logl = np.zeros(labels.size)
        count = np.zeros(labels.size, dtype=np.int64)
        np.add.at(logl, index, trial_logl)
        np.add.at(count, index, trial_n)
        data["logl"], data["n"] = logl, count
    elif by == "trial":
        data["logl"], data["n"] = trial_logl.copy(), trial_n.copy()
    if event_probabilities:
        data["event_probability"] = event_p
    if patterns is not None:
        pool = patterns.size
    else:
        pool = -1 if pool_size is None else int(pool_size)  # -1: list-sized context
    attrs = {
        "total_logl": float(trial_logl.sum()),
        "n": int(trial_n.sum()),
        "pool_size": pool,
        "model": "localist" if patterns is None else "patterns",
    }
    if layout is not None:
        # the coords and indexes made for the same trials before; only the values are new
        ds = template.copy(deep=False, data=data)
        ds.variables["subject_of_trial"].data = subjects  # the events' own labels, as a new dataset holds them
        ds.attrs = attrs
        return ds
    unit = {"subject": ("subject",), "trial": ("trial",)}.get(by)
    dims = {"trial_logl": ("trial",), "trial_n": ("trial",), "logl": unit, "n": unit,
            "event_probability": ("trial", "event")}
    coords = {"trial": trial, "subject_of_trial": ("trial", subjects)}
    if by == "subject":
        coords["subject"] = labels
    if event_probabilities:
        coords["event"] = np.arange(1, event_p.shape[1] + 1)
    ds = xr.Dataset({name: (dims[name], value) for name, value in data.items()}, coords=coords, attrs=attrs)
    if key is not None:
        _remember_layout(key, (ds.copy(deep=False), labels if by == "subject" else None,
                               index if by == "subject" else None))
    return ds


#: labelled layouts of recent results, by the trials and subjects they label (see _layout_key);
#: building a dataset's indexes costs more than the rest of a small likelihood call
_LAYOUTS: OrderedDict = OrderedDict()
_MAX_LAYOUTS = 16


def _layout_key(by, event_probabilities, n_events, trial, subjects):
    """What fixes a result's coords; None for labels that are Python objects (not cheap to tell)
    or columns of labels over 1 MiB (the kept keys stay small)."""
    if trial.dtype.hasobject or subjects.dtype.hasobject or max(trial.nbytes, subjects.nbytes) > 2**20:
        return None
    return (by, bool(event_probabilities), int(n_events), trial.dtype.str, trial.shape, trial.tobytes(),
            subjects.dtype.str, subjects.shape, subjects.tobytes())


def _remember_layout(key, layout):
    _LAYOUTS[key] = layout
    try:
        while len(_LAYOUTS) > _MAX_LAYOUTS:
            _LAYOUTS.popitem(last=False)  # the oldest
    except KeyError:  # emptied meanwhile by another thread
        pass


def _factorize(values):
    """Unique labels in order of first appearance and each value's index into them."""
    index, labels = pd.factorize(np.asarray(values), sort=False)
    return np.asarray(labels), index

