"""Maximum-likelihood search of one fitting unit (a subject, a pooled group, a training fold).

The unit's whole differential-evolution population is scored in one call per generation,
split into contiguous chunks over threads (the numba kernels release the GIL), each chunk's
sets run side by side as SIMD lanes (``_lanes``; a set's score does not depend on its
neighbours); the best member is polished with L-BFGS-B on the logit scale of the bounds.
Each restart is an independent search from its own seed and all restarts are returned. :func:`fit_unit` is a plain module-level function of
picklable arguments, so it runs unchanged in a thread, a process or on a dask worker.
"""
from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..constants import CONVERGENCE_TOLERANCE
from ..errors import ParameterError
from . import _lanes
from ._trials import TrialArrays
from .parameters import (
    MODEL_PARAMETER_NAMES, PARAMETER_NAMES, PARAMETER_SPECS, SEMANTIC_PARAMETER_SPECS, default_parameters,
    fit_bounds, validate_parameters,
)
from .tied import check_tied_range, evaluate, parse_tied

__all__ = ["ModelSpec", "model_spec", "VectorisedObjective", "fit_unit", "score_unit", "search", "run_tasks",
           "DE_DEFAULTS", "MIN_RESTARTS", "MAX_RESTARTS", "run_restarts", "logl_gap", "has_converged",
           "LogitObjective", "polish_logit", "polish_start"]

#: scipy's defaults, as cymr uses them, with Sobol initialisation
DE_DEFAULTS = dict(popsize=15, tol=0.01, maxiter=1000, init="sobol")

#: Adaptive restarts (``n_restarts="auto"``): at least this many searches per unit, so that the
#: convergence verdict (best two within ``CONVERGENCE_TOLERANCE``) can be checked at all ...
MIN_RESTARTS = 2

#: ... and at most this many, when the best two never agree
MAX_RESTARTS = 8


def logl_gap(logls) -> float:
    """Best minus second-best finite log-likelihood of a unit's restarts (NaN with fewer than two)."""
    values = np.sort(np.asarray([v for v in logls if np.isfinite(v)], dtype=np.float64))
    return float(values[-1] - values[-2]) if values.size >= 2 else float("nan")


def has_converged(logls, tolerance: float = CONVERGENCE_TOLERANCE) -> bool:
    """Whether the best two restarts agree within ``tolerance`` log units (False with fewer than two)."""
    gap = logl_gap(logls)
    return bool(np.isfinite(gap) and gap <= tolerance)


def run_restarts(run_one, seeds, min_restarts: int | None = None, tolerance: float = CONVERGENCE_TOLERANCE,
                 results=None, uncounted: int = 0) -> list:
    """Restarts ``run_one(seed) -> dict`` (with ``logl``), one per seed, in order.

    ``min_restarts`` None: every seed. Otherwise restarts stop as soon as at least
    ``min_restarts`` ran and the best two agree within ``tolerance`` (:func:`has_converged`),
    or the seeds run out. The seeds are fixed in advance and the stop depends only on the
    results, so the restarts run do not depend on threads or executors. ``results``: searches
    already run (a polish from a given start, polishes from the start library), compared like
    the restarts; the first ``uncounted`` of them (the library's) do not count towards
    ``min_restarts``.
    """
    results = list(results or [])
    for seed in seeds:
        results.append(run_one(seed))
        if (min_restarts is not None and len(results) - uncounted >= min_restarts
                and has_converged([r["logl"] for r in results], tolerance)):
            break
    return results


@dataclass(frozen=True)
class ModelSpec:
    """What is fitted: free parameters and their bounds, fixed values, tied expressions."""

    free: tuple
    bounds: tuple  # ((low, high), ...) per free parameter
    fixed: dict  # the user's fixed values (provenance)
    template: np.ndarray  # (19,) every parameter's value before free and tied ones are set
    tied: tuple  # TiedParameter, ...
    names: tuple  # parameter coordinate of the result: 14 names, or 19 with item patterns
    lower: np.ndarray  # (19,) admissible lower bounds
    upper: np.ndarray  # (19,) admissible upper bounds

    @property
    def k(self) -> int:
        """Number of free parameters (tied and fixed ones are not counted)."""
        return len(self.free)

    @property
    def free_index(self) -> np.ndarray:
        return np.array([MODEL_PARAMETER_NAMES.index(n) for n in self.free], dtype=np.int64)

    def vectors(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Parameter vectors (S, 19) of free values ``x`` (S, k) and whether each is admissible."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        sets = np.repeat(self.template[None, :], x.shape[0], axis=0)
        sets[:, self.free_index] = x
        if self.tied:
            columns = {name: sets[:, j] for j, name in enumerate(MODEL_PARAMETER_NAMES)}
            for name, value in evaluate(self.tied, columns).items():
                sets[:, MODEL_PARAMETER_NAMES.index(name)] = value
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(sets).all(axis=1) & (sets >= self.lower).all(axis=1) & (sets <= self.upper).all(axis=1)
            afc, dfc = MODEL_PARAMETER_NAMES.index("Afc"), MODEL_PARAMETER_NAMES.index("Dfc")
            ok &= sets[:, afc] + sets[:, dfc] > 0
        return np.ascontiguousarray(sets), ok

    def as_dict(self, x) -> dict:
        """One parameter set (names of the result) of free values ``x`` (k,)."""
        sets, _ = self.vectors(np.asarray(x, dtype=np.float64)[None, :])
        return {name: float(sets[0, MODEL_PARAMETER_NAMES.index(name)]) for name in self.names}


def model_spec(free, fixed=None, bounds=None, tied=None, *, patterns: bool = False) -> ModelSpec:
    """Checked :class:`ModelSpec` (ParameterError for any inconsistency)."""
    free = [free] if isinstance(free, str) else list(free)
    if not free:
        raise ParameterError("at least one free parameter is needed; got none")
    if len(set(free)) != len(free):
        raise ParameterError(f"free parameters must be distinct; got {free}")
    fixed = validate_parameters(dict(fixed or {}), partial=True)
    both = sorted(set(free) & set(fixed))
    if both:
        raise ParameterError(f"parameter(s) {', '.join(both)} are both free and fixed")
    search = fit_bounds(free, bounds=bounds)
    names = MODEL_PARAMETER_NAMES if patterns else PARAMETER_NAMES
    tied_params = parse_tied(tied, free, fixed)
    if not patterns:
        pattern_names = sorted((set(free) | {t.name for t in tied_params} | {k for k, v in fixed.items() if v != 0})
                               - set(PARAMETER_NAMES))
        if pattern_names:
            raise ParameterError(
                f"pattern weight(s) {', '.join(pattern_names)} need item patterns (patterns=cmr.item_patterns(...))"
            )
    template = default_parameters(semantic=True)
    template.update(fixed)
    specs = PARAMETER_SPECS + SEMANTIC_PARAMETER_SPECS
    # a tie that fails or leaves its range on the bounds is refused now, not scored -inf in every set
    check_tied_range(tied_params, free, search, template, {s.name: s.lower for s in specs},
                     {s.name: s.upper for s in specs})
    return ModelSpec(
        tuple(free), tuple(search), fixed, np.array([template[n] for n in MODEL_PARAMETER_NAMES], dtype=np.float64),
        tied_params, tuple(names), np.array([s.lower for s in specs]), np.array([s.upper for s in specs]),
    )


_BLAS_LOCK = threading.Lock()
_BLAS_USERS = [0, None]  # fits running in this process, the threadpoolctl limiter they share


@contextlib.contextmanager
def single_threaded_blas():
    """Keep BLAS single-threaded while any fit of this process runs.

    scipy's L-BFGS-B calls BLAS on vectors of ~10 numbers; a multi-threaded OpenBLAS on a busy
    machine then spends milliseconds per iteration waking its threads (measured: 6 ms per
    iteration, 3x the whole polish). Uses threadpoolctl when it is installed.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it fits are correct, the polish only slower
        yield
        return
    with _BLAS_LOCK:
        if _BLAS_USERS[0] == 0:
            _BLAS_USERS[1] = threadpool_limits(limits=1, user_api="blas")
        _BLAS_USERS[0] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS[0] -= 1
            if _BLAS_USERS[0] == 0:
                _BLAS_USERS[1].restore_original_limits()
                _BLAS_USERS[1] = None


class VectorisedObjective:
    """Negative log-likelihood of one unit, vectorised over a population of parameter vectors.

    A subclass sets ``spec`` (``vectors(population) -> (sets, admissible)``), ``pool``,
    ``n_chunks`` and the counters ``nfev``, ``n_nan``, ``n_invalid``, and scores full parameter
    sets in ``_score(sets) -> totals`` (textbook CMR's lanes kernel, CMR2's session kernel).
    """

    def totals(self, sets: np.ndarray) -> np.ndarray:
        """Log-likelihood of each row of ``sets`` (one full parameter set per row), chunks in parallel threads."""
        if self.pool is None or self.n_chunks < 2 or sets.shape[0] < 2:
            return self._score(sets)
        bounds = np.linspace(0, sets.shape[0], min(self.n_chunks, sets.shape[0]) + 1).astype(int)
        futures = [self.pool.submit(self._score, np.ascontiguousarray(sets[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]
        return np.concatenate([f.result() for f in futures])

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        population = x.T if x.ndim == 2 else x[None, :]
        sets, ok = self.spec.vectors(population)
        values = np.full(sets.shape[0], np.inf)
        if ok.any():
            totals = self.totals(np.ascontiguousarray(sets[ok]))
            nan = np.isnan(totals)
            self.n_nan += int(nan.sum())  # counted and reported in the fit dataset, never hidden
            values[ok] = np.where(nan, np.inf, -totals)
        self.n_invalid += int((~ok).sum())
        self.nfev += sets.shape[0]
        return values if x.ndim == 2 else float(values[0])

    def value_and_gradient(self, x, bounds):
        """Value and forward-difference gradient at ``x``, all k + 1 points in one call.

        Steps are scipy's (``sqrt(eps) * max(1, |x|)``), taken backwards at an upper bound or
        where the forward point is inadmissible (a tied value out of range); a component with
        no admissible neighbour is 0. At an inadmissible ``x`` the value is +inf.
        """
        x = np.asarray(x, dtype=np.float64)
        upper = np.array([b[1] for b in bounds])
        step = np.sqrt(np.finfo(np.float64).eps) * np.maximum(1.0, np.abs(x))
        step = np.where(x + step > upper, -step, step)
        points = np.repeat(x[:, None], x.size + 1, axis=1)
        points[np.arange(x.size), np.arange(1, x.size + 1)] += step
        values = self(points)
        base, near = values[0], values[1:]
        if not np.isfinite(base):
            return float(base), np.zeros(x.size)
        bad = ~np.isfinite(near)
        if bad.any():
            step[bad] = -step[bad]
            back = np.repeat(x[:, None], int(bad.sum()), axis=1)
            back[np.flatnonzero(bad), np.arange(int(bad.sum()))] += step[bad]
            near[bad] = self(back)
        gradient = np.zeros(x.size)
        ok = np.isfinite(near)
        gradient[ok] = (near[ok] - base) / step[ok]
        return float(base), gradient


class _Objective(VectorisedObjective):
    """Negative log-likelihood of one unit's trials, vectorised over a population."""

    def __init__(self, spec: ModelSpec, arrays: TrialArrays, pool: ThreadPoolExecutor | None, n_chunks: int):
        self.spec = spec
        self.arrays = arrays
        self.order = arrays.order(np.zeros(arrays.n_trials, dtype=np.int64))
        self.groups = arrays.kernel_groups()
        self.pool = pool
        self.n_chunks = n_chunks
        self.nfev = 0
        self.n_nan = 0
        self.n_invalid = 0

    def _score(self, sets):
        return _lanes.population_totals(sets, self.arrays, self.order)


#: The polish searches each free parameter on the logit scale of its bounds,
#: ``z = log((x - low) / (high - x))``, within ``[-POLISH_Z, POLISH_Z]`` (6e-6 of the range from
#: a bound, far inside ``AT_BOUND_TOLERANCE``): a bound is then a direction to go, not a wall.
POLISH_Z = 12.0

#: The polish starts from this many of the best distinct members of the final
#: differential-evolution population and keeps the best end: members in other basins than the
#: best one are second chances at the maximum for a fraction of a search's cost.
POLISH_MEMBERS = 4


class LogitObjective(VectorisedObjective):
    """A vectorised objective of free values ``x`` as one of logits ``z`` of their bounds.

    On the natural scale an optimum on or near a bound sits at the end of a narrow curved
    ridge (e.g. textbook CMR's small ``Lcf`` traded against small ``T``), along which
    L-BFGS-B's projected, finite-difference steps stall; on the logit scale a parameter near a
    bound changes by relative steps and the ridge straightens. On psifr's Morton2013 the polish
    from the same differential-evolution result reached the best known maximum far more often
    this way (docs/fitting-recall.md, "How the maximum is searched").
    """

    def __init__(self, objective, bounds):
        self.objective = objective
        self.low = np.array([b[0] for b in bounds], dtype=np.float64)
        self.width = np.array([b[1] - b[0] for b in bounds], dtype=np.float64)
        self.bounds = [(-POLISH_Z, POLISH_Z)] * len(bounds)

    def natural(self, z):
        z = np.asarray(z, dtype=np.float64)
        scale = (lambda a: a[:, None]) if z.ndim == 2 else (lambda a: a)
        return scale(self.low) + scale(self.width) / (1.0 + np.exp(-z))

    def latent(self, x):
        edge = 1.0 / (1.0 + np.exp(POLISH_Z))
        share = np.clip((np.asarray(x, dtype=np.float64) - self.low) / self.width, edge, 1.0 - edge)
        return np.log(share / (1.0 - share))

    def __call__(self, z):
        return self.objective(self.natural(z))


def polish_logit(objective, bounds, x, f) -> tuple[np.ndarray, float]:
    """L-BFGS-B from ``x`` (value ``f``) on the logit scale of ``bounds``; the better of start and end.

    Parameters the polish leaves at the edge of the logit range are then tried exactly on their
    bound (kept where that scores at least as well), so an estimate on a bound reads as one.
    """
    from scipy import optimize

    logit = LogitObjective(objective, bounds)
    local = optimize.minimize(logit.value_and_gradient, logit.latent(x), args=(logit.bounds,), jac=True,
                              method="L-BFGS-B", bounds=logit.bounds)
    if not (np.isfinite(local.fun) and local.fun < f):
        return np.asarray(x, dtype=np.float64), float(f)
    best_x, best_f = logit.natural(local.x), float(local.fun)
    edge = np.abs(local.x) >= POLISH_Z - 1e-6
    if edge.any():
        snapped = best_x.copy()
        snapped[edge] = np.where(local.x > 0, logit.low + logit.width, logit.low)[edge]
        value = objective(snapped)
        if np.isfinite(value) and value <= best_f:
            best_x, best_f = snapped, float(value)
    return best_x, best_f


def _polish_starts(result, best_x, best_f) -> list:
    """The best point of a differential-evolution result and its next best distinct members (``POLISH_MEMBERS``)."""
    starts = [(np.asarray(best_x, dtype=np.float64), float(best_f))]
    population = getattr(result, "population", None)
    energies = getattr(result, "population_energies", None)
    if population is None or energies is None:  # scipy before 1.12 does not return the population
        return starts
    for j in np.argsort(energies, kind="stable"):
        if len(starts) >= POLISH_MEMBERS:
            break
        if np.isfinite(energies[j]) and not any(np.array_equal(population[j], x) for x, _ in starts):
            starts.append((np.asarray(population[j], dtype=np.float64), float(energies[j])))
    return starts


def search(objective, bounds, seed: int, de_options: dict, polish: bool, *, rescore: bool = False) -> dict:
    """One restart: differential evolution (``DE_DEFAULTS`` updated by ``de_options``), then an
    L-BFGS-B polish on the logit scale of the bounds (:func:`polish_logit`) from its best point
    and the next best distinct members (``POLISH_MEMBERS`` in all); the best end is kept where
    it improves.

    ``objective`` is a vectorised negative log-likelihood with ``value_and_gradient`` and the
    counters ``nfev``, ``n_nan``, ``n_invalid`` (textbook CMR's, CMR2's). ``rescore``: report
    the log-likelihood of the values kept, scored once more, for a likelihood with steps (CMR2's
    ``C_thresh``) where the polish's figure may belong to a neighbouring point.
    """
    from scipy import optimize

    options = dict(DE_DEFAULTS)
    options.update(de_options)
    start = time.perf_counter()
    nfev0, nan0, invalid0 = objective.nfev, objective.n_nan, objective.n_invalid
    result = optimize.differential_evolution(
        objective, bounds, rng=np.random.default_rng(seed), polish=False, vectorized=True, updating="deferred",
        **options,
    )
    best_x, best_f, nit = result.x, float(result.fun), int(result.nit)
    success, message = bool(result.success), str(result.message)
    if polish:
        for x, f in _polish_starts(result, best_x, best_f):
            x, f = polish_logit(objective, bounds, x, f)
            if f < best_f:
                best_x, best_f = x, f
    best_x = np.asarray(best_x, dtype=np.float64)
    logl = -objective(best_x) if rescore else -best_f
    return dict(
        x=best_x, logl=logl, nit=nit, success=success, message=message,
        nfev=objective.nfev - nfev0, n_nan=objective.n_nan - nan0, n_invalid=objective.n_invalid - invalid0,
        seconds=time.perf_counter() - start, seed=int(seed),
    )


def polish_start(objective, bounds, start, seed: int = -1) -> dict:
    """A search from a given point: :func:`polish_logit` from ``start`` (free values), never worse than it.

    The result has the keys of :func:`search`, with ``seed`` (-1: a given start, -2: a point of
    the start library) and ``nit`` 0.
    """
    begin = time.perf_counter()
    nfev0, nan0, invalid0 = objective.nfev, objective.n_nan, objective.n_invalid
    x = np.asarray(start, dtype=np.float64)
    f = objective(x)
    x, f = polish_logit(objective, bounds, x, f) if np.isfinite(f) else (x, f)
    return dict(x=x, logl=-float(f), nit=0, success=bool(np.isfinite(f)), message="polished from the given start",
                nfev=objective.nfev - nfev0, n_nan=objective.n_nan - nan0, n_invalid=objective.n_invalid - invalid0,
                seconds=time.perf_counter() - begin, seed=int(seed))


def fit_unit(spec: ModelSpec, arrays: TrialArrays, seeds, de_options=None, polish: bool = True,
             n_threads: int = 1, min_restarts: int | None = None, start=None, library: bool = False) -> list[dict]:
    """Fit one unit from its seeds (one restart per seed, :func:`run_restarts`); every restart's result, in order.

    ``library``: first a polish from each point of the start library
    (:func:`cmr.textbook.starts.library_starts`; ``restart_seed`` -2; inadmissible ones
    skipped), compared with the searches but not counted towards ``min_restarts``. ``start``
    (free values, optional): then a polish from there (:func:`polish_start`), so the fit is never
    worse than that point (e.g. a nested model's or a population fit's estimate).
    """
    from .starts import library_starts

    pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
    try:
        objective = _Objective(spec, arrays, pool, n_threads)
        with single_threaded_blas():
            first = [out for out in (polish_start(objective, spec.bounds, x, seed=-2)
                                     for x in (library_starts(spec) if library else []))
                     if np.isfinite(out["logl"])]
            uncounted = len(first)
            if start is not None:
                first.append(polish_start(objective, spec.bounds, start))
            return run_restarts(lambda seed: search(objective, spec.bounds, seed, dict(de_options or {}), polish),
                                seeds, min_restarts, results=first, uncounted=uncounted)
    finally:
        if pool is not None:
            pool.shutdown()


def score_unit(spec: ModelSpec, arrays: TrialArrays, x) -> float:
    """Log-likelihood of a unit's trials at free values ``x`` (NaN for inadmissible values)."""
    sets, ok = spec.vectors(np.asarray(x, dtype=np.float64)[None, :])
    if not ok[0]:
        return float("nan")
    objective = _Objective(spec, arrays, None, 1)
    return float(objective.totals(sets)[0])


def run_tasks(tasks, *, n_jobs: int, executor=None, progress: bool = False, desc: str = "fit-recall"):
    """Run ``(func, args)`` tasks; results in task order.

    ``executor`` (a ``concurrent.futures.Executor`` or a ``dask.distributed.Client``) gets one
    submitted task per entry; otherwise threads run ``n_jobs`` tasks at once.
    """
    from tqdm.auto import tqdm

    results = [None] * len(tasks)
    with tqdm(total=len(tasks), desc=desc, unit="task", disable=not progress) as bar:
        if executor is not None:
            futures = [executor.submit(func, *args) for func, args in tasks]
            for i, future in enumerate(futures):
                results[i] = future.result()
                bar.update(1)
            return results
        with ThreadPoolExecutor(max_workers=max(1, min(n_jobs, len(tasks)))) as pool:
            futures = [pool.submit(func, *args) for func, args in tasks]
            for i, future in enumerate(futures):
                results[i] = future.result()
                bar.update(1)
    return results
