"""Maximum-likelihood fits of textbook CMR to recall sequences, per subject, in parallel.

Each subject is fitted by scipy's differential evolution (seeded, whole populations scored
in one nogil numba call) followed by a local L-BFGS-B polish from the best member.
Subjects run in threads; the kernels release the GIL, so threads use all cores without
copying data to processes. The result is a ``recall_fit`` dataset (see docs/schema.md).
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .._checks import n_jobs as check_n_jobs
from .._checks import seed_of
from ..errors import ParameterError
from ..events import as_events, from_recall_matrix
from ..schema import provenance_attrs
from . import _kernels
from .likelihood import prepare_trials
from .parameters import PARAMETER_NAMES, default_parameters, fit_bounds, validate_parameters
from .simulate import simulate_recalls

__all__ = ["fit_recall", "parameter_recovery", "STANDARD_FREE"]

# the ten parameters usually fitted to free recall (Morton & Polyn 2016), A/D fixed
STANDARD_FREE = ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2")


def _split_parameters(free, fixed):
    free = list(free)
    if not free:
        raise ParameterError("at least one free parameter is needed; got none")
    if len(set(free)) != len(free):
        raise ParameterError(f"free parameters must be distinct; got {free}")
    fixed = validate_parameters(dict(fixed or {}), partial=True)
    both = sorted(set(free) & set(fixed))
    if both:
        raise ParameterError(f"parameter(s) {', '.join(both)} are both free and fixed")
    template = default_parameters()
    template.update(fixed)
    fit_bounds(free)  # unknown names raise here
    return free, fixed, template


class _Objective:
    """Negative log-likelihood of one subject's trials; vectorised over parameter sets."""

    def __init__(self, template_vector, free_index, recalls, list_length, n_other):
        self.template = template_vector
        self.free_index = free_index
        self.recalls, self.list_length, self.n_other = recalls, list_length, n_other
        self.n_nan = 0
        self.nfev = 0

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        sets = np.repeat(self.template[None, :], 1 if x.ndim == 1 else x.shape[1], axis=0)
        sets[:, self.free_index] = x.T if x.ndim == 2 else x
        totals = _kernels.population_log_likelihood(
            np.ascontiguousarray(sets), self.list_length, self.n_other, self.recalls
        )
        self.nfev += sets.shape[0]
        nan = np.isnan(totals)
        if nan.any():  # counted and reported in the fit dataset, never hidden
            self.n_nan += int(nan.sum())
        values = np.where(nan, np.inf, -totals)
        return values if x.ndim == 2 else float(values[0])


def _fit_one(objective, bounds, seed, de_options, polish):
    from scipy import optimize

    options = dict(popsize=15, tol=0.01, maxiter=1000, init="sobol")
    options.update(de_options)
    start = time.perf_counter()
    result = optimize.differential_evolution(
        objective, bounds, rng=np.random.default_rng(seed), polish=False, vectorized=True,
        updating="deferred", **options,
    )
    best_x, best_f, nit = result.x, float(result.fun), int(result.nit)
    success, message = bool(result.success), str(result.message)
    if polish:
        local = optimize.minimize(objective, best_x, method="L-BFGS-B", bounds=bounds)
        if np.isfinite(local.fun) and local.fun < best_f:
            best_x, best_f = local.x, float(local.fun)
    return dict(
        x=np.asarray(best_x, dtype=np.float64), fun=best_f, nit=nit, success=success, message=message,
        nfev=objective.nfev, n_nan=objective.n_nan, seconds=time.perf_counter() - start,
    )


def fit_recall(
    events,
    free: Sequence[str] = STANDARD_FREE,
    fixed: Mapping[str, float] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    *,
    rng=0,
    pool_size: int | None = None,
    n_jobs: int = 1,
    polish: bool = True,
    progress: bool = True,
    de_options: Mapping | None = None,
) -> xr.Dataset:
    """Fit CMR to each subject's recall sequences by maximum likelihood.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Events dataset or psifr long table; trials are grouped by subject.
    free : sequence of str
        Names of the fitted parameters (default: the ten of Morton & Polyn 2016).
    fixed : mapping, optional
        Values of other parameters; any parameter neither free nor fixed takes its default
        (cmr.parameters.default_parameters).
    bounds : mapping, optional
        Search bounds ``name -> (low, high)`` overriding the typical ranges.
    rng : int, numpy.random.Generator or None
        Root seed (a Generator draws one); subject i gets an independent stream spawned from
        it, so results do not depend on ``n_jobs``.
    pool_size : int, optional
        cymr pool size for a pool-sized context (default: list-sized).
    n_jobs : int
        Subjects fitted at once in threads.
    polish : bool
        Run L-BFGS-B from the best differential-evolution member.
    progress : bool
        Show a tqdm progress bar over subjects.
    de_options : mapping, optional
        Extra keyword arguments of scipy.optimize.differential_evolution
        (defaults: popsize=15, tol=0.01, maxiter=1000, init="sobol").

    Returns
    -------
    xarray.Dataset
        Kind ``recall_fit``: ``value`` (subject, parameter), ``logl``, ``n``, ``nfev``,
        ``nit``, ``success``, ``n_nan``, ``seconds`` and ``message`` per subject; ``free``,
        ``lower``, ``upper`` per parameter.
    """
    events = as_events(events)
    free, fixed, template = _split_parameters(free, fixed)
    search = fit_bounds(free, bounds)
    n_jobs = check_n_jobs(n_jobs)
    recalls, list_length, n_other = prepare_trials(events, pool_size)
    subject_index, subjects = pd.factorize(np.asarray(events["subject"].values), sort=False)
    template_vector = np.array([template[name] for name in PARAMETER_NAMES], dtype=np.float64)
    free_index = np.array([PARAMETER_NAMES.index(name) for name in free], dtype=np.int64)
    seed = seed_of(rng)
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(len(subjects))]

    def run(i):
        rows = np.flatnonzero(subject_index == i)
        objective = _Objective(
            template_vector, free_index, np.ascontiguousarray(recalls[rows]),
            np.ascontiguousarray(list_length[rows]), np.ascontiguousarray(n_other[rows]),
        )
        out = _fit_one(objective, search, seeds[i], dict(de_options or {}), polish)
        out["n"] = int(np.sum(_event_counts(recalls[rows])))
        return out

    _kernels.population_log_likelihood(template_vector[None, :], list_length[:1], n_other[:1], recalls[:1])  # compile once
    results = [None] * len(subjects)
    from tqdm.auto import tqdm

    with tqdm(total=len(subjects), desc="fit-recall", unit="subject", disable=not progress) as bar:
        with ThreadPoolExecutor(max_workers=int(n_jobs)) as pool:
            futures = {pool.submit(run, i): i for i in range(len(subjects))}
            for future in futures:
                results[futures[future]] = future.result()
                bar.update(1)

    values = np.repeat(template_vector[None, :], len(subjects), axis=0)
    for i, res in enumerate(results):
        values[i, free_index] = res["x"]
    lower = np.full(len(PARAMETER_NAMES), np.nan)
    upper = np.full(len(PARAMETER_NAMES), np.nan)
    lower[free_index] = [b[0] for b in search]
    upper[free_index] = [b[1] for b in search]
    is_free = np.zeros(len(PARAMETER_NAMES), dtype=np.int64)
    is_free[free_index] = 1

    def per_subject(key, dtype):
        return ("subject", np.array([res[key] for res in results], dtype=dtype))

    ds = xr.Dataset(
        {
            "value": (("subject", "parameter"), values),
            "logl": ("subject", np.array([-res["fun"] for res in results])),
            "n": per_subject("n", np.int64),
            "nfev": per_subject("nfev", np.int64),
            "nit": per_subject("nit", np.int64),
            "success": per_subject("success", np.int64),
            "n_nan": per_subject("n_nan", np.int64),
            "seconds": per_subject("seconds", np.float64),
            "message": per_subject("message", str),
            "free": ("parameter", is_free),
            "lower": ("parameter", lower),
            "upper": ("parameter", upper),
        },
        coords={"subject": np.asarray(subjects), "parameter": np.array(PARAMETER_NAMES)},
        attrs=provenance_attrs(
            "recall_fit", "cmr.fit_recall",
            free=free, fixed=fixed, bounds=dict(zip(free, search)), seed=int(seed),
            pool_size=pool_size, polish=bool(polish), de_options=dict(de_options or {}),
            source=_source_of(events),
        ),
    )
    ds.attrs["k"] = len(free)
    return ds


def _event_counts(recalls):
    """Events cymr scores per trial: distinct correct recalls plus the stop."""
    counts = np.empty(recalls.shape[0], dtype=np.int64)
    for t, row in enumerate(recalls):
        made = row[row > 0]
        counts[t] = np.unique(made).size + 1
    return counts


def _source_of(events):
    try:
        return json.loads(events.attrs.get("provenance", "{}")).get("source", "")
    except (TypeError, ValueError):
        return ""


def parameter_recovery(
    n_sets: int = 20,
    free: Sequence[str] = STANDARD_FREE,
    fixed: Mapping[str, float] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    *,
    list_length: int = 24,
    n_lists: int = 48,
    rng=0,
    n_jobs: int = 1,
    progress: bool = True,
    de_options: Mapping | None = None,
) -> xr.Dataset:
    """Simulate data from known parameters, fit them back, return true and recovered values.

    ``n_sets`` parameter sets are drawn uniformly inside ``ranges`` (default: the middle
    80% of each free parameter's search range); each set simulates one "subject" of
    ``n_lists`` lists of ``list_length`` items, which is then fitted with the same free
    parameters. Returns the ``recall_fit`` dataset with an added ``true_value`` (subject,
    parameter) and ``correlation`` (parameter; Pearson r of true vs recovered, NaN for
    fixed parameters).
    """
    free, fixed, template = _split_parameters(free, fixed)
    search = fit_bounds(free)
    seed = seed_of(rng)
    rng = np.random.default_rng(seed)
    ranges = dict(ranges or {})
    draws = []
    for name, (low, high) in zip(free, search):
        lo, hi = ranges.get(name, (low + 0.1 * (high - low), high - 0.1 * (high - low)))
        draws.append(rng.uniform(lo, hi, size=n_sets))
    truths = []
    matrices = []
    for s in range(n_sets):
        params = dict(template)
        params.update({name: float(draws[j][s]) for j, name in enumerate(free)})
        truths.append([params[name] for name in PARAMETER_NAMES])
        matrices.append(simulate_recalls(params, list_length, n_lists, rng=rng))
    events = from_recall_matrix(
        np.concatenate(matrices), list_length, subject=np.repeat(np.arange(n_sets), n_lists),
        source="cmr.parameter_recovery",
    )
    fits = fit_recall(events, free, fixed, rng=seed, n_jobs=n_jobs, progress=progress, de_options=de_options)
    fits["true_value"] = (("subject", "parameter"), np.array(truths))
    corr = np.full(len(PARAMETER_NAMES), np.nan)
    for name in free:
        j = PARAMETER_NAMES.index(name)
        corr[j] = _pearson(fits["true_value"].values[:, j], fits["value"].values[:, j])
    fits["correlation"] = ("parameter", corr)
    return fits


def _pearson(x, y) -> float:
    """Pearson correlation; NaN (no warning) when either side has no spread."""
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / denom) if denom > 0 else float("nan")
