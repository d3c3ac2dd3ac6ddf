"""Population-level (hierarchical) CMR fits: subjects drawn from a population, estimated jointly.

Every free parameter of a :class:`cmr.FitSpec` (any model :func:`cmr.fit_recall` fits:
localist, semantic, category, with fixed and tied parameters) is mapped to an unbounded
latent scale, ``z = logit((x - low) / (high - low))`` with ``(low, high)`` its search bounds.
Subjects' latent values are drawn from a normal population ``N(mean, diag(sd**2))`` (a
diagonal covariance: the parameters of the population are independent, those of a subject
are not). :func:`fit_population` estimates ``mean`` and ``sd`` by empirical Bayes with a
Laplace step (expectation-maximisation):

1. E-step: each subject's posterior mode under the current population prior (on the latent
   scale: L-BFGS from several starts in the first iteration, then Newton steps from the last
   mode with its curvature) and its Laplace approximation ``N(mode, inv(H))``, ``H`` the
   negative Hessian of the log posterior there;
2. M-step: ``mean = average of the modes``, ``sd**2 = average of (mode - mean)**2 plus the
   Laplace posterior variance``;

until neither ``mean`` nor ``sd`` moves by more than ``tol``. Subjects with few lists have flat
likelihoods, so their modes are pulled toward the population (shrinkage); subjects with many
lists keep their own estimates. A :class:`cmr.CMR2FitSpec` fits CMR2 the same way, each
subject's sessions scored by CMR2's kernel (:func:`cmr.cmr2.fit.session_objective`). See
docs/fitting-recall.md, "Population-level fits".
"""
from __future__ import annotations

import math
import time
import warnings
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ._hierarchical import (
    INITIAL_SD, NOT_CONVERGED_ADVICE, SD_FLOOR, expectation_maximisation, first_starts, individual_starts, to_latent,
    to_natural, unconverged_parameters,
)
from .checks import integer, seed_of, shown
from .checks import n_jobs as check_n_jobs
from .cmr2._sessions import session_labels
from .cmr2.fit import CMR2FitSpec, session_objective
from .cmr2.parameters import CMR2_PARAMETER_NAMES
from .deprecation import keyword_only
from .errors import FitWarning, ParameterError, RecallDataError
from .events import as_events, from_recall_matrix
from .textbook._trials import trial_arrays
from .textbook.fit import event_counts, fit_dataset, fit_recall
from .textbook.flags import flag_summary, listed, warn_fit
from .textbook.parameters import MODEL_PARAMETER_NAMES
from .textbook.spec import FitSpec

__all__ = ["fit_population", "population_recovery", "INITIAL_SD", "SD_FLOOR", "RECOVERY_POPULATION"]

#: true population medians of :func:`population_recovery` (natural scale; values typical of human
#: fits); a free parameter not named here has its median in the middle of its search bounds
RECOVERY_POPULATION = {"Lfc": 0.5, "Lcf": 0.5, "P1": 2.0, "P2": 1.5, "B_enc": 0.6, "B_start": 0.4, "B_rec": 0.75,
                       "T": 0.15, "X1": 0.02, "X2": 0.25}
#: true population sd of :func:`population_recovery` on the latent scale
RECOVERY_SD = 0.5


def _check_spec(spec, caller: str, cmr2: bool = False) -> FitSpec | CMR2FitSpec:
    if spec is None:
        return FitSpec()
    if isinstance(spec, FitSpec) or (cmr2 and isinstance(spec, CMR2FitSpec)):
        return spec
    wanted = "one cmr.FitSpec or cmr.CMR2FitSpec" if cmr2 else "one cmr.FitSpec"
    raise ParameterError(f"{caller} takes the model as {wanted}; got {type(spec).__name__}")


def _positive(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, (bool, np.bool_)) or not (math.isfinite(number) and number > 0):
        raise ParameterError(f"{what} must be a finite number > 0; got {shown(value)}")
    return number


def _interval_level(value) -> float:
    level = _positive(value, "interval")
    if not level < 1:
        raise ParameterError(f"interval must be a probability in (0, 1); got {shown(value)}")
    return level


def fit_population(
    events,
    spec: FitSpec | CMR2FitSpec | None = None,
    *,
    session: str | None = None,
    max_iter: int = 200,
    tol: float = 1e-3,
    n_starts: int = 4,
    interval: float = 0.95,
    rng=0,
    n_jobs: int = 1,
    executor=None,
    progress: bool = True,
    start=None,
) -> xr.Dataset:
    """Fit CMR (or CMR2) to all subjects at once: population mean and spread, and shrunk subject estimates.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Events dataset or psifr long table with at least two subjects.
    spec : FitSpec or CMR2FitSpec, optional
        The model (default ``FitSpec()``, the ten free parameters of Morton & Polyn 2016). A
        :class:`cmr.CMR2FitSpec` fits CMR2 over sessions of lists (as :func:`cmr.fit_cmr2`:
        prior-list intrusions scored, ``n`` counting recalls, intrusions and stops).
    session : str, optional
        CMR2 only: the variable that labels sessions, as in :func:`cmr.fit_cmr2` (default: the
        events' list keys, else one session per subject).
    max_iter : int
        Most EM iterations.
    tol : float
        Convergence: the largest change of a population mean or sd (latent scale) in one iteration.
    n_starts : int
        L-BFGS starts per subject in the first iteration (the middle of the bounds, then draws
        from the first prior); later iterations take Newton steps from the subject's last mode.
    interval : float
        Level of every interval (default 0.95).
    rng : int, numpy.random.Generator or None
        Root seed of the starting points (per subject, independent of ``n_jobs`` and ``executor``).
    n_jobs : int
        Subjects fitted at once in threads.
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Submit one task per subject and iteration there instead.
    progress : bool
        Show a progress bar over iterations.
    start : recall_fit dataset, optional
        Individual maximum-likelihood fits of the same subjects (:func:`cmr.fit_recall`'s, or
        :func:`cmr.fit_cmr2`'s for a CMR2 spec), ideally converged: each subject's first E-step
        also starts from its own estimate (on a bound: just inside it), beside the starts
        above. Subjects whose start did not converge are named in a FitWarning.

    Returns
    -------
    xarray.Dataset
        Kind ``recall_fit`` with ``value`` (subject, parameter) the shrunk estimates (posterior
        modes on the natural scale), so it serves as a parameter set everywhere
        (:func:`cmr.log_likelihood`, :func:`cmr.posterior_predictive`, ...), ``logl`` the
        log-likelihood there, ``n``, ``aic``, ``bic`` and the flags of :func:`cmr.fit_recall`,
        and in addition:

        * ``population_mean``, ``population_sd`` (parameter): the latent population, with
          ``*_lower``, ``*_upper`` intervals; ``population_median`` (parameter) its median on the
          natural scale (``to_natural(mean)``) with ``population_median_lower``/``_upper``;
        * ``value_lower``, ``value_upper`` (subject, parameter): each subject's Laplace
          posterior interval; ``posterior_sd`` (subject, parameter) on the latent scale;
        * ``em_mean``, ``em_sd`` (iteration, parameter), ``em_change`` and ``em_marginal_logl``
          (iteration; the Laplace approximation of the data's log marginal likelihood under the
          prior of that iteration): the convergence history; ``n_clipped`` (subject) negative
          likelihood curvatures set to 0; ``converged`` (subject) the iterations' verdict for
          every subject (one search per subject and iteration: no restarts to compare, so
          ``logl_gap`` is NaN); attrs ``converged`` (1/0), ``n_iter``, ``tol``,
          ``interval``, ``estimation = "hierarchical"``; a CMR2 fit also ``model = "cmr2"`` and
          ``session`` (as :func:`cmr.fit_cmr2`'s, so it is a parameter set of
          :func:`cmr.cmr2_log_likelihood` and the CMR2 simulators).

        Parameters that are not free have NaN population variables.

    Warns
    -----
    FitWarning
        When the iterations end without converging (naming the parameters whose population mean
        or sd still moved, and what to do), when a ``start`` fit did not converge, and (as
        :func:`cmr.fit_recall`) when
        estimates lie at a bound (``few_events`` is kept in the result but not warned about:
        few events per subject are what the population prior is for).
    """
    fit_spec = _check_spec(spec, "fit_population", cmr2=True)
    is_cmr2 = isinstance(fit_spec, CMR2FitSpec)
    if session is not None and not is_cmr2:
        raise ParameterError(f"fit_population: session labels the sessions of CMR2 and needs a cmr.CMR2FitSpec; "
                             f"got session {shown(session)} with a cmr.FitSpec (textbook CMR scores each list alone)")
    events = as_events(events)
    max_iter = integer(max_iter, "max_iter")
    n_starts = integer(n_starts, "n_starts")
    tol = _positive(tol, "tol")
    level = _interval_level(interval)
    n_jobs = check_n_jobs(n_jobs)
    model = fit_spec._model
    labels, subsets, counts, model_info = _subjects(events, fit_spec, session)
    seed = seed_of(rng)
    start_time = time.perf_counter()
    starts = first_starts(seed, labels, model.k, n_starts)
    if start is not None:
        own, unconverged = individual_starts(model, start, labels,
                                             CMR2_PARAMETER_NAMES if is_cmr2 else MODEL_PARAMETER_NAMES)
        starts = [np.vstack([z[None, :], first]) for z, first in zip(own, starts)]
        if unconverged:
            warnings.warn(f"fit_population: the start fits of {len(unconverged)} of {len(labels)} subjects did not "
                          f"converge (subject {listed(unconverged)}); refit them first (cmr.fit_recall(..., "
                          f"max_restarts=24, start=fits))", FitWarning, stacklevel=2)
    em = expectation_maximisation(model, labels, subsets, starts,
                                   max_iter=max_iter, tol=tol, n_jobs=n_jobs, executor=executor, progress=progress)
    info = dict(free=list(model.free), fixed=model.fixed, bounds=dict(zip(model.free, model.bounds)),
                tied={t.name: t.expression for t in model.tied}, seed=int(seed), **model_info, n_starts=n_starts,
                max_iter=max_iter, tol=tol, interval=level, by="subject", estimation="hierarchical",
                covariance="diagonal", transform="logit of (value - lower) / (upper - lower)", seconds=time.perf_counter() - start_time,
                start=start is not None)
    fits = _assemble(model, labels, counts, em, seed, level, info)
    fits.attrs.update(estimation="hierarchical", converged=int(em["converged"]), n_iter=len(em["history"]["change"]),
                      tol=tol, interval=level)
    if is_cmr2:
        fits.attrs.update(model="cmr2", session=session or "")
    bounds = np.array(model.bounds, dtype=np.float64).reshape(-1, 2)
    moving, kinds = unconverged_parameters(list(model.free), em["history"]["mean"], em["history"]["sd"], tol,
                                           bounds[:, 0], bounds[:, 1])
    advice = "; ".join(NOT_CONVERGED_ADVICE[kind] for kind in kinds or ["moving"])
    fits.attrs["not_converged_parameters"] = "; ".join(moving) if not em["converged"] else ""
    fits.attrs["not_converged_advice"] = advice if not em["converged"] else ""
    if not em["converged"]:
        warnings.warn(f"fit_population: the population estimates did not converge in {max_iter} iterations (last "
                      f"change {em['history']['change'][-1]:.3g}, tol {tol:g}; still moving: "
                      f"{'; '.join(moving) or 'none above tol'}); {advice}", FitWarning, stacklevel=2)
    # few scored events are what the population prior is for: only estimates at a bound are flagged
    warn_fit("fit_population", flag_summary(fits.assign(few_events=xr.zeros_like(fits["few_events"]))),
             "see the fit's at_bound and few_events")
    return fits


def _subjects(events, fit_spec, session) -> tuple:
    """Each subject's data, as its objective scores them: labels, data, scored events, the model's provenance."""
    is_cmr2 = isinstance(fit_spec, CMR2FitSpec)
    if is_cmr2:  # the session variable checked once, for every subject
        session_labels(events, session)
    else:
        arrays = trial_arrays(events, fit_spec.patterns, fit_spec.pool_size)
    index, labels = pd.factorize(np.asarray(events["subject"].values), sort=False)
    if len(labels) < 2:
        raise RecallDataError(f"fit_population needs at least 2 subjects to estimate a population; got {len(labels)}")
    units = [np.flatnonzero(index == i) for i in range(len(labels))]
    if is_cmr2:
        subsets = [session_objective(events.isel(trial=rows), fit_spec, session=session) for rows in units]
        counts = [int((subset.arrays.n_scored + 1).sum()) for subset in subsets]
        model_info = dict(model="cmr2", session=session or "")
    else:
        subsets = [arrays.subset(rows) for rows in units]
        counts = [int(event_counts(arrays.recalls[rows]).sum()) for rows in units]
        model_info = dict(pool_size=fit_spec.pool_size, patterns=fit_spec.patterns is not None)
    return labels, subsets, counts, model_info


def _assemble(model, labels, counts, em, seed, level, info) -> xr.Dataset:
    """The ``recall_fit`` dataset of the last E-step's modes, with the population, its intervals and the history."""
    from scipy import stats

    mean, sd, modes, z, variance, history = (em[key] for key in ("mean", "sd", "modes", "z", "variance", "history"))
    converged = em["converged"]
    low = np.array([b[0] for b in model.bounds])
    high = np.array([b[1] for b in model.bounds])
    # intervals of the population: per parameter, the normal-normal model of the Laplace posteriors
    quantile = float(stats.norm.ppf(0.5 + level / 2))
    weight = np.maximum(sd ** 2 - variance, 0.0) / sd ** 4  # 1 / (sd**2 + likelihood-only variance)
    with np.errstate(divide="ignore"):
        mean_se = 1.0 / np.sqrt(weight.sum(axis=0))
        log_sd_se = 1.0 / (2 * sd ** 2 * np.sqrt(0.5 * (weight ** 2).sum(axis=0)))
    results = [[dict(x=to_natural(mode["z"], low, high), logl=mode["logl"], nit=mode["nit"],
                     success=int(mode["success"] and converged), message=mode["message"], nfev=int(total[0]),
                     n_nan=int(total[1]), n_invalid=int(total[2]), seconds=float(total[3]), seed=int(seed))]
               for mode, total in zip(modes, em["totals"])]
    fits = fit_dataset(model, labels, results, counts, "cmr.fit_population", info)
    names = list(model.names)
    where = np.array([names.index(name) for name in model.free])

    def per_parameter(values):
        out = np.full(len(names), np.nan)
        out[where] = values
        return ("parameter", out)

    def per_subject(values):
        out = np.full((len(labels), len(names)), np.nan)
        out[:, where] = values
        return (("subject", "parameter"), out)

    posterior_sd = np.sqrt(variance)
    fits["population_mean"] = per_parameter(mean)
    fits["population_mean_lower"] = per_parameter(mean - quantile * mean_se)
    fits["population_mean_upper"] = per_parameter(mean + quantile * mean_se)
    fits["population_sd"] = per_parameter(sd)
    fits["population_sd_lower"] = per_parameter(sd * np.exp(-quantile * log_sd_se))
    fits["population_sd_upper"] = per_parameter(sd * np.exp(quantile * log_sd_se))
    fits["population_median"] = per_parameter(to_natural(mean, low, high))
    fits["population_median_lower"] = per_parameter(to_natural(mean - quantile * mean_se, low, high))
    fits["population_median_upper"] = per_parameter(to_natural(mean + quantile * mean_se, low, high))
    fits["value_lower"] = per_subject(to_natural(z - quantile * posterior_sd, low, high))
    fits["value_upper"] = per_subject(to_natural(z + quantile * posterior_sd, low, high))
    fits["posterior_sd"] = per_subject(posterior_sd)
    fits["n_clipped"] = ("subject", np.array([m["n_clipped"] for m in modes], dtype=np.int64))
    iteration = np.arange(1, len(history["change"]) + 1, dtype=np.int64)
    fits["em_mean"] = (("iteration", "parameter"), np.array([per_parameter(m)[1] for m in history["mean"]]))
    fits["em_sd"] = (("iteration", "parameter"), np.array([per_parameter(s)[1] for s in history["sd"]]))
    fits["em_change"] = ("iteration", np.array(history["change"]))
    fits["em_marginal_logl"] = ("iteration", np.array(history["marginal"]))
    fits = fits.assign_coords(iteration=iteration)
    # the verdict of a population fit is its iterations': one search per subject and iteration, no restarts
    fits["converged"] = xr.full_like(fits["converged"], bool(converged))
    return fits


def _true_population(model, population) -> tuple[np.ndarray, np.ndarray]:
    """Latent mean and sd of each free parameter from ``population`` (name -> (median, sd))."""
    population = dict(population or {})
    unknown = sorted(set(population) - set(model.free))
    if unknown:
        raise ParameterError(f"population names parameters that are not free: {', '.join(unknown)}; "
                             f"free: {', '.join(model.free)}")
    mean, sd = np.zeros(model.k), np.full(model.k, RECOVERY_SD)
    for j, (name, (low, high)) in enumerate(zip(model.free, model.bounds)):
        median = RECOVERY_POPULATION.get(name, 0.5 * (low + high))
        if name in population:
            entry = population[name]
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
                raise ParameterError(f"population[{name!r}] must be (median, sd); got {shown(entry)}")
            median, sd[j] = entry[0], _positive(entry[1], f"population[{name!r}] sd")
        if not low < float(median) < high:
            raise ParameterError(f"population median of {name} must lie inside its search bounds ({low:g}, {high:g}); "
                                 f"got {shown(median)}")
        mean[j] = to_latent(float(median), low, high)
    return mean, sd


@keyword_only
def population_recovery(
    n_subjects: int = 40,
    *,
    n_lists: Sequence[int] = (4, 8, 24),
    spec: FitSpec | None = None,
    population: Mapping[str, tuple[float, float]] | None = None,
    list_length: int = 24,
    rng=0,
    n_jobs: int = 1,
    executor=None,
    progress: bool = True,
    de_options: Mapping | None = None,
    max_iter: int = 200,
    tol: float = 1e-3,
) -> xr.Dataset:
    """Simulate a population, fit it independently and hierarchically, compare the subject estimates.

    ``n_subjects`` subjects draw latent values from ``N(mean, sd**2)`` (``population``: free
    parameter -> (natural median, latent sd); default :data:`RECOVERY_POPULATION` with sd
    :data:`RECOVERY_SD`), simulate ``max(n_lists)`` lists of ``list_length`` items of localist
    CMR each, and for every count in ``n_lists`` their first that many lists are fitted by
    :func:`cmr.fit_recall` (independent maximum likelihood) and by :func:`fit_population`.

    Returns
    -------
    xarray.Dataset
        Kind ``recall_fit``: ``value`` (estimator, n_lists, subject, parameter) with ``estimator`` =
        ``independent``, ``hierarchical``; ``true_value`` (subject, parameter); ``rmse``
        (estimator, n_lists, parameter): root mean square error of the subject estimates in units of
        the search range; ``rmse_mean`` (estimator, n_lists) its mean over the free parameters;
        ``correlation`` (estimator, n_lists, parameter); ``coverage`` (n_lists, parameter): share of
        subjects whose true value lies in the hierarchical interval; ``population_median`` with
        ``_lower``/``_upper`` and ``population_sd`` (n_lists, parameter); ``true_median``,
        ``true_sd`` (parameter); ``seconds`` (estimator, n_lists).
    """
    from .textbook.simulate import simulate_recalls

    fit_spec = _check_spec(spec, "population_recovery")
    if fit_spec.patterns is not None:
        raise ParameterError("population_recovery simulates localist CMR; got a FitSpec with patterns")
    model = fit_spec._model
    n_subjects = integer(n_subjects, "n_subjects", minimum=2)
    counts = [integer(n, "n_lists") for n in (list(n_lists) if isinstance(n_lists, (list, tuple)) else [n_lists])]
    if not counts:
        raise ParameterError("n_lists must name at least one list count; got none")
    list_length = integer(list_length, "list_length", minimum=2)
    seed = seed_of(rng)
    generator = np.random.default_rng(seed)
    mean, sd = _true_population(model, population)
    low = np.array([b[0] for b in model.bounds])
    high = np.array([b[1] for b in model.bounds])
    true_z = generator.normal(mean, sd, size=(n_subjects, model.k))
    truths = [model.as_dict(to_natural(true_z[s], low, high)) for s in range(n_subjects)]
    longest = max(counts)
    matrices = [simulate_recalls(truth, list_length, longest, rng=generator, pool_size=fit_spec.pool_size)
                for truth in truths]
    names = list(model.names)
    where = np.array([names.index(name) for name in model.free])
    true_value = np.array([[t[n] for n in names] for t in truths])
    methods = ("independent", "hierarchical")
    shape = (len(methods), len(counts))
    value = np.full(shape + (n_subjects, len(names)), np.nan)
    logl = np.full(shape + (n_subjects,), np.nan)
    n_events = np.zeros(shape + (n_subjects,), dtype=np.int64)
    seconds = np.zeros(shape)
    pop = {key: np.full((len(counts), len(names)), np.nan) for key in ("median", "lower", "upper", "sd")}
    coverage = np.full((len(counts), len(names)), np.nan)
    for c, count in enumerate(counts):
        recalls = np.concatenate([m[:count] for m in matrices])
        data = from_recall_matrix(recalls, list_length, subject=np.repeat(np.arange(n_subjects), count),
                                  source="cmr.population_recovery")
        for m, method in enumerate(methods):
            start = time.perf_counter()
            with warnings.catch_warnings():  # few-list subjects are the point of the study
                warnings.simplefilter("ignore", FitWarning)
                if method == "independent":
                    fits = fit_recall(data, fit_spec, rng=seed, n_jobs=n_jobs, executor=executor, progress=progress,
                                      de_options=de_options)
                else:
                    fits = fit_population(data, fit_spec, rng=seed, n_jobs=n_jobs, executor=executor,
                                          progress=progress, max_iter=max_iter, tol=tol)
            seconds[m, c] = time.perf_counter() - start
            value[m, c] = fits["value"].transpose("subject", "parameter").values
            logl[m, c] = fits["logl"].values
            n_events[m, c] = fits["n"].values
        inside = (true_value >= fits["value_lower"].values) & (true_value <= fits["value_upper"].values)
        coverage[c, where] = inside[:, where].mean(axis=0)
        for key in ("median", "lower", "upper"):
            pop[key][c] = fits[f"population_median{'' if key == 'median' else '_' + key}"].values
        pop["sd"][c] = fits["population_sd"].values
    width = np.full(len(names), np.nan)
    width[where] = high - low
    error = (value - true_value) / width
    rmse = np.sqrt(np.mean(error ** 2, axis=2))
    correlation = np.full(shape + (len(names),), np.nan)
    for m in range(len(methods)):
        for c in range(len(counts)):
            for j in where:
                correlation[m, c, j] = _pearson(true_value[:, j], value[m, c, :, j])
    true_median = np.full(len(names), np.nan)
    true_median[where] = to_natural(mean, low, high)
    true_sd = np.full(len(names), np.nan)
    true_sd[where] = sd
    ds = xr.Dataset(
        {
            "value": (("estimator", "n_lists", "subject", "parameter"), value),
            "logl": (("estimator", "n_lists", "subject"), logl),
            "n": (("estimator", "n_lists", "subject"), n_events),
            "free": ("parameter", np.isin(names, model.free).astype(np.int64)),
            "true_value": (("subject", "parameter"), true_value),
            "rmse": (("estimator", "n_lists", "parameter"), rmse),
            "rmse_mean": (("estimator", "n_lists"), rmse[..., where].mean(axis=-1)),
            "correlation": (("estimator", "n_lists", "parameter"), correlation),
            "coverage": (("n_lists", "parameter"), coverage),
            "population_median": (("n_lists", "parameter"), pop["median"]),
            "population_median_lower": (("n_lists", "parameter"), pop["lower"]),
            "population_median_upper": (("n_lists", "parameter"), pop["upper"]),
            "population_sd": (("n_lists", "parameter"), pop["sd"]),
            "true_median": ("parameter", true_median),
            "true_sd": ("parameter", true_sd),
            "seconds": (("estimator", "n_lists"), seconds),
        },
        coords={"estimator": list(methods), "n_lists": np.array(counts, dtype=np.int64),
                "subject": np.arange(n_subjects, dtype=np.int64), "parameter": names},
    )
    from .schema import provenance_attrs

    ds.attrs = provenance_attrs("recall_fit", "cmr.population_recovery", free=list(model.free), seed=int(seed),
                                n_subjects=n_subjects, n_lists=counts, list_length=list_length,
                                de_options=dict(de_options or {}), max_iter=max_iter, tol=tol)
    return ds


def _pearson(x, y) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / denom) if denom > 0 else float("nan")
