"""Leave-lists-out cross-validated likelihood of CMR, per subject.

Each subject's lists are dealt into ``n_folds`` folds (shuffled with ``rng``, then dealt in
turn, so fold sizes differ by at most one). For every fold the model is fitted to the
subject's other lists and the held-out lists are scored at the fitted parameters; a subject's
cross-validated log-likelihood is the sum over its folds. Unlike AIC it needs no parameter
count, so it compares models whose parameters are tied, bounded or nested alike.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import integer, seed_of, shown
from ..checks import n_jobs as check_n_jobs
from ..deprecation import keyword_only, warn
from ..errors import RecallDataError
from ..events import as_events
from ..schema import provenance_attrs
from ..constants import CONVERGENCE_TOLERANCE
from ._optimize import MAX_RESTARTS, score_unit
from ._trials import trial_arrays
from .fit import event_counts, fit_units, label_words, restart_plan, unit_seeds, uses_library
from .flags import convergence_variables
from .spec import FitSpec, resolve_spec

__all__ = ["cross_validate", "list_folds"]


@keyword_only
def list_folds(subjects, *, n_folds: int, rng=0) -> np.ndarray:
    """Fold (0..n_folds-1) of each trial: per subject, shuffled lists dealt in turn.

    A subject's shuffle is seeded by ``rng`` and its own label (:func:`cmr.textbook.fit.label_words`),
    so its folds do not depend on the other subjects of the call.
    """
    labels = np.asarray(subjects)
    seed = seed_of(rng)
    folds = np.empty(labels.size, dtype=np.int64)
    for subject in pd.unique(labels):
        rows = np.flatnonzero(labels == subject)
        if rows.size < n_folds:
            raise RecallDataError(f"subject {shown(subject)} has {rows.size} list(s), fewer than n_folds={n_folds}")
        generator = np.random.default_rng(np.random.SeedSequence([seed, *label_words(subject)]))
        folds[rows[generator.permutation(rows.size)]] = np.arange(rows.size) % n_folds
    return folds


def cross_validate(
    events,
    spec: FitSpec | None = None,
    *deprecated_positional,
    n_folds: int = 4,
    n_restarts: int | str = "auto",
    rng=0,
    n_jobs: int = 1,
    executor=None,
    polish: bool = True,
    progress: bool = True,
    de_options: Mapping | None = None,
    max_restarts: int = MAX_RESTARTS,
    start_library: bool | None = None,
    **deprecated_model,
) -> xr.Dataset:
    """Leave-lists-out cross-validated log-likelihood of CMR for each subject.

    Parameters are those of :func:`cmr.fit_recall` (the model as one :class:`cmr.FitSpec`;
    the separate model arguments are deprecated and still work, with a DeprecationWarning,
    until the next release); ``n_folds`` (>= 2) is the number of folds per subject. One task per
    (subject, fold) runs in threads or on ``executor``.

    Returns
    -------
    xarray.Dataset
        Kind ``recall_cv`` (docs/schema.md): ``logl`` and ``n`` (subject), the held-out totals;
        ``fold_logl``, ``fold_n``, ``fold_train_logl`` (subject, fold); ``fold_value``
        (subject, fold, parameter); ``trial_fold`` (trial); the training fits' convergence
        (:func:`cmr.fit_recall`): ``fold_n_restarts``, ``fold_logl_gap``, ``fold_converged``
        (subject, fold) and ``converged`` (subject: every fold converged). Attr ``k``.
    """
    fit_spec, _, message = resolve_spec("cross_validate", spec, deprecated_positional, deprecated_model)
    if message:
        warn(message, skip=1)
    events = as_events(events)
    spec, patterns, pool_size = fit_spec._model, fit_spec.patterns, fit_spec.pool_size
    n_folds = integer(n_folds, "n_folds", minimum=2)
    count, min_restarts = restart_plan(n_restarts, max_restarts)
    library = uses_library(start_library, min_restarts, polish)
    n_jobs = check_n_jobs(n_jobs)
    seed = seed_of(rng)
    arrays = trial_arrays(events, patterns, pool_size)
    subject_values = np.asarray(events["subject"].values)
    folds = list_folds(subject_values, n_folds=n_folds, rng=seed)
    labels = pd.unique(subject_values)
    units, tests, keys = [], [], []
    for subject in labels:
        rows = subject_values == subject
        for f in range(n_folds):
            units.append(np.flatnonzero(rows & (folds != f)))
            tests.append(np.flatnonzero(rows & (folds == f)))
            keys.append(f"{subject}/fold {f}")
    results = fit_units(spec, arrays, units, unit_seeds(seed, keys, count), n_jobs=n_jobs,
                        executor=executor, polish=polish, progress=progress, de_options=de_options,
                        desc="cross-validate", min_restarts=min_restarts,
                        library=library)
    shape = (labels.size, n_folds)
    fold_logl, fold_train = np.empty(shape), np.empty(shape)
    fold_n = np.empty(shape, dtype=np.int64)
    names = list(spec.names)
    fold_value = np.empty(shape + (len(names),))
    verdict = {name: values.reshape(shape) for name, values in convergence_variables(
        [[r["logl"] for r in restarts] for restarts in results], tolerance=CONVERGENCE_TOLERANCE).items()}
    fold_ran, fold_gap, fold_converged = verdict["n_restarts"], verdict["logl_gap"], verdict["converged"]
    for u, (restarts, test) in enumerate(zip(results, tests)):
        i, f = divmod(u, n_folds)
        best = max(restarts, key=lambda r: r["logl"] if np.isfinite(r["logl"]) else -np.inf)
        fold_train[i, f] = best["logl"]
        fold_logl[i, f] = score_unit(spec, arrays.subset(test), best["x"])
        fold_n[i, f] = int(event_counts(arrays.recalls[test]).sum())
        values = spec.as_dict(best["x"])
        fold_value[i, f] = [values[n] for n in names]
    ds = xr.Dataset(
        {
            "logl": ("subject", fold_logl.sum(axis=1)),
            "n": ("subject", fold_n.sum(axis=1)),
            "fold_logl": (("subject", "fold"), fold_logl),
            "fold_n": (("subject", "fold"), fold_n),
            "fold_train_logl": (("subject", "fold"), fold_train),
            "fold_value": (("subject", "fold", "parameter"), fold_value),
            "trial_fold": ("trial", folds),
            "fold_n_restarts": (("subject", "fold"), fold_ran),
            "fold_logl_gap": (("subject", "fold"), fold_gap),
            "fold_converged": (("subject", "fold"), fold_converged),
            "converged": ("subject", fold_converged.all(axis=1)),
        },
        coords={"subject": labels, "fold": np.arange(n_folds), "parameter": np.array(names),
                "trial": events["trial"].values},
        attrs=provenance_attrs(
            "recall_cv", "cmr.cross_validate", free=list(spec.free), fixed=spec.fixed,
            bounds=dict(zip(spec.free, spec.bounds)), tied={t.name: t.expression for t in spec.tied},
            n_folds=n_folds, n_restarts=n_restarts if isinstance(n_restarts, str) else count, max_restarts=count,
            seed=int(seed), pool_size=pool_size,
            patterns=patterns is not None, de_options=dict(de_options or {}),
        ),
    )
    ds.attrs["k"] = spec.k
    ds.attrs["convergence_tolerance"] = CONVERGENCE_TOLERANCE
    return ds
