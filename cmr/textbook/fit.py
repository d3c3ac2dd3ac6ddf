"""Maximum-likelihood fits of CMR to recall sequences: per subject or pooled, with restarts.

Each fitting unit (a subject, or all subjects pooled) is fitted by scipy's differential
evolution (seeded; each generation's whole population scored in one call, split over threads)
followed by an L-BFGS-B polish of the best member. Parameters are free (searched within
bounds), fixed, or tied to others by an expression (:mod:`cmr.textbook.tied`). Several
restarts per unit are all kept. Units run in threads, or as one task each on an executor such
as a ``dask.distributed.Client``; results do not depend on where they ran. The result is a
``recall_fit`` dataset (see docs/schema.md).
"""
from __future__ import annotations

import hashlib
import json
from typing import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import integer, is_integer, seed_of
from ..checks import n_jobs as check_n_jobs
from ..deprecation import renamed_keywords, warn
from ..constants import AT_BOUND_TOLERANCE, CONVERGENCE_TOLERANCE, MIN_EVENTS_PER_PARAMETER
from ..criteria import aic_bic
from ..errors import ParameterError, RecallDataError
from ..events import as_events, from_recall_matrix
from ..schema import provenance_attrs, require_variables
from ._optimize import MAX_RESTARTS, MIN_RESTARTS, ModelSpec, fit_unit, run_tasks
from ._trials import TrialArrays, trial_arrays
from .flags import convergence_summary, convergence_variables, flag_summary, listed, warn_fit
from .parameters import MODEL_PARAMETER_NAMES
from .spec import STANDARD_FREE, FitSpec, resolve_spec

__all__ = ["fit_recall", "parameter_recovery", "STANDARD_FREE", "unit_seeds", "label_words", "restart_plan",
           "convergence_summary", "information_criteria_recall", "flag_summary"]


def label_words(label) -> list[int]:
    """Four 32-bit words of the SHA-256 digest of ``str(label)``: the same in every process and release."""
    digest = hashlib.sha256(str(label).encode("utf-8")).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


@renamed_keywords(seed="rng")
def unit_seeds(rng, labels, n_restarts: int) -> list[list[int]]:
    """Independent seeds per unit and restart, from the root seed ``rng`` and each unit's label.

    ``rng``: an int is the root seed; a Generator draws one (``int(rng.integers(2**63))``); None
    draws one from fresh entropy. Unit ``label``'s restart r uses the state of the r-th child of
    ``SeedSequence([seed, *label_words(label)])`` (a SHA-256 hash of ``str(label)``), so a
    unit's searches depend only on the seed and its own label: not on the other units of the
    call, their order, ``n_jobs``, the executor or (for the first r restarts) ``n_restarts``.
    ``labels`` may be a count n, meaning the labels ``0..n-1``.
    """
    seed = seed_of(rng)
    if is_integer(labels):
        labels = range(int(labels))
    out = []
    for label in labels:
        root = np.random.SeedSequence([int(seed), *label_words(label)])
        out.append([int(child.generate_state(1)[0]) for child in root.spawn(n_restarts)])
    return out


def restart_plan(n_restarts, max_restarts) -> tuple[int, int | None]:
    """Seeds to draw per unit and the adaptive minimum (None: run them all) of ``n_restarts``.

    ``"auto"``: restarts until the best two agree within ``CONVERGENCE_TOLERANCE`` log units,
    at least ``MIN_RESTARTS``, at most ``max_restarts``. An integer: exactly that many.
    """
    if isinstance(n_restarts, str):
        if n_restarts != "auto":
            raise ParameterError(f"n_restarts must be 'auto' or an integer >= 1; got {n_restarts!r}")
        return integer(max_restarts, "max_restarts", minimum=MIN_RESTARTS), MIN_RESTARTS
    return integer(n_restarts, "n_restarts"), None


def event_counts(recalls: np.ndarray) -> np.ndarray:
    """Events cymr scores per trial: distinct correct recalls plus the stop."""
    counts = np.empty(recalls.shape[0], dtype=np.int64)
    for t, row in enumerate(recalls):
        counts[t] = np.unique(row[row > 0]).size + 1
    return counts


def information_criteria_recall(logl, k: int, n):
    """Deprecated: :func:`cmr.aic_bic` (same arguments)."""
    warn("cmr.textbook.fit.information_criteria_recall is deprecated and will be removed in the next release; "
         "use cmr.aic_bic (same arguments)")
    return aic_bic(logl, k, n)


def _source_of(events):
    try:
        return json.loads(events.attrs.get("provenance", "{}")).get("source", "")
    except (TypeError, ValueError, AttributeError, RecursionError):
        return ""


def fit_recall(
    events,
    spec: FitSpec | None = None,
    *deprecated_positional,
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
    start_library: bool | None = None,
    **deprecated_model,
) -> xr.Dataset:
    """Fit CMR to recall sequences by maximum likelihood, per subject or pooled.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        Events dataset or psifr long table.
    spec : FitSpec, optional
        The model: free, fixed and tied parameters, search bounds, item patterns, pool size
        (:class:`cmr.FitSpec`; default ``FitSpec()``, the ten free parameters of Morton &
        Polyn 2016). Deprecated until the next release: the separate model arguments
        (``free, fixed, bounds`` by position; ``free=, fixed=, bounds=, tied=, patterns=,
        pool_size=``) still build the spec, with a DeprecationWarning.
    by : {"subject", None}
        One fit per subject, or one pooled (group) fit of all trials together.
    n_restarts : "auto" or int
        Independent searches per unit; all are kept (``restart_*`` variables), the best one
        gives ``value`` and ``logl``. ``"auto"`` (default): searches until the best two agree
        within ``CONVERGENCE_TOLERANCE`` (0.1) log units, at least 2 and at most
        ``max_restarts``; the unit is then ``converged``. An integer: exactly that many (one
        search leaves convergence unchecked: ``converged`` is False, ``logl_gap`` NaN).
    rng : int, numpy.random.Generator or None
        Root seed, combined with each unit's label (:func:`unit_seeds`): a subject's fit does
        not depend on the other subjects fitted with it, ``n_jobs`` or ``executor``.
    n_jobs : int
        Threads on this machine: units fitted at once, and the remaining threads split each
        unit's population (one subject with ``n_jobs=2`` scores half a generation per thread).
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Submit one task per unit there instead of local threads (``executor.submit``).
    polish : bool
        Run L-BFGS-B from the best differential-evolution member.
    progress : bool
        Show a tqdm progress bar over units.
    de_options : mapping, optional
        Extra keyword arguments of scipy.optimize.differential_evolution
        (defaults: popsize=15, tol=0.01, maxiter=1000, init="sobol").
    max_restarts : int
        Most searches per unit with ``n_restarts="auto"`` (>= 2).
    start : recall_fit dataset or mapping, optional
        Estimates to search from first (one more restart per unit, ``restart_seed`` -1): a
        polish from each subject's ``value`` (a mapping: one parameter set for every unit), so
        the fit is never below the likelihood there. E.g. a nested model's fit (textbook CMR
        inside semantic CMR: ``Scf = Sff = 0``; parameters the start lacks take their fixed
        or default values) or :func:`cmr.fit_population`'s shrunk estimates.
    start_library : bool, optional
        Polish also from each point of the start library (:data:`cmr.textbook.starts.START_LIBRARY`,
        ten points where fits of human data ended; ``restart_seed`` -2), beside the searches: it finds the
        maximum where differential evolution settles on a second maximum with a large basin.
        The polishes are compared with the searches for ``converged`` but do not count towards
        the minimum of two searches. None (default): with ``n_restarts="auto"`` and ``polish``
        only, so an integer ``n_restarts`` runs exactly that many searches and nothing else, and
        ``polish=False`` runs differential evolution alone.

    Returns
    -------
    xarray.Dataset
        Kind ``recall_fit`` (docs/schema.md): ``value`` (subject, parameter), ``logl``, ``n``,
        ``aic``, ``bic``, ``nfev``, ``nit``, ``success``, ``n_nan``, ``n_invalid``, ``seconds``,
        ``message``, ``best_restart`` per subject; ``restart_value`` (subject, restart,
        parameter) and ``restart_logl``, ``restart_nfev``, ``restart_success`` (subject,
        restart); ``free``, ``lower``, ``upper``, ``tied`` per parameter; ``at_bound``
        (subject, parameter) and ``few_events`` (subject), the flags below; ``n_restarts``,
        ``logl_gap`` (best minus second-best restart), ``logl_spread`` (best minus worst) and
        ``converged`` (``logl_gap`` within ``convergence_tolerance``) per subject. With
        ``by=None`` there is no ``subject`` dim.

    Warns
    -----
    FitWarning
        Once, when an estimate lies within ``AT_BOUND_TOLERANCE`` of its search range of a
        bound, a unit has fewer than ``MIN_EVENTS_PER_PARAMETER`` scored events per free
        parameter, or a unit's best two restarts differ by more than
        ``CONVERGENCE_TOLERANCE`` (:func:`flag_summary` gives the line; cmr/constants.py the
        reasons).
    """
    fit_spec, _, message = resolve_spec("fit_recall", spec, deprecated_positional, deprecated_model)
    if message:
        warn(message, skip=1)
    events = as_events(events)
    spec, patterns, pool_size = fit_spec._model, fit_spec.patterns, fit_spec.pool_size
    if by not in ("subject", None):
        raise RecallDataError(f"by must be 'subject' (one fit per subject) or None (pooled); got {by!r}")
    count, min_restarts = restart_plan(n_restarts, max_restarts)
    library = uses_library(start_library, min_restarts, polish)
    n_jobs = check_n_jobs(n_jobs)
    arrays = trial_arrays(events, patterns, pool_size)
    if by is None:
        units, labels = [np.arange(arrays.n_trials)], None
    else:
        index, labels = pd.factorize(np.asarray(events["subject"].values), sort=False)
        units = [np.flatnonzero(index == i) for i in range(len(labels))]
    seed = seed_of(rng)
    keys = ["pooled"] if labels is None else list(labels)
    results = fit_units(spec, arrays, units, unit_seeds(seed, keys, count), n_jobs=n_jobs,
                        executor=executor, polish=polish, progress=progress, de_options=de_options,
                        min_restarts=min_restarts, starts=start_points(spec, start, labels), library=library)
    counts = [int(event_counts(arrays.recalls[rows]).sum()) for rows in units]
    info = dict(free=list(spec.free), fixed=spec.fixed, bounds=dict(zip(spec.free, spec.bounds)),
                tied={t.name: t.expression for t in spec.tied}, seed=int(seed), pool_size=pool_size,
                patterns=_patterns_info(patterns), polish=bool(polish), de_options=dict(de_options or {}),
                n_restarts=n_restarts if isinstance(n_restarts, str) else count, max_restarts=count,
                by=by, source=_source_of(events), start=start is not None, start_library=library)
    fits = fit_dataset(spec, labels, results, counts, "cmr.fit_recall", info)
    warn_fit("fit_recall", flag_summary(fits), FLAG_VARIABLES)
    return fits


#: where a flag line sends the reader
FLAG_VARIABLES = "see the fit's at_bound, few_events and converged"


def uses_library(start_library, min_restarts, polish: bool = True) -> bool:
    """Whether the fit polishes from the start library: ``start_library``, or (None) with ``"auto"``
    restarts and the polish on."""
    if start_library is None:
        return min_restarts is not None and bool(polish)
    if not isinstance(start_library, (bool, np.bool_)):
        raise ParameterError(f"start_library must be True, False or None (with n_restarts='auto'); "
                             f"got {start_library!r}")
    return bool(start_library)


def fit_units(spec: ModelSpec, arrays: TrialArrays, units, seeds, *, n_jobs=1, executor=None, polish=True,
              progress=False, de_options=None, desc="fit-recall", min_restarts=None, starts=None,
              library=False) -> list[list[dict]]:
    """Fit each unit (rows of ``arrays``) from its seeds (and its start, if any); per unit, every restart's result."""
    workers = max(1, min(n_jobs, len(units)))
    threads = 1 if executor is not None else max(1, n_jobs // workers)
    starts = starts or [None] * len(units)
    tasks = [(fit_unit, (spec, arrays.subset(rows), unit_seed, de_options, polish, threads, min_restarts, first,
                         library))
             for rows, unit_seed, first in zip(units, seeds, starts)]
    from . import _lanes

    one = arrays.subset(units[0][:1])  # compile (or load) the kernel once, outside the threads
    _lanes.population_totals(spec.template[None, :], one, one.order(np.zeros(1, np.int64)))
    return run_tasks(tasks, n_jobs=workers, executor=executor, progress=progress, desc=desc)


def start_points(spec: ModelSpec, start, labels, all_names=MODEL_PARAMETER_NAMES) -> list | None:
    """Free values to search from first, per unit (``labels`` None: the pooled unit), from ``start``.

    ``start`` is a recall_fit dataset (``value`` per subject, or one set) or a mapping of
    parameter values. Parameters it lacks take the spec's fixed or default values
    (``spec.template``, over ``all_names``); values are clipped into the search bounds.
    """
    if start is None:
        return None
    keys = ["pooled"] if labels is None else [str(label) for label in labels]
    if isinstance(start, xr.Dataset):
        require_variables(start, ["value"], "recall_fit")
        value = start["value"]
        names = [str(name) for name in value["parameter"].values]
        if "subject" in value.dims:
            given = {str(label): row for label, row in zip(value["subject"].values,
                                                            value.transpose("subject", "parameter").values)}
            missing = [key for key in keys if key not in given]
            if labels is None or missing:
                what = "the pooled fit" if labels is None else f"subject(s) {listed(missing)}"
                raise ParameterError(f"start has no estimates for {what}; give a fit of the same subjects, "
                                     f"or one parameter set")
            sets = [dict(zip(names, map(float, given[key]))) for key in keys]
        else:
            sets = [dict(zip(names, map(float, value.values)))] * len(keys)
    elif isinstance(start, Mapping):
        sets = [{str(name): float(v) for name, v in start.items()}] * len(keys)
    else:
        raise ParameterError(f"start must be a recall_fit dataset or a mapping of parameter values; "
                             f"got {type(start).__name__}")
    low = np.array([b[0] for b in spec.bounds])
    high = np.array([b[1] for b in spec.bounds])
    template = dict(zip(all_names, spec.template))
    points = []
    for values in sets:
        x = np.array([values.get(name, template[name]) for name in spec.free], dtype=np.float64)
        if not np.isfinite(x).all():
            bad = [name for name, v in zip(spec.free, x) if not np.isfinite(v)]
            raise ParameterError(f"start must give finite values; got NaN or inf for {', '.join(bad)}")
        points.append(np.clip(x, low, high))
    return points


def _patterns_info(patterns):
    if patterns is None:
        return ""
    return dict(pool=patterns.size, similarity=patterns.similarity is not None,
                features=list(patterns.feature_names), feature_layer=patterns.feature_layer)


#: ``restart_seed`` of the padding of a unit with fewer restarts than the ``restart`` dim (-1 is a
#: polish from a given start, -2 a polish from the start library, >= 0 a search's seed)
NO_RESTART = -3


def fit_dataset(spec: ModelSpec, labels, results, counts, created_by: str, info: dict) -> xr.Dataset:
    """The ``recall_fit`` dataset of fitted units (``labels`` None: one pooled unit)."""
    names = list(spec.names)
    n_units, n_restarts = len(results), max(len(unit) for unit in results)
    # adaptive restarts: ragged, NaN-padded
    restart_value = np.full((n_units, n_restarts, len(names)), np.nan)
    restart_logl = np.full((n_units, n_restarts), np.nan)
    restart_int = {key: np.full((n_units, n_restarts), fill, dtype=np.int64)
                   for key, fill in (("nfev", 0), ("success", 0), ("seed", NO_RESTART))}
    for i, unit in enumerate(results):
        for r, res in enumerate(unit):
            as_dict = spec.as_dict(res["x"])
            restart_value[i, r] = [as_dict[n] for n in names]
            restart_logl[i, r] = res["logl"]
            for key, values in restart_int.items():
                values[i, r] = res[key]
    best = np.array([int(np.nanargmax(np.where(np.isnan(row), -np.inf, row))) for row in restart_logl])
    chosen = [unit[b] for unit, b in zip(results, best)]

    def pick(key, dtype):
        return np.array([res[key] for res in chosen], dtype=dtype)

    logl = pick("logl", np.float64)
    n = np.array(counts, dtype=np.int64)
    aic, bic = aic_bic(logl, spec.k, n)  # n: scored events, cymr's data points
    unit = ("subject",) if labels is not None else ()
    squeeze = (lambda a: a) if labels is not None else (lambda a: a[0])
    free_flag = np.array([int(name in spec.free) for name in names], dtype=np.int64)
    lower = np.array([dict(zip(spec.free, spec.bounds)).get(name, (np.nan, np.nan))[0] for name in names])
    upper = np.array([dict(zip(spec.free, spec.bounds)).get(name, (np.nan, np.nan))[1] for name in names])
    tied = np.array([{t.name: t.expression for t in spec.tied}.get(name, "") for name in names], dtype=object)
    data = {
        "value": (unit + ("parameter",), squeeze(restart_value[np.arange(n_units), best])),
        "logl": (unit, squeeze(logl)),
        "n": (unit, squeeze(n)),
        "aic": (unit, squeeze(aic)),
        "bic": (unit, squeeze(bic)),
        "nfev": (unit, squeeze(np.array([sum(r["nfev"] for r in u) for u in results], dtype=np.int64))),
        "nit": (unit, squeeze(pick("nit", np.int64))),
        "success": (unit, squeeze(pick("success", np.int64))),
        "n_nan": (unit, squeeze(np.array([sum(r["n_nan"] for r in u) for u in results], dtype=np.int64))),
        "n_invalid": (unit, squeeze(np.array([sum(r["n_invalid"] for r in u) for u in results], dtype=np.int64))),
        "seconds": (unit, squeeze(np.array([sum(r["seconds"] for r in u) for u in results]))),
        "message": (unit, squeeze(pick("message", str))),
        "best_restart": (unit, squeeze(best.astype(np.int64))),
        "restart_value": (unit + ("restart", "parameter"), squeeze(restart_value)),
        "restart_logl": (unit + ("restart",), squeeze(restart_logl)),
        "restart_nfev": (unit + ("restart",), squeeze(restart_int["nfev"])),
        "restart_success": (unit + ("restart",), squeeze(restart_int["success"])),
        "restart_seed": (unit + ("restart",), squeeze(restart_int["seed"])),
        "free": ("parameter", free_flag),
        "lower": ("parameter", lower),
        "upper": ("parameter", upper),
        "tied": ("parameter", tied),
    }
    coords = {"parameter": np.array(names), "restart": np.arange(n_restarts, dtype=np.int64)}
    if labels is not None:
        coords["subject"] = np.asarray(labels)
    # the flags come last, so every earlier variable and table column keeps its place
    value = restart_value[np.arange(n_units), best]
    margin = AT_BOUND_TOLERANCE * (upper - lower)  # NaN for parameters that are not free: never at a bound
    data["at_bound"] = (unit + ("parameter",), squeeze((value - lower <= margin) | (upper - value <= margin)))
    data["few_events"] = (unit, squeeze(n < MIN_EVENTS_PER_PARAMETER * spec.k))
    verdict = convergence_variables([[res["logl"] for res in u] for u in results], tolerance=CONVERGENCE_TOLERANCE)
    for name in ("n_restarts", "logl_gap", "logl_spread", "converged"):
        data[name] = (unit, squeeze(verdict[name]))
    ds = xr.Dataset(data, coords=coords, attrs=provenance_attrs("recall_fit", created_by, **info))
    ds.attrs["k"] = spec.k
    ds.attrs["unit_kind"] = "subject" if labels is not None else "pooled"
    ds.attrs["at_bound_tolerance"] = AT_BOUND_TOLERANCE
    ds.attrs["min_events_per_parameter"] = MIN_EVENTS_PER_PARAMETER
    ds.attrs["convergence_tolerance"] = CONVERGENCE_TOLERANCE
    return ds


def parameter_recovery(
    n_sets: int = 20,
    spec: FitSpec | None = None,
    *deprecated_positional,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    list_length: int = 24,
    n_lists: int = 48,
    events=None,
    rng=0,
    n_jobs: int = 1,
    executor=None,
    progress: bool = True,
    de_options: Mapping | None = None,
    **deprecated_model,
) -> xr.Dataset:
    """Simulate data from known parameters, fit them back, return true and recovered values.

    ``n_sets`` parameter sets of the model ``spec`` (:class:`cmr.FitSpec`; default
    ``FitSpec()``) are drawn uniformly inside ``ranges`` (default: the middle 80% of each
    free parameter's search range); each set simulates one "subject", which is then fitted
    with the same spec. Without ``events``, a subject studies ``n_lists`` lists of
    ``list_length`` items; with ``events`` (needed for the spec's ``patterns``: semantic CMR
    needs real items), simulated subject i replays the study lists of the data's subject
    ``i mod S``. Returns the ``recall_fit`` dataset with an added ``true_value`` (subject,
    parameter) and ``correlation`` (parameter; Pearson r of true vs recovered, NaN for
    parameters that are not free). Deprecated until the next release: the separate model
    arguments (``free, fixed`` and ``ranges`` by position; ``free=, fixed=, tied=,
    patterns=``) still work, with a DeprecationWarning.
    """
    from .simulate import simulate_experiment, simulate_recalls

    fit_spec, others, message = resolve_spec("parameter_recovery", spec, deprecated_positional, deprecated_model,
                                             positional_names=("fixed", "ranges"),
                                             accepted=("free", "fixed", "tied", "patterns"))
    if message:
        warn(message, skip=1)
    if "ranges" in others:
        if ranges is not None:
            raise TypeError("parameter_recovery() got multiple values for argument 'ranges'")
        ranges = others["ranges"]
    spec, patterns, pool_size = fit_spec._model, fit_spec.patterns, fit_spec.pool_size
    n_sets = integer(n_sets, "n_sets")
    seed = seed_of(rng)
    generator = np.random.default_rng(seed)
    ranges = dict(ranges or {})
    search = spec.bounds
    draws = np.empty((n_sets, spec.k))
    for j, (name, (low, high)) in enumerate(zip(spec.free, search)):
        lo, hi = ranges.get(name, (low + 0.1 * (high - low), high - 0.1 * (high - low)))
        draws[:, j] = generator.uniform(lo, hi, size=n_sets)
    truths = [spec.as_dict(draws[s]) for s in range(n_sets)]
    if events is None:
        if patterns is not None:
            raise ParameterError("parameter_recovery with patterns needs events whose study lists it can replay")
        matrices = [simulate_recalls(truth, list_length, n_lists, rng=generator, pool_size=pool_size)
                    for truth in truths]
        data = from_recall_matrix(np.concatenate(matrices), list_length, subject=np.repeat(np.arange(n_sets), n_lists),
                                  source="cmr.parameter_recovery")
    else:
        events = as_events(events)
        subjects = pd.unique(np.asarray(events["subject"].values))
        tables = []
        for s in range(n_sets):
            source = events.isel(trial=np.flatnonzero(events["subject"].values == subjects[s % subjects.size]))
            table = simulate_experiment(source, truths[s], n_rep=1, rng=generator, patterns=patterns,
                                        pool_size=pool_size)
            table["subject"] = s
            tables.append(table)
        from ..events import from_table

        data = from_table(pd.concat(tables, ignore_index=True), source="cmr.parameter_recovery")
    fits = fit_recall(data, fit_spec, rng=seed, n_jobs=n_jobs, executor=executor, progress=progress,
                      de_options=de_options)
    names = list(spec.names)
    fits["true_value"] = (("subject", "parameter"), np.array([[t[n] for n in names] for t in truths]))
    corr = np.full(len(names), np.nan)
    for name in spec.free:
        j = names.index(name)
        corr[j] = _pearson(fits["true_value"].values[:, j], fits["value"].values[:, j])
    fits["correlation"] = ("parameter", corr)
    return fits


def _pearson(x, y) -> float:
    """Pearson correlation; NaN (no warning) when either side has no spread."""
    dx, dy = x - x.mean(), y - y.mean()
    denom = np.sqrt(np.sum(dx * dx) * np.sum(dy * dy))
    return float(np.sum(dx * dy) / denom) if denom > 0 else float("nan")

