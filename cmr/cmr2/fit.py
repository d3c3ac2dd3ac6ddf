"""Maximum-likelihood fits of CMR2 to multi-list sessions: per subject or pooled, with restarts.

The search is textbook CMR's (:mod:`cmr.textbook._optimize`): seeded differential evolution,
each generation's population scored in one call split over threads, then an L-BFGS-B polish
of the best member; every restart is kept. Only the objective differs: a unit's sessions are
scored by :func:`cmr.cmr2._kernels.sessions_log_likelihood`, lists of a session in order.
The result is the ``recall_fit`` dataset of :func:`cmr.fit_recall` (docs/schema.md) with 16
parameters and attrs ``model = "cmr2"`` and ``session`` (the session variable, "" for the
default). See docs/cmr2.md.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import integer, seed_of, shown
from ..checks import n_jobs as check_n_jobs
from ..errors import ParameterError, RecallDataError
from ..events import as_events
from ..textbook._optimize import (
    MAX_RESTARTS, VectorisedObjective, polish_start, run_restarts, run_tasks, search, single_threaded_blas,
)
from ..textbook.fit import FLAG_VARIABLES, fit_dataset, restart_plan, start_points, unit_seeds
from ..textbook.flags import flag_summary, warn_fit
from ..textbook.parameters import fit_bounds
from ..textbook.spec import STANDARD_FREE, BaseFitSpec, FitSpec
from ..textbook.tied import TiedParameter, check_tied_range, evaluate
from . import _kernels
from ._sessions import SessionArrays, session_arrays
from .parameters import CMR2_PARAMETER_NAMES, CMR2_PARAMETER_SPECS, default_cmr2_parameters, validate_cmr2_parameters

__all__ = ["CMR2FitSpec", "CMR2_STANDARD_FREE", "fit_cmr2", "session_objective"]

#: the ten usually fitted textbook parameters plus CMR2's two
CMR2_STANDARD_FREE = STANDARD_FREE + ("B_distract", "C_thresh")

_EXTRA = {spec.name: spec for spec in CMR2_PARAMETER_SPECS}


def _ranges() -> tuple[np.ndarray, np.ndarray]:
    from ..textbook.parameters import PARAMETER_SPECS

    specs = {s.name: s for s in PARAMETER_SPECS} | _EXTRA
    return (np.array([specs[n].lower for n in CMR2_PARAMETER_NAMES]),
            np.array([specs[n].upper for n in CMR2_PARAMETER_NAMES]))


def _unknown(names) -> list[str]:
    return sorted({str(n) for n in names if n not in CMR2_PARAMETER_NAMES})


def _unknown_error(what: str, names) -> ParameterError:
    return ParameterError(f"unknown CMR2 {what} {', '.join(map(repr, names))}; known: {', '.join(CMR2_PARAMETER_NAMES)}")


@dataclass(frozen=True)
class _SessionModel:
    """What a CMR2 fit estimates, over the 16 parameters (textbook ``ModelSpec``'s interface)."""

    free: tuple
    bounds: tuple  # ((low, high), ...) per free parameter
    fixed: dict
    template: np.ndarray  # (16,) every parameter's value before free and tied ones are set
    tied: tuple
    names: tuple
    lower: np.ndarray  # (16,) admissible range
    upper: np.ndarray

    @property
    def k(self) -> int:
        return len(self.free)

    def vectors(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Parameter vectors (S, 16) of free values ``x`` (S, k) and whether each is admissible."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        sets = np.repeat(self.template[None, :], x.shape[0], axis=0)
        sets[:, [CMR2_PARAMETER_NAMES.index(n) for n in self.free]] = x
        if self.tied:
            columns = {name: sets[:, j] for j, name in enumerate(CMR2_PARAMETER_NAMES)}
            for name, value in evaluate(self.tied, columns).items():
                sets[:, CMR2_PARAMETER_NAMES.index(name)] = value
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(sets).all(axis=1) & (sets >= self.lower).all(axis=1) & (sets <= self.upper).all(axis=1)
            ok &= sets[:, CMR2_PARAMETER_NAMES.index("Afc")] + sets[:, CMR2_PARAMETER_NAMES.index("Dfc")] > 0
        return np.ascontiguousarray(sets), ok

    def as_dict(self, x) -> dict:
        sets, _ = self.vectors(np.asarray(x, dtype=np.float64)[None, :])
        return {name: float(sets[0, j]) for j, name in enumerate(CMR2_PARAMETER_NAMES)}


def _session_model(free, fixed, bounds, tied) -> _SessionModel:
    """Checked model of a CMR2 fit (ParameterError for any inconsistency, one line)."""
    free = [free] if isinstance(free, str) else list(free)
    if not free:
        raise ParameterError("at least one free CMR2 parameter is needed; got none")
    if len(set(free)) != len(free):
        raise ParameterError(f"free parameters must be distinct; got {', '.join(map(str, free))}")
    if _unknown(free):
        raise _unknown_error("free parameter(s)", _unknown(free))
    for what, value in (("fixed", fixed), ("bounds", bounds), ("tied", tied)):
        if value is not None and not isinstance(value, Mapping):
            raise ParameterError(f"{what} must be a mapping of parameter name to value; got {type(value).__name__}")
    fixed, bounds, tied = dict(fixed or {}), dict(bounds or {}), dict(tied or {})
    for what, names in (("fixed parameter(s)", fixed), ("bounds for", bounds), ("tied parameter(s)", tied)):
        if _unknown(names):
            raise _unknown_error(what, _unknown(names))
    both = [n for n in CMR2_PARAMETER_NAMES if n in free and n in fixed]
    if both:
        raise ParameterError(f"parameter(s) {', '.join(both)} are both free and fixed")
    clean = validate_cmr2_parameters({**default_cmr2_parameters(), **fixed})
    search = {}
    textbook_free = [n for n in free if n not in _EXTRA]
    search.update(zip(textbook_free, fit_bounds(textbook_free, bounds={n: b for n, b in bounds.items() if n not in _EXTRA})))
    for name in (n for n in free if n in _EXTRA):
        spec = _EXTRA[name]
        pair = bounds.get(name, (spec.fit_lower, spec.fit_upper))
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ParameterError(f"search bounds for CMR2 parameter {name} must be a pair (low, high); "
                                 f"got {shown(pair)}") from None
        if not (spec.lower <= low < high <= spec.upper):
            raise ParameterError(f"search bounds for CMR2 parameter {name} must satisfy {spec.lower:g} <= low < high "
                                 f"<= {spec.upper:g}; got ({low!r}, {high!r})")
        search[name] = (low, high)
    ties = []
    for name, expression in tied.items():
        if name in free or name in fixed:
            raise ParameterError(f"parameter {name} is tied and also {'free' if name in free else 'fixed'}")
        ties.append(TiedParameter(name, expression))  # expressions may use textbook parameters
    targets = {t.name for t in ties}
    for t in ties:
        chained = sorted(set(t.uses) & targets)
        if chained:
            raise ParameterError(f"tied parameter {t.name} = {t.expression!r} uses tied parameter(s) "
                                 f"{', '.join(chained)}; write it in terms of free or fixed parameters")
    lower, upper = _ranges()
    bounds_in_order = tuple(search[n] for n in free)
    check_tied_range(tuple(ties), free, bounds_in_order, clean, dict(zip(CMR2_PARAMETER_NAMES, lower)),
                     dict(zip(CMR2_PARAMETER_NAMES, upper)))
    return _SessionModel(tuple(free), bounds_in_order, {n: clean[n] for n in fixed},
                         np.array([clean[n] for n in CMR2_PARAMETER_NAMES], dtype=np.float64), tuple(ties),
                         tuple(CMR2_PARAMETER_NAMES), lower, upper)


@dataclass(frozen=True, repr=False)
class CMR2FitSpec(BaseFitSpec):
    """What a CMR2 fit estimates: :class:`cmr.FitSpec` over the 16 CMR2 parameters.

    Parameters
    ----------
    free : sequence of str or str
        Fitted parameters (default :data:`CMR2_STANDARD_FREE`: the ten of Morton & Polyn 2016
        plus ``B_distract`` and ``C_thresh``).
    fixed : mapping, optional
        Values of other parameters; the rest take :func:`cmr.default_cmr2_parameters`.
    bounds : mapping, optional
        Search bounds ``name -> (low, high)`` (defaults: docs/parameters.md, and [0, 1] for
        ``B_distract``, [0, 0.5] for ``C_thresh``).
    tied : mapping, optional
        ``name -> expression``, as :class:`cmr.FitSpec` (expressions name textbook parameters).

    Raises
    ------
    ParameterError
        As :class:`cmr.FitSpec`: unknown, repeated or doubly given parameters, bounds outside a
        parameter's range, a malformed, chained or out-of-range tie.
    """

    free: Sequence[str] | str = CMR2_STANDARD_FREE

    def _checked_model(self) -> _SessionModel:
        return _session_model(self.free, self.fixed, self.bounds, self.tied)


def as_cmr2_spec(spec) -> CMR2FitSpec:
    """A :class:`CMR2FitSpec` from None (the default), itself, or a localist :class:`cmr.FitSpec`."""
    if spec is None:
        return CMR2FitSpec()
    if isinstance(spec, CMR2FitSpec):
        return spec
    if isinstance(spec, FitSpec):
        if spec.patterns is not None or spec.pool_size is not None:
            raise ParameterError("CMR2 is localist with a session-sized context; the FitSpec must not set "
                                 f"patterns or pool_size; got {spec!r}")
        return CMR2FitSpec(spec.free, dict(spec.fixed), dict(spec.bounds), dict(spec.tied))
    raise ParameterError(f"spec must be a cmr.CMR2FitSpec, a cmr.FitSpec or None; got {type(spec).__name__}")


class _SessionObjective(VectorisedObjective):
    """Negative log-likelihood of one unit's sessions, vectorised over a population.

    The interface of textbook CMR's objective (:mod:`cmr.textbook._optimize`): a population
    (k, S) or one point (k,) of free values in, +inf for inadmissible sets, NaN totals counted
    in ``n_nan`` and never replaced silently.
    """

    def __init__(self, spec: _SessionModel, arrays: SessionArrays, pool, n_chunks: int):
        self.spec = spec
        self.arrays = arrays
        self.pool = pool
        self.n_chunks = n_chunks
        self.nfev = 0
        self.n_nan = 0
        self.n_invalid = 0

    def _score(self, sets):
        a = self.arrays
        n_trials = a.order.size
        logl = np.empty(n_trials)
        count = np.empty(n_trials, dtype=np.int64)
        event_p = np.empty((n_trials, a.scored.shape[1] + 1))
        session_param = np.zeros(a.session_units.size, dtype=np.int64)
        totals = np.empty(sets.shape[0])
        for i in range(sets.shape[0]):  # one kernel call per set: sessions of one set share nothing
            _kernels.sessions_log_likelihood(sets[i:i + 1], session_param, *a.kernel_study(), a.scored, a.n_scored,
                                             logl, count, event_p)
            totals[i] = logl.sum()
        return totals


#: evaluations per free parameter of the Nelder-Mead polish (:func:`simplex_polish`)
SIMPLEX_EVALUATIONS = 250


def simplex_polish(objective, bounds, found: dict) -> dict:
    """Nelder-Mead (bounded, adaptive) from a search's end ``found``, kept where it scores higher.

    With ``C_thresh`` above 0 CMR2's likelihood is a step function of the parameters (an item
    edited out or not), so the finite-difference gradient of the L-BFGS-B polish is zero or
    huge and the polish stops where differential evolution did; a simplex does not need the
    gradient. On docs/cmr2.md's example (free ``B_enc``, ``B_distract``, ``C_thresh``) the
    default fit of subject 1 rose from -1188.88 (8 searches, the best two 0.25 apart) to
    -1188.08 (2 searches that agree). At most ``SIMPLEX_EVALUATIONS`` evaluations per free
    parameter; counted in ``nfev``, ``n_nan``, ``n_invalid`` and ``seconds``.
    """
    from scipy import optimize

    begin = time.perf_counter()
    nfev0, nan0, invalid0 = objective.nfev, objective.n_nan, objective.n_invalid
    x0 = np.asarray(found["x"], dtype=np.float64)
    result = optimize.minimize(lambda x: float(objective(np.asarray(x, dtype=np.float64))), x0, method="Nelder-Mead",
                               bounds=list(bounds), options=dict(maxfev=SIMPLEX_EVALUATIONS * x0.size, xatol=1e-7,
                                                                  fatol=1e-9, adaptive=True))
    out = dict(found)
    x = np.asarray(result.x, dtype=np.float64)
    logl = -float(objective(x))  # rescored: the value kept
    if np.isfinite(logl) and logl > found["logl"]:
        out.update(x=x, logl=logl)
    out["nfev"] = found["nfev"] + objective.nfev - nfev0
    out["n_nan"] = found["n_nan"] + objective.n_nan - nan0
    out["n_invalid"] = found["n_invalid"] + objective.n_invalid - invalid0
    out["seconds"] = found["seconds"] + time.perf_counter() - begin
    return out


def fit_sessions(spec: _SessionModel, arrays: SessionArrays, seeds, de_options=None, polish: bool = True,
                 n_threads: int = 1, min_restarts: int | None = None, start=None) -> list[dict]:
    """Fit one unit's sessions from its seeds (and ``start``), as textbook CMR's ``fit_unit``; every restart."""
    pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
    try:
        objective = _SessionObjective(spec, arrays, pool, n_threads)
        with single_threaded_blas():
            first = [] if start is None else [polish_start(objective, spec.bounds, start)]
            if first:  # the likelihood has steps (C_thresh): report the value kept, scored once more
                first[0]["logl"] = -float(objective(first[0]["x"]))
                first[0] = simplex_polish(objective, spec.bounds, first[0]) if polish else first[0]

            def one(seed):
                found = search(objective, spec.bounds, seed, dict(de_options or {}), polish, rescore=True)
                return simplex_polish(objective, spec.bounds, found) if polish else found

            return run_restarts(one, seeds, min_restarts, results=first)
    finally:
        if pool is not None:
            pool.shutdown()


def _source_of(events) -> str:
    try:
        return json.loads(events.attrs.get("provenance", "{}")).get("source", "")
    except (TypeError, ValueError, AttributeError, RecursionError):
        return ""


def fit_cmr2(
    events,
    spec: CMR2FitSpec | FitSpec | None = None,
    *,
    session: str | None = None,
    by: str | None = "subject",
    n_restarts: int | str = "auto",
    rng=0,
    n_jobs: int = 1,
    executor=None,
    polish: bool = True,
    progress: bool = True,
    de_options: Mapping | None = None,
    max_restarts: int = MAX_RESTARTS,
    start=None,
) -> xr.Dataset:
    """Fit CMR2 to multi-list sessions by maximum likelihood, per subject or pooled.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Events dataset or psifr long table (prior-list intrusions are scored, as in
        :func:`cmr.cmr2_log_likelihood`).
    spec : CMR2FitSpec or FitSpec, optional
        Free, fixed and tied parameters and search bounds (default ``CMR2FitSpec()``). A
        localist :class:`cmr.FitSpec` (no patterns, no pool size) is read as the same CMR2 spec,
        ``B_distract`` and ``C_thresh`` keeping their defaults.
    session : str, optional
        Variable that labels sessions, as in :func:`cmr.cmr2_log_likelihood` (``"session"``
        for psifr's Morton2013). Default: the events' list keys, else one session per subject.
    by, n_restarts, rng, n_jobs, executor, polish, progress, de_options, max_restarts, start
        As :func:`cmr.fit_recall` (by default restarts run until the best two agree within
        ``CONVERGENCE_TOLERANCE`` log units: ``converged``).

    Returns
    -------
    xarray.Dataset
        Kind ``recall_fit``, the schema of :func:`cmr.fit_recall` with the 16 CMR2 parameters;
        ``n`` counts the scored events (recalls, prior-list intrusions and stops); attrs
        ``model = "cmr2"`` and ``session``. It is a parameter set of
        :func:`cmr.cmr2_log_likelihood`, :func:`cmr.simulate_cmr2_experiment` and
        :func:`cmr.simulate_cmr2`.

    Warns
    -----
    FitWarning
        As :func:`cmr.fit_recall`: estimates at a search bound, units with few scored events,
        units not converged.
    """
    fit_spec = as_cmr2_spec(spec)
    model = fit_spec._model
    events = as_events(events)
    if by not in ("subject", None):
        raise RecallDataError(f"by must be 'subject' (one fit per subject) or None (pooled); got {by!r}")
    count, min_restarts = restart_plan(n_restarts, max_restarts)
    n_jobs = check_n_jobs(n_jobs)
    if de_options is not None and not isinstance(de_options, Mapping):
        raise ParameterError(f"de_options must be a mapping of differential_evolution options; "
                             f"got {type(de_options).__name__}")
    whole = session_arrays(events, session)  # checks the session variable once, for every unit
    if by is None:
        labels, unit_arrays = None, [whole]
    else:
        index, labels = pd.factorize(np.asarray(events["subject"].values), sort=False)
        unit_arrays = [session_arrays(events.isel(trial=np.flatnonzero(index == i)), session)
                       for i in range(len(labels))]
    seed = seed_of(rng)
    workers = max(1, min(n_jobs, len(unit_arrays)))
    threads = 1 if executor is not None else max(1, n_jobs // workers)
    _SessionObjective(model, unit_arrays[0], None, 1)(model.template[[CMR2_PARAMETER_NAMES.index(n)
                                                                      for n in model.free]])  # compile once
    keys = ["pooled"] if labels is None else list(labels)
    starts = start_points(model, start, labels, CMR2_PARAMETER_NAMES) or [None] * len(unit_arrays)
    tasks = [(fit_sessions, (model, arrays, unit_seed, de_options, polish, threads, min_restarts, first))
             for arrays, unit_seed, first in zip(unit_arrays, unit_seeds(seed, keys, count), starts)]
    results = run_tasks(tasks, n_jobs=workers, executor=executor, progress=progress, desc="fit-cmr2")
    counts = [int((arrays.n_scored + 1).sum()) for arrays in unit_arrays]
    info = dict(free=list(model.free), fixed=model.fixed, bounds=dict(zip(model.free, model.bounds)),
                tied={t.name: t.expression for t in model.tied}, seed=int(seed), polish=bool(polish),
                de_options=dict(de_options or {}), n_restarts=n_restarts if isinstance(n_restarts, str) else count,
                max_restarts=count, by=by, source=_source_of(events), start=start is not None,
                model="cmr2", session=session or "")
    fits = fit_dataset(model, labels, results, counts, "cmr.fit_cmr2", info)
    fits.attrs["model"] = "cmr2"
    fits.attrs["session"] = session or ""
    warn_fit("fit_cmr2", flag_summary(fits), FLAG_VARIABLES)
    return fits


def session_objective(events, spec: CMR2FitSpec | FitSpec | None = None, *, session: str | None = None):
    """The CMR2 objective of all sessions of ``events`` as one unit (e.g. one subject's), for other fitters.

    What :func:`fit_cmr2` minimises for each unit, for fitters that search on their own
    (:func:`cmr.fit_population`). The result has ``spec`` (the checked model: ``free``,
    ``bounds``, ``vectors(x) -> (sets, admissible)`` over the 16 parameters), ``arrays`` (the
    sessions; ``arrays.n_scored`` recalls scored per list, plus one stop each) and
    ``totals(sets)``: the log-likelihood of each row of full parameter sets ``sets`` (S, 16),
    as :func:`cmr.cmr2_log_likelihood` gives it. ``spec`` and ``session`` are those of
    :func:`fit_cmr2`. It pickles, so it can be sent to a process or a dask worker.
    """
    fit_spec = as_cmr2_spec(spec)
    return _SessionObjective(fit_spec._model, session_arrays(as_events(events), session), None, 1)
