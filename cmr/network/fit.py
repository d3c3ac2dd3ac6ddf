"""Maximum-likelihood fits of a CMR network, per subject or pooled (cymr's ``fit_indiv`` with a
network's ``CMRParameters``).

The data are prepared once; each evaluation recomputes only the parameters, the weights and the
kernel. The search is scipy's differential evolution (cymr's default) within the given bounds,
seeded from ``rng`` and the unit's label, with restarts and the convergence verdict of
:func:`cmr.fit_recall`; a parameter set whose likelihood is NaN scores as impossible (+inf) and
is counted, never replaced by a number.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import seed_of, shown
from ..constants import CONVERGENCE_TOLERANCE
from ..deprecation import warn
from ..errors import ParameterError
from ..textbook._optimize import run_restarts
from ..textbook.fit import restart_plan, unit_seeds
from ..textbook.flags import convergence_summary, convergence_variables, warn_fit
from ..textbook.spec import BaseFitSpec, resolve_spec
from ._arrays import check_patterns, list_parameters, network_weights
from ._lists import lists_of
from .config import NetworkConfig
from .model import lists_log_likelihood, prepared_lists

__all__ = ["NetworkFitSpec", "fit_network"]

DE_DEFAULTS = {"tol": 1e-6, "maxiter": 1000, "popsize": 15}

#: the fields of :class:`NetworkFitSpec` that :func:`fit_network` also takes as deprecated keywords
NETWORK_MODEL_ARGUMENTS = ("free", "fixed", "config", "patterns")


def _pair(name, pair) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds of free parameter {name} must be (low, high) numbers; got {shown(pair)}") \
            from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ParameterError(f"bounds of free parameter {name} must be finite with low < high; got "
                             f"({low!r}, {high!r})")
    return low, high


def _digest(value, h) -> None:
    """Feed ``value`` (nested mappings, arrays, strings, numbers) into the hash ``h``, by content."""
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            h.update(f"<{key}>".encode())
            _digest(value[key], h)
    else:
        array = np.asarray(value)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes() if array.dtype.kind != "O" else repr(array.tolist()).encode())


@dataclass(frozen=True)
class _NetworkModel:
    """What a network fit estimates, checked: free names and bounds in order, fixed values, network."""

    free: tuple
    bounds: tuple  # ((low, high), ...) per free parameter
    fixed: dict
    config: NetworkConfig
    patterns: dict  # checked (cmr.network's pattern dict of float arrays)


@dataclass(frozen=True, repr=False)
class NetworkFitSpec(BaseFitSpec):
    """What a network fit estimates: free parameters and their search bounds, fixed values, the network.

    Parameters
    ----------
    free : sequence of str, or mapping
        Fitted parameters; a mapping ``name -> (low, high)`` gives their bounds too (what
        :func:`cmr.read_network` returns as ``free``).
    fixed : mapping, optional
        ``name -> value`` of every other parameter the network uses.
    bounds : mapping, optional
        ``name -> (low, high)`` search bounds; every free parameter needs them (a network's
        parameters are named by its configuration, so there are no default ranges). Bounds of
        parameters that are not free are kept and not used.
    tied : mapping, optional
        Must be empty: a network's parameters that follow others are its dependent parameters,
        ``NetworkConfig(dependent={...})``.
    config : NetworkConfig
        The network (:class:`cmr.NetworkConfig`, :func:`cmr.read_network`).
    patterns : mapping
        Its item patterns (:func:`cmr.load_patterns`'s layout), checked and kept as float arrays.

    Raises
    ------
    ParameterError
        No or repeated free parameters, one without bounds or with bounds that are not finite
        with low < high, one both free and fixed, a tie, a ``config`` that is not a
        NetworkConfig, malformed patterns.

    Equal specs have equal fields, the network and patterns compared by content (a digest).
    """

    free: Sequence[str] | Mapping[str, tuple[float, float]] | str
    config: NetworkConfig | None = field(default=None, compare=False)
    patterns: Mapping | None = field(default=None, compare=False)
    _digest: str = field(init=False, repr=False, default="")

    def _checked_model(self) -> _NetworkModel:
        free = self.free
        given = dict(free) if isinstance(free, Mapping) else {}
        names = list(given) if isinstance(free, Mapping) else [free] if isinstance(free, str) else list(free or ())
        if not names:
            raise ParameterError(f"at least one free network parameter is needed; got {shown(free)}")
        names = [str(name) for name in names]
        if len(set(names)) != len(names):
            raise ParameterError(f"free parameters must be distinct; got {', '.join(names)}")
        for what, value in (("fixed", self.fixed), ("bounds", self.bounds), ("tied", self.tied)):
            if value is not None and not isinstance(value, Mapping):
                raise ParameterError(f"{what} must be a mapping of parameter name to value; got {type(value).__name__}")
        if self.tied:
            raise ParameterError(f"a network ties parameters by its dependent parameters, "
                                 f"NetworkConfig(dependent={{...}}); got tied={dict(self.tied)!r}")
        bounds = dict(self.bounds or {})
        twice = sorted(set(given) & set(bounds))
        if twice:
            raise ParameterError(f"bounds of {', '.join(twice)} are given in free and in bounds; give them once")
        bounds.update(given)
        missing = [name for name in names if name not in bounds]
        if missing:
            raise ParameterError(f"free network parameter(s) {', '.join(missing)} need search bounds "
                                 f"(bounds={{name: (low, high)}}); a network has no default ranges")
        pairs = {name: _pair(name, bounds[name]) for name in names}
        fixed = dict(self.fixed or {})
        both = sorted(set(names) & set(fixed))
        if both:
            raise ParameterError(f"parameter(s) {', '.join(both)} are both free and fixed; give each once")
        if not isinstance(self.config, NetworkConfig):
            raise ParameterError(f"config must be a cmr.NetworkConfig; got {type(self.config).__name__}")
        patterns = check_patterns(self.patterns)
        object.__setattr__(self, "bounds", {**bounds, **pairs})  # the free mapping's bounds too, as numbers
        h = hashlib.sha256(repr(self.config).encode())
        _digest(patterns, h)
        object.__setattr__(self, "_digest", h.hexdigest())
        return _NetworkModel(tuple(names), tuple(pairs[n] for n in names), fixed, self.config, patterns)

    def _identity(self) -> tuple:
        return (self._digest,)

    def _extra_repr(self) -> list[str]:
        items = len(self.patterns["items"]) if isinstance(self.patterns, Mapping) and "items" in self.patterns else "?"
        return [f"config=<{len(self.config.sublayers)} sublayer(s)>", f"patterns=<{items} items>"]


def as_network_spec(caller: str, spec, keywords: dict) -> tuple[NetworkFitSpec, str | None]:
    """The :class:`NetworkFitSpec` of a call, from one spec or the deprecated separate keywords."""
    if spec is None and not keywords:
        raise ParameterError(f"{caller} takes the model as one cmr.NetworkFitSpec(free, bounds=..., config=..., "
                             "patterns=...); got none")
    if spec is not None and not isinstance(spec, NetworkFitSpec):
        raise ParameterError(f"{caller} takes the model as one cmr.NetworkFitSpec; got {type(spec).__name__}")
    fit_spec, _, message = resolve_spec(caller, spec, (), keywords, positional_names=(),
                                        accepted=NETWORK_MODEL_ARGUMENTS, spec_type=NetworkFitSpec,
                                        model_arguments=NETWORK_MODEL_ARGUMENTS)
    return fit_spec, message


def fit_network(data, spec: NetworkFitSpec | None = None, *, by: str | None = "subject", rng=None,
                de_options=None, n_restarts="auto", max_restarts: int = 8, **deprecated_model) -> xr.Dataset:
    """Fit the free parameters of a CMR network by maximum likelihood.

    Parameters
    ----------
    data : pandas.DataFrame or xarray.Dataset
        As for :func:`~cmr.network.model.network_log_likelihood`.
    spec : NetworkFitSpec
        The network, its item patterns, the free parameters with their search bounds and the
        fixed values (:class:`cmr.NetworkFitSpec`). Deprecated until the next release: the
        separate keywords ``config=, patterns=, free=`` (``name -> (low, high)``) and
        ``fixed=`` still build the spec, with a DeprecationWarning.
    by : {"subject", None}
        One fit per subject, or one pooled fit of all lists.
    rng : numpy.random.Generator, int or None
        Root seed (a Generator draws one); each unit's searches are seeded by it and the unit's
        label, as :func:`cmr.fit_recall`'s.
    de_options : mapping, optional
        Options of ``scipy.optimize.differential_evolution`` (default tol 1e-6, maxiter 1000,
        popsize 15).
    n_restarts : int or "auto"
        Searches per unit. ``"auto"`` (default) searches until the best two agree within
        ``CONVERGENCE_TOLERANCE`` log units, at least two and at most ``max_restarts``, as
        :func:`cmr.fit_recall`, so ``converged`` says whether the maximum was found twice. An
        integer runs exactly that many (one search leaves ``converged`` False).
    max_restarts : int
        Most searches per unit with ``n_restarts="auto"``.

    Returns
    -------
    xarray.Dataset
        ``value`` (unit, parameter) of the free parameters, ``logl``, ``n`` (events), ``n_nan``
        (evaluations with a NaN likelihood), ``success``, ``n_restarts``, ``logl_gap`` (best minus
        second-best search), ``logl_spread`` (best minus worst) and ``converged`` per unit
        (``unit``: the subject, or ``"all"``); attrs ``k`` (free parameters), ``method`` and
        ``convergence_tolerance``.

    Warns
    -----
    FitWarning
        As :func:`cmr.fit_recall`, naming the units whose best two searches differ by more than
        ``CONVERGENCE_TOLERANCE`` (units of one search are not checked).
    """
    from scipy import optimize

    fit_spec, message = as_network_spec("fit_network", spec, deprecated_model)
    if message:
        warn(message, skip=1)
    if by not in ("subject", None):
        raise ParameterError(f"by must be 'subject' or None; got {by!r}")
    model = fit_spec._model
    config, fixed, bounds = model.config, model.fixed, dict(zip(model.free, model.bounds))
    options = dict(DE_DEFAULTS)
    options.update(de_options or {})
    count, min_restarts = restart_plan(n_restarts, max_restarts)
    seed = seed_of(rng if rng is not None else np.random.default_rng())
    patterns, lists = prepared_lists(data, config, model.patterns)
    names = list(model.free)
    first = {**fixed, **{name: low for name, (low, _) in bounds.items()}}
    list_parameters(config, lists, first)  # a configuration error stops here, before any search
    units = list(pd.unique(lists.subject)) if by == "subject" else ["all"]
    values = np.zeros((len(units), len(names)))
    logl = np.zeros(len(units))
    n_events = np.zeros(len(units), dtype=np.int64)
    n_nan = np.zeros(len(units), dtype=np.int64)
    success = np.zeros(len(units), dtype=np.int64)
    logls = []
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
        logls.append([r["logl"] for r in searches])
    verdict = convergence_variables(logls, tolerance=CONVERGENCE_TOLERANCE)
    fits = xr.Dataset(
        {"value": (("unit", "parameter"), values), "logl": ("unit", logl), "n": ("unit", n_events),
         "n_nan": ("unit", n_nan), "success": ("unit", success),
         **{name: ("unit", verdict[name]) for name in ("n_restarts", "logl_gap", "logl_spread", "converged")}},
        coords={"unit": np.asarray(units).astype(str), "parameter": names},
        attrs={"k": len(names), "method": "differential_evolution", "by": by or "pooled",
               "fixed": ",".join(f"{k}={float(v)!r}" for k, v in fixed.items()),
               "convergence_tolerance": CONVERGENCE_TOLERANCE},
    )
    warn_fit("fit_network", convergence_summary(fits), "see the fit's converged")
    return fits
