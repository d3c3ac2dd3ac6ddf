"""Posterior predictive check: the data's lag-CRP, SPC and PFR against CMR's, in one call.

The model replays every studied list of the data ``n_rep`` times with each subject's own
parameters (:func:`cmr.simulate_experiment`), and the same analyses (exact against psifr)
run on data and simulation alike. Group curves are means over subjects with their standard
error across subjects.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from ..checks import integer, seed_of
from ..constants import RECALL_LAGS
from ..crp import lag_crp
from ..events import as_events, from_table
from ..recall_stats import pfr, spc
from ..schema import provenance_attrs
from .patterns import ItemPatterns
from .simulate import simulate_experiment

__all__ = ["posterior_predictive"]


def _group(values: xr.DataArray):
    """Mean over subjects and its standard error (NaN with fewer than two subjects)."""
    count = values.count("subject")
    mean = values.mean("subject", skipna=True)
    sem = values.std("subject", ddof=1, skipna=True) / np.sqrt(count.where(count > 1))
    return mean, sem


def posterior_predictive(
    events,
    params,
    *,
    n_rep: int = 10,
    rng=None,
    patterns: ItemPatterns | None = None,
    pool_size: int | None = None,
    lags=RECALL_LAGS,
) -> xr.Dataset:
    """Data against model: lag-CRP, serial position curve and probability of first recall.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        The data (events dataset or psifr table).
    params : mapping, mapping by subject, recall_fit dataset or DataFrame
        Each subject's parameters, typically its fit.
    n_rep : int
        Simulated recall periods per studied list.
    rng : numpy.random.Generator, int or None
        Seed of the simulation.
    patterns : ItemPatterns, optional
        Item patterns of semantic / category CMR.
    pool_size : int, optional
        Localist CMR: cymr pool size.
    lags : None, int or sequence
        Lag window of the lag-CRP (default -5..-1, 1..5).

    Returns
    -------
    xarray.Dataset
        Kind ``predictive_check`` (docs/schema.md): ``crp`` (source, subject, lag), ``spc`` and
        ``pfr`` (source, subject, serial_position) with ``source`` = ``data``, ``model``, and
        group means ``crp_group``, ``spc_group``, ``pfr_group`` with ``*_group_sem``. When
        ``params`` is a recall_fit with a convergence verdict, attrs ``fit_converged`` (units
        whose fit converged), ``fit_units`` and ``fit_not_converged`` (their labels, comma
        separated): a check of a fit that missed its maximum is a check of the search too.
    """
    events = as_events(events)
    reps = integer(n_rep, "n_rep")
    seed = seed_of(rng) if rng is not None else seed_of(np.random.default_rng())
    table = simulate_experiment(events, params, n_rep=reps, rng=seed, patterns=patterns, pool_size=pool_size)
    model = from_table(table, source="cmr.posterior_predictive")
    data_vars = {}
    curves = {
        "crp": lambda ev: lag_crp(ev, by="subject", lags=lags)["profile"],
        "spc": lambda ev: spc(ev, by="subject")["prob"],
        "pfr": lambda ev: pfr(ev, by="subject")["prob"],
    }
    for name, curve in curves.items():
        both = xr.concat([curve(events), curve(model)], dim="source", join="outer")
        both = both.assign_coords(source=["data", "model"])
        data_vars[name] = both
        mean, sem = _group(both)
        data_vars[f"{name}_group"] = mean
        data_vars[f"{name}_group_sem"] = sem
    ds = xr.Dataset(data_vars)
    ds = ds.drop_vars([c for c in ds.coords if c not in ("source", "subject", "lag", "serial_position")])
    ds.attrs = provenance_attrs("predictive_check", "cmr.posterior_predictive", n_rep=reps, seed=int(seed),
                                pool_size=pool_size, patterns=patterns is not None)
    ds.attrs["n_rep"] = reps
    if isinstance(params, xr.Dataset) and "converged" in params.data_vars:
        converged = np.atleast_1d(np.asarray(params["converged"].values, dtype=bool))
        labels = [str(s) for s in params["subject"].values] if "subject" in params["converged"].dims else ["pooled"]
        ds.attrs["fit_converged"] = int(converged.sum())
        ds.attrs["fit_units"] = int(converged.size)
        ds.attrs["fit_not_converged"] = ", ".join(label for label, ok in zip(labels, converged) if not ok)
    return ds
