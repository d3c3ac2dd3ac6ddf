"""Log-likelihood of multi-list free-recall sessions under CMR2 (Lohnas, Polyn & Kahana 2015).

Each session's lists are studied and recalled in order by one network that is never reset
(see :mod:`cmr.cmr2._kernels` and docs/cmr2.md). Every scored event is a correct first recall,
a prior-list intrusion (an item studied in an earlier list of the session) or the final stop;
its probability is the Luce choice over every candidate item of the session so far, times
``1 - P(stop)``. Extra-list intrusions and repeats are not scored (textbook CMR's rule); each
event probability is clipped to ``[1e-5, 1]`` before the log, as textbook CMR (cymr) does.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import RecallDataError
from ..events import as_events
from . import _kernels
from ._sessions import session_arrays
from .parameters import cmr2_parameter_table

__all__ = ["log_likelihood"]


def log_likelihood(events, params, *, session: str | None = None, by: str | None = "subject",
                   event_probabilities: bool = False) -> xr.Dataset:
    """Log-likelihood of each list's recall sequence under CMR2, lists of a session in order.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        An events dataset or a psifr long table. Recalls of items studied in an earlier list of
        the same session (prior-list intrusions) are scored by the model.
    params : mapping
        The 16 CMR2 parameters (:func:`cmr.default_cmr2_parameters`), or a mapping of subject
        label to such a set (each subject's own, e.g. from separate fits).
    session : str, optional
        Variable that labels sessions (a list key, a per-trial variable, or a study column such
        as ``session`` of Morton2013). Default: the events' list keys, else one session per subject.
    by : {"subject", "trial", None}
        Grouping of the ``logl`` and ``n`` variables; None gives only the totals.
    event_probabilities : bool
        Also return ``event_probability`` (trial, event): the raw probability of each scored
        event (scored recalls, then the stop), NaN-padded, and ``event_list_lag`` (trial, event):
        0 for a correct recall, k for a prior-list intrusion from k lists back, -1 for the stop.

    Returns
    -------
    xarray.Dataset
        ``trial_logl`` and ``trial_n`` (events scored) per trial, ``logl`` and ``n`` along
        ``by``; attrs ``total_logl``, ``n``, ``model="cmr2"``. A NaN total comes with a
        RuntimeWarning; it is never replaced by a number.
    """
    if by not in ("subject", "trial", None):
        raise RecallDataError(f"by must be 'subject', 'trial' or None; got {by!r}")
    events = as_events(events)
    arrays = session_arrays(events, session)
    param_table, session_param = cmr2_parameter_table(
        params, events["subject"].values[arrays.order[arrays.session_first[:-1]]])
    n_trials = arrays.order.size
    logl_sorted = np.zeros(n_trials)
    n_sorted = np.zeros(n_trials, dtype=np.int64)
    p_sorted = np.zeros((n_trials, arrays.scored.shape[1] + 1))
    _kernels.sessions_log_likelihood(param_table, session_param, *arrays.kernel_study(), arrays.scored, arrays.n_scored,
                                     logl_sorted, n_sorted, p_sorted)
    trial_logl = np.empty(n_trials)
    trial_n = np.empty(n_trials, dtype=np.int64)
    trial_logl[arrays.order] = logl_sorted
    trial_n[arrays.order] = n_sorted
    bad = np.flatnonzero(np.isnan(trial_logl))
    if bad.size:
        warnings.warn(f"CMR2 log-likelihood is NaN for {bad.size} trial(s) (first: trial {bad[0]}); "
                      "the total is NaN and was not replaced", RuntimeWarning, stacklevel=2)
    data = {"trial_logl": ("trial", trial_logl), "trial_n": ("trial", trial_n)}
    coords = {"trial": events["trial"].values, "subject_of_trial": ("trial", events["subject"].values)}
    if by == "subject":
        index, labels = pd.factorize(np.asarray(events["subject"].values), sort=False)
        logl = np.zeros(len(labels))
        count = np.zeros(len(labels), dtype=np.int64)
        np.add.at(logl, index, trial_logl)
        np.add.at(count, index, trial_n)
        data["logl"] = ("subject", logl)
        data["n"] = ("subject", count)
        coords["subject"] = np.asarray(labels)
    elif by == "trial":
        data["logl"] = ("trial", trial_logl.copy())
        data["n"] = ("trial", trial_n.copy())
    if event_probabilities:
        event_p = np.empty_like(p_sorted)
        event_p[arrays.order] = p_sorted
        lags = np.full(p_sorted.shape, -1, dtype=np.int64)
        lags[:, :-1] = np.where(arrays.scored >= 0, arrays.list_lag, -1)
        event_lag = np.empty_like(lags)
        event_lag[arrays.order] = lags
        data["event_probability"] = (("trial", "event"), event_p)
        data["event_list_lag"] = (("trial", "event"), event_lag)
        coords["event"] = np.arange(1, event_p.shape[1] + 1)
    return xr.Dataset(data, coords=coords, attrs={
        "total_logl": float(trial_logl.sum()),
        "n": int(trial_n.sum()),
        "model": "cmr2",
        "n_sessions": int(arrays.session_units.size),
    })
