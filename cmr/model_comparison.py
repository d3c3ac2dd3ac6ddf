"""Named CMR variants fitted to the same recall data and compared (``icl-cmr compare``).

Every textbook variant frees the ten parameters of Morton & Polyn (2016), with the context
drift of the feature-to-context and context-to-feature associations tied to their learning
rates (``Dfc = 1 - Lfc``, ``Dcf = 1 - Lcf``, cymr's dependent parameters):

* ``textbook``: localist CMR (Polyn, Norman & Kahana 2009 without semantics);
* ``semantic``: the same plus ``Scf`` (semantic context-to-item weight, Polyn et al. 2009)
  and ``Sff`` (direct cue of the last recall, Morton & Polyn 2016) over item similarities;
  at ``Scf = Sff = 0`` it is textbook CMR exactly, so it nests it;
* ``category``: the same plus ``Cfc`` and ``Ccf`` over category units; nests textbook CMR;
* ``cmr2``: CMR2 (Lohnas, Polyn & Kahana 2015) with the same ten parameters plus
  ``B_distract`` and ``C_thresh``: sessions of lists without a reset.

:func:`fit_models` fits each (and cross-validates the textbook variants), :func:`compare_recall_models`
fits and compares them in one call (:func:`cmr.compare_models`).
"""
from __future__ import annotations

import warnings
from typing import Mapping, Sequence

import xarray as xr

from .checks import integer
from .cmr2 import CMR2FitSpec, default_cmr2_parameters, fit_cmr2
from .cmr2 import log_likelihood as cmr2_log_likelihood
from .deprecation import keyword_only
from .errors import FitWarning, ParameterError, RecallDataError
from .textbook import FitSpec, ItemPatterns, cross_validate, default_parameters, fit_recall, log_likelihood
from .textbook.compare import PAIRED_TESTS, compare_models
from .textbook.fit import STANDARD_FREE

__all__ = ["COMPARISON_MODELS", "NESTED_MODELS", "PAIRED_TESTS", "comparison_spec", "fit_models",
           "compare_recall_models"]

#: the named variants: name -> (extra free parameters, item patterns it needs: None, "semantic", "category")
COMPARISON_MODELS = {
    "textbook": ((), None),
    "semantic": (("Scf", "Sff"), "semantic"),
    "category": (("Cfc", "Ccf"), "category"),
    "cmr2": (("B_distract", "C_thresh"), None),
}

#: nesting model -> the model it reduces to when its extra weights are 0
NESTED_MODELS = {"semantic": "textbook", "category": "textbook"}

#: what every variant shares: Morton & Polyn (2016)'s free parameters, drift tied to learning rate
_BASE_TIED = {"Dfc": "1 - Lfc", "Dcf": "1 - Lcf"}
_BASE_BOUNDS = {"Lfc": (0.0, 0.999), "Lcf": (0.0, 0.999)}


def _known(name) -> str:
    if name not in COMPARISON_MODELS:
        raise ParameterError(f"unknown model {name!r}; known models: {', '.join(COMPARISON_MODELS)}")
    return name


def comparison_spec(name: str, patterns: ItemPatterns | None = None) -> FitSpec | CMR2FitSpec:
    """The fit spec of a named variant (:data:`COMPARISON_MODELS`).

    Parameters
    ----------
    name : {"textbook", "semantic", "category", "cmr2"}
    patterns : ItemPatterns, optional
        The item pool of ``semantic`` (with similarities) or ``category`` (with features);
        refused for the others.

    Raises
    ------
    ParameterError
        An unknown name, patterns missing for ``semantic``/``category`` or given to another model.
    """
    extra, needs = COMPARISON_MODELS[_known(name)]
    if needs is None and patterns is not None:
        raise ParameterError(f"model {name!r} is localist; it takes no item patterns")
    if needs is not None:
        pattern = None if patterns is None else patterns.similarity if needs == "semantic" else patterns.features
        present = pattern is not None
        if not present:
            what = "item similarities" if needs == "semantic" else "category features"
            raise ParameterError(f"model {name!r} needs item patterns with {what}; got "
                                 f"{'none' if patterns is None else 'patterns without them'}")
    free = [*STANDARD_FREE, *extra]
    if name == "cmr2":
        return CMR2FitSpec(free, tied=_BASE_TIED, bounds=_BASE_BOUNDS)
    return FitSpec(free, tied=_BASE_TIED, bounds=_BASE_BOUNDS, patterns=patterns)


def _specs(models, patterns) -> dict:
    """Name -> spec, from names (patterns from ``patterns``: one ItemPatterns or name -> ItemPatterns) or specs."""
    if isinstance(models, str):
        models = [part.strip() for part in models.split(",") if part.strip()]
    if isinstance(models, Mapping):
        specs = dict(models)
    else:
        names = list(models)
        for name in names:
            _known(name)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ParameterError(f"each model once; got {', '.join(repeated)} more than once")
        pools = patterns if isinstance(patterns, Mapping) else {n: patterns for n in names}
        specs = {n: comparison_spec(n, pools.get(n) if COMPARISON_MODELS[n][1] else None) for n in names}
    if len(specs) < 2:
        raise ParameterError(f"a comparison needs at least two models; got {', '.join(specs) or 'none'}")
    for name, spec in specs.items():
        if not isinstance(spec, (FitSpec, CMR2FitSpec)):
            raise ParameterError(f"model {name!r}: expected a cmr.FitSpec or cmr.CMR2FitSpec; "
                                 f"got {type(spec).__name__}")
    return specs


def fit_models(events, models, *, patterns=None, n_folds: int | None = None, session: str | None = None,
               nested: Mapping[str, str] | None = None, n_restarts=None, rng=0, n_jobs: int = 1,
               executor=None, polish: bool = True, progress: bool = False,
               de_options: Mapping | None = None) -> tuple[dict, dict | None]:
    """Fit several CMR variants to the same events, each per subject (and cross-validate them).

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    models : sequence of names (:data:`COMPARISON_MODELS`), a comma-separated string of them,
        or a mapping name -> :class:`cmr.FitSpec` / :class:`cmr.CMR2FitSpec`
    patterns : ItemPatterns or mapping name -> ItemPatterns, optional
        The item pool of the ``semantic`` / ``category`` models.
    n_folds : int, optional
        Also cross-validate every model with this many leave-lists-out folds
        (:func:`cmr.cross_validate`; textbook variants only).
    session : str, optional
        CMR2's session variable (:func:`cmr.fit_cmr2`).
    nested : mapping of model name -> name of a model it nests, optional
        Each nesting model's search also starts from its nested model's fit (``start=`` of
        :func:`cmr.fit_recall`; its extra weights at 0 give the nested model exactly), so its
        maximum is never below the nested one's. Default: :data:`NESTED_MODELS` among named
        models, none for a mapping of specs.
    n_restarts : int or "auto", optional
        Searches per subject, as :func:`cmr.fit_recall` (default: the fitters' own default).
    rng, n_jobs, executor, polish, progress, de_options
        As :func:`cmr.fit_recall`; every model gets the same seed. With ``executor`` (a
        ``concurrent.futures.Executor`` or ``dask.distributed.Client``) each model's fit runs
        one task per subject there (its cross-validation one per subject and fold, as
        :func:`cmr.cross_validate`), the models one after another; the numbers equal a run
        in threads.

    Returns
    -------
    fits : dict name -> recall_fit dataset
    cvs : dict name -> recall_cv dataset, or None without ``n_folds``

    Warnings about single fits (FitWarning: estimates at a bound, few events) are left to the
    fits' ``at_bound`` and ``few_events`` variables.
    """
    specs = _specs(models, patterns)
    if n_folds is not None:
        n_folds = integer(n_folds, "n_folds", minimum=2)
        cmr2 = [name for name, spec in specs.items() if isinstance(spec, CMR2FitSpec)]
        if cmr2:
            raise ParameterError(f"cross-validation fits textbook variants only; {', '.join(cmr2)} is CMR2 "
                                 "(leave out the folds, or the CMR2 model)")
    if len({isinstance(spec, CMR2FitSpec) for spec in specs.values()}) == 2:
        _check_same_events(events, session)
    nested = _nested_among(specs, models, nested)
    options = dict(rng=rng, n_jobs=n_jobs, executor=executor, polish=polish, progress=progress,
                   de_options=de_options)
    if n_restarts is not None:
        options["n_restarts"] = n_restarts
    fits, cvs = {}, ({} if n_folds is not None else None)
    order = sorted(specs, key=lambda name: name in nested)  # nested models first: they start the nesting ones
    with warnings.catch_warnings():  # flagged in each fit's at_bound and few_events
        warnings.simplefilter("ignore", FitWarning)
        for name in order:
            spec = specs[name]
            if isinstance(spec, CMR2FitSpec):
                fits[name] = fit_cmr2(events, spec, session=session, **options)
                continue
            start = {"start": fits[nested[name]]} if name in nested else {}
            fits[name] = fit_recall(events, spec, **options, **start)
            if cvs is not None:
                cvs[name] = cross_validate(events, spec, n_folds=n_folds, **options)
    return {name: fits[name] for name in specs}, None if cvs is None else {name: cvs[name] for name in specs}


def _nested_among(specs, models, nested) -> dict:
    """Nesting model -> nested model among ``specs``, both textbook variants (the start of a search)."""
    if nested is None:
        nested = {} if isinstance(models, Mapping) else NESTED_MODELS
    nested = {outer: inner for outer, inner in dict(nested).items() if outer in specs and inner in specs}
    for outer, inner in nested.items():
        if nested.get(inner) is not None or not all(isinstance(specs[m], FitSpec) for m in (outer, inner)):
            raise ParameterError(f"nested: {outer!r} in {inner!r} must be two textbook variants, without a chain; "
                                 f"got {dict(nested)}")
    return nested


def _check_same_events(events, session) -> None:
    """RecallDataError, before any fit, when CMR2 scores other events than textbook CMR (prior-list
    intrusions): their likelihoods would not compare. The counts do not depend on the parameters."""
    import numpy as np

    textbook = log_likelihood(events, default_parameters())
    cmr2 = cmr2_log_likelihood(events, default_cmr2_parameters(), session=session)
    n_textbook, n_cmr2 = textbook["n"].values, cmr2["n"].values
    differs = np.flatnonzero(n_textbook != n_cmr2)
    if differs.size:
        raise RecallDataError(
            f"CMR2 scores {int(n_cmr2.sum() - n_textbook.sum())} more events than textbook CMR in these data "
            f"(prior-list intrusions, which textbook CMR does not score; {differs.size} subject(s)), so their "
            "likelihoods do not compare; compare CMR2 with textbook variants on data without prior-list intrusions")


@keyword_only
def compare_recall_models(events, *, models: Sequence[str] | Mapping | str = ("textbook", "semantic"),
                          patterns=None, n_folds: int | None = None, session: str | None = None,
                          nested: Mapping[str, str] | None = None, test: str = "wilcoxon",
                          nested_tolerance: float = 0.01, n_restarts=None, rng=0, n_jobs: int = 1,
                          executor=None, polish: bool = True, progress: bool = False,
                          de_options: Mapping | None = None) -> tuple[xr.Dataset, dict, dict | None]:
    """Fit the named CMR variants to the same subjects and compare them.

    Parameters are those of :func:`fit_models` and :func:`cmr.compare_models`; ``nested``
    defaults to :data:`NESTED_MODELS` among the named models. ``executor`` runs the subjects
    of every fit (and the folds of every cross-validation) as tasks there, as
    :func:`cmr.fit_recall` does; the comparison equals a run in threads.

    Returns
    -------
    comparison : xarray.Dataset (kind ``model_comparison``)
    fits : dict name -> recall_fit dataset
    cvs : dict name -> recall_cv dataset, or None

    Examples
    --------
    >>> comparison, fits, _ = cmr.compare_recall_models(events, ["textbook", "semantic"], patterns=pool,
    ...                                                 de_options={"maxiter": 50})
    >>> comparison["winner_ratio_aic"].to_series()
    """
    if test not in PAIRED_TESTS:
        raise ParameterError(f"test must be one of {', '.join(PAIRED_TESTS)}; got {test!r}")
    if nested is None:
        nested = {} if isinstance(models, Mapping) else NESTED_MODELS
    fits, cvs = fit_models(events, models, patterns=patterns, n_folds=n_folds, session=session, nested=nested,
                           n_restarts=n_restarts, rng=rng, n_jobs=n_jobs, executor=executor, polish=polish,
                           progress=progress, de_options=de_options)
    nested = {outer: inner for outer, inner in nested.items() if outer in fits and inner in fits}
    comparison = compare_models(fits, cv=cvs, nested=nested, test=test, nested_tolerance=nested_tolerance)
    return comparison, fits, cvs
