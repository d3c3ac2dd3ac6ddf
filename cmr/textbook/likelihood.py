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
    table, trial_param = parameter_table(params, events["subject"].values, patterns=patterns is not None)
    arrays = trial_arrays(events, patterns, pool_size)
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
    trial = events["trial"].values
    data = {
        "trial_logl": ("trial", trial_logl),
        "trial_n": ("trial", trial_n),
    }
    coords = {"trial": trial, "subject_of_trial": ("trial", events["subject"].values)}
    if by == "subject":
        labels, index = _factorize(events["subject"].values)
        logl = np.zeros(labels.size)
        count = np.zeros(labels.size, dtype=np.int64)
        np.add.at(logl, index, trial_logl)
        np.add.at(count, index, trial_n)
        data["logl"] = ("subject", logl)
        data["n"] = ("subject", count)
        coords["subject"] = labels
    elif by == "trial":
        data["logl"] = ("trial", trial_logl.copy())
        data["n"] = ("trial", trial_n.copy())
    if event_probabilities:
        data["event_probability"] = (("trial", "event"), event_p)
        coords["event"] = np.arange(1, event_p.shape[1] + 1)
    if patterns is not None:
        pool = patterns.size
    else:
        pool = -1 if pool_size is None else int(pool_size)  # -1: list-sized context
    return xr.Dataset(
        data,
        coords=coords,
        attrs={
            "total_logl": float(trial_logl.sum()),
            "n": int(trial_n.sum()),
            "pool_size": pool,
            "model": "localist" if patterns is None else "patterns",
        },
    )


def _factorize(values):
    """Unique labels in order of first appearance and each value's index into them."""
    index, labels = pd.factorize(np.asarray(values), sort=False)
    return np.asarray(labels), index

