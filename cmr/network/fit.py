"""Maximum-likelihood fits of a CMR network, per subject or pooled (cymr's ``fit_indiv`` with a
network's ``CMRParameters``).

The data are prepared once; each evaluation recomputes only the parameters, the weights and the
kernel. The search is scipy's differential evolution (cymr's default) within the given bounds,
seeded from ``rng`` and the unit's label, with restarts and the convergence verdict of
:func:`cmr.fit_recall`; a parameter set whose likelihood is NaN scores as impossible (+inf) and
is counted, never replaced by a number.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import seed_of, shown
from ..constants import CONVERGENCE_TOLERANCE
from ..errors import ParameterError
from ..textbook._optimize import has_converged, logl_gap, run_restarts
from ..textbook.fit import restart_plan, unit_seeds
from ._arrays import list_parameters, network_weights
from ._lists import lists_of
from .config import NetworkConfig
from .model import lists_log_likelihood, prepared_lists

__all__ = ["fit_network"]

DE_DEFAULTS = {"tol": 1e-6, "maxiter": 1000, "popsize": 15}


def _bounds(free) -> dict:
    if not isinstance(free, Mapping) or not free:
        raise ParameterError(f"free must be a non-empty mapping of parameter name to (low, high); got {shown(free)}")
    out = {}
    for name, pair in free.items():
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"bounds of free parameter {name} must be (low, high) numbers; got {shown(pair)}") \
                from None
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ParameterError(f"bounds of free parameter {name} must be finite with low < high; got "
                                 f"({low!r}, {high!r})")
        out[str(name)] = (low, high)
    return out


def fit_network(data, *, config: NetworkConfig, patterns, free, fixed=None, by: str | None = "subject", rng=None,
                de_options=None, n_restarts=1, max_restarts: int = 8) -> xr.Dataset:
    """Fit the free parameters of a CMR network by maximum likelihood.

    Parameters
    ----------
    data : pandas.DataFrame or xarray.Dataset
        As for :func:`~cmr.network.model.network_log_likelihood`.
    config, patterns
        The network and its item patterns.
    free : mapping
        ``name -> (low, high)`` search bounds of each free parameter.
    fixed : mapping, optional
        ``name -> value`` of every other parameter the network uses.
    by : {"subject", None}
        One fit per subject, or one pooled fit of all lists.
    rng : numpy.random.Generator, int or None
        Root seed (a Generator draws one); each unit's searches are seeded by it and the unit's
        label, as :func:`cmr.fit_recall`'s.
    de_options : mapping, optional
        Options of ``scipy.optimize.differential_evolution`` (default tol 1e-6, maxiter 1000,
        popsize 15).
    n_restarts : int or "auto"
        Searches per unit. One by default (a network's search takes minutes, and one search
        leaves ``converged`` False); ``"auto"`` searches until the best two agree within
        ``CONVERGENCE_TOLERANCE`` log units, at most ``max_restarts``, as :func:`cmr.fit_recall`.
    max_restarts : int
        Most searches per unit with ``n_restarts="auto"``.

    Returns
    -------
    xarray.Dataset
        ``value`` (unit, parameter) of the free parameters, ``logl``, ``n`` (events), ``n_nan``
        (evaluations with a NaN likelihood), ``success``, ``n_restarts``, ``logl_gap`` (best minus
        second-best search) and ``converged`` per unit (``unit``: the subject, or ``"all"``);
        attrs ``k`` (free parameters), ``method`` and ``convergence_tolerance``.
    """
    from scipy import optimize

    if by not in ("subject", None):
        raise ParameterError(f"by must be 'subject' or None; got {by!r}")
    bounds = _bounds(free)
    fixed = {} if fixed is None else fixed
    if not isinstance(fixed, Mapping):
        raise ParameterError(f"fixed must be a mapping of parameter name to value; got {type(fixed).__name__}")
    both = sorted(set(bounds) & set(fixed))
    if both:
        raise ParameterError(f"parameter(s) {', '.join(both)} are both free and fixed; give each once")
    options = dict(DE_DEFAULTS)
    options.update(de_options or {})
    count, min_restarts = restart_plan(n_restarts, max_restarts)
    seed = seed_of(rng if rng is not None else np.random.default_rng())
    patterns, lists = prepared_lists(data, config, patterns)
    names = list(bounds)
    first = {**fixed, **{name: low for name, (low, _) in bounds.items()}}
    list_parameters(config, lists, first)  # a configuration error stops here, before any search
    units = list(pd.unique(lists.subject)) if by == "subject" else ["all"]
    values = np.zeros((len(units), len(names)))
    logl = np.zeros(len(units))
    n_events = np.zeros(len(units), dtype=np.int64)
    n_nan = np.zeros(len(units), dtype=np.int64)
    success = np.zeros(len(units), dtype=np.int64)
    ran, gap = np.zeros(len(units), dtype=np.int64), np.zeros(len(units))
    converged = np.zeros(len(units), dtype=bool)
    for u, (unit, seeds) in enumerate(zip(units, unit_seeds(seed, [str(unit) for unit in units], count))):
        part = lists if by is None else lists_of(lists, lists.subject == unit)
        nan_count = [0]

        def objective(x, part=part, nan_count=nan_count):
            params = {**fixed, **dict(zip(names, x))}
            par = list_parameters(config, part, params)
            net = network_weights(config, patterns, part, par.values, compress=True)
            total = float(lists_log_likelihood(config, part, par, net)[0].sum())
            if np.isnan(total):
                nan_count[0] += 1
                return np.inf
            return -total

        def one_search(search_seed, objective=objective):
            result = optimize.differential_evolution(objective, [bounds[n] for n in names],
                                                     rng=np.random.default_rng(search_seed), **options)
            return dict(x=result.x, logl=-float(result.fun), success=bool(result.success))

        searches = run_restarts(one_search, seeds, min_restarts)
        best = max(searches, key=lambda r: r["logl"] if np.isfinite(r["logl"]) else -np.inf)
        values[u] = best["x"]
        logl[u] = best["logl"]
        n_events[u] = int((part.n_recall + 1).sum())
        n_nan[u] = nan_count[0]
        success[u] = int(best["success"])
        scores = [r["logl"] for r in searches]
        ran[u], gap[u], converged[u] = len(searches), logl_gap(scores), has_converged(scores)
    return xr.Dataset(
        {"value": (("unit", "parameter"), values), "logl": ("unit", logl), "n": ("unit", n_events),
         "n_nan": ("unit", n_nan), "success": ("unit", success), "n_restarts": ("unit", ran),
         "logl_gap": ("unit", gap), "converged": ("unit", converged)},
        coords={"unit": np.asarray(units).astype(str), "parameter": names},
        attrs={"k": len(names), "method": "differential_evolution", "by": by or "pooled",
               "fixed": ",".join(f"{k}={float(v)!r}" for k, v in fixed.items()),
               "convergence_tolerance": CONVERGENCE_TOLERANCE},
    )
