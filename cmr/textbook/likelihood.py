"""Log-likelihood of free-recall sequences under textbook CMR, equal to cymr's.

``log_likelihood(events, params)`` scores every trial of an events dataset exactly as
``cymr.cmr.CMR().likelihood`` with ``config_loc_cmr`` does: intrusions and repeats are
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
from typing import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import RecallDataError
from ..events import as_events, to_recall_matrix
from . import _kernels
from .parameters import parameter_vector

__all__ = ["log_likelihood", "prepare_trials"]


def prepare_trials(events: xr.Dataset, pool_size: int | None = None):
    """Kernel-ready arrays of an events dataset.

    Returns
    -------
    recalls : (trials, outputs) int64, C-contiguous
    list_length : (trials,) int64
    n_other : (trials,) int64
        Context units of unstudied pool items (0 for a list-sized context).
    """
    recalls, list_length = to_recall_matrix(events)
    if recalls.shape[1] == 0:
        recalls = np.zeros((recalls.shape[0], 1), dtype=np.int64)
    if pool_size is None:
        n_other = np.zeros_like(list_length)
    else:
        if isinstance(pool_size, bool) or int(pool_size) != pool_size or pool_size < list_length.max():
            raise RecallDataError(
                f"pool_size must be an integer >= the longest list ({int(list_length.max())}); got {pool_size!r}"
            )
        n_other = np.ascontiguousarray(int(pool_size) - list_length, dtype=np.int64)
    return np.ascontiguousarray(recalls), np.ascontiguousarray(list_length), n_other


def log_likelihood(
    events,
    params: Mapping[str, float],
    *,
    by: str | None = "subject",
    pool_size: int | None = None,
    event_probabilities: bool = False,
) -> xr.Dataset:
    """Log-likelihood of each trial's recall sequence under textbook CMR.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        An events dataset (see docs/schema.md) or a psifr long table; list lengths may vary
        across trials.
    params : mapping
        All 14 parameters in cymr's names (cmr.parameters.PARAMETER_NAMES).
    by : {"subject", "trial", None}
        Grouping of the ``logl`` and ``n`` variables; None gives only the totals.
    pool_size : int, optional
        Number of items in cymr's pattern pool (``config_loc_cmr(pool_size)``) for a
        pool-sized context. Default None: a list-sized context (n items + start unit),
        identical to cymr whenever Afc = Acf = 0 or cymr's pool is the list itself.
    event_probabilities : bool
        Also return ``event_probability`` (trial, event): the raw probability of each
        scored event (correct first recalls, then the stop), NaN-padded.

    Returns
    -------
    xarray.Dataset
        ``logl`` and ``n`` (events scored) along ``by`` (``trial_logl``/``trial_n`` too),
        attrs ``total_logl`` (float) and ``n`` (int). A NaN total comes with a
        RuntimeWarning; it is never replaced by a number.
    """
    if by not in ("subject", "trial", None):
        raise RecallDataError(f"by must be 'subject', 'trial' or None; got {by!r}")
    events = as_events(events)
    vector = parameter_vector(params)
    recalls, list_length, n_other = prepare_trials(events, pool_size)
    n_trials = recalls.shape[0]
    trial_logl = np.zeros(n_trials)
    trial_n = np.zeros(n_trials, dtype=np.int64)
    event_p = np.zeros((n_trials, recalls.shape[1] + 1))
    _kernels.trials_log_likelihood(vector, list_length, n_other, recalls, trial_logl, trial_n, event_p)

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
    return xr.Dataset(
        data,
        coords=coords,
        attrs={
            "total_logl": float(trial_logl.sum()),
            "n": int(trial_n.sum()),
            "pool_size": -1 if pool_size is None else int(pool_size),  # -1: list-sized context
        },
    )


def _factorize(values):
    """Unique labels in order of first appearance and each value's index into them."""
    index, labels = pd.factorize(np.asarray(values), sort=False)
    return np.asarray(labels), index
