"""Model comparison across CMR variants fitted to the same subjects.

Per subject and model: maximised log-likelihood, parameter count, AIC and BIC (from the
``recall_fit`` datasets) and, when given, the cross-validated log-likelihood (``recall_cv``).
Per model: totals over subjects, AIC differences and Akaike weights of the summed AIC, how
many subjects each model wins, and a paired test of every model against the best one
(Wilcoxon signed-rank over subjects of the per-subject difference in cross-validated, or
else AIC-penalised, log-likelihood), so a ranking comes with its null.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import xarray as xr

from ..criteria import aic_bic
from ..errors import SchemaError
from ..schema import provenance_attrs, validate

__all__ = ["compare_models"]


def _per_subject(ds, name, kind, subjects):
    validate(ds, kind)
    if "subject" not in ds.dims:
        raise SchemaError(f"model comparison needs per-subject {kind} datasets; {name!r} has no subject dim")
    labels = [str(s) for s in ds["subject"].values]
    if sorted(labels) != sorted(subjects):
        raise SchemaError(f"{kind} of model {name!r} covers other subjects than the first model's")
    order = [labels.index(s) for s in subjects]
    return ds.isel(subject=order)


def compare_models(fits: Mapping[str, xr.Dataset], cv: Mapping[str, xr.Dataset] | None = None) -> xr.Dataset:
    """Comparison table of CMR variants (same subjects, same data).

    Parameters
    ----------
    fits : mapping of model name -> recall_fit dataset (per subject)
    cv : mapping of model name -> recall_cv dataset, optional (the same model names)

    Returns
    -------
    xarray.Dataset
        Kind ``model_comparison`` (docs/schema.md): (model, subject) ``logl``, ``n``, ``aic``,
        ``bic`` [, ``cv_logl``]; (model) ``k``, ``total_logl``, ``total_aic``, ``total_bic``,
        ``delta_aic``, ``akaike_weight``, ``n_best_aic`` [, ``total_cv_logl``, ``n_best_cv``],
        ``paired_statistic`` (mean per-subject difference to the best model) and ``paired_p``.
    """
    if not fits:
        raise SchemaError("compare_models needs at least one fitted model")
    names = list(fits)
    first = fits[names[0]]
    validate(first, "recall_fit")
    subjects = [str(s) for s in first["subject"].values] if "subject" in first.dims else []
    aligned = {m: _per_subject(fits[m], m, "recall_fit", subjects) for m in names}
    if any(not np.array_equal(aligned[m]["n"].values, aligned[names[0]]["n"].values) for m in names):
        raise SchemaError("models were fitted to different data (the number of scored events differs)")
    k = np.array([int(aligned[m].attrs["k"]) for m in names], dtype=np.int64)
    logl = np.array([aligned[m]["logl"].values for m in names])
    n = aligned[names[0]]["n"].values
    aic, bic = aic_bic(logl, k[:, None], n[None, :])
    total_aic = aic.sum(axis=1)
    delta = total_aic - total_aic.min()
    weight = np.exp(-0.5 * delta) / np.exp(-0.5 * delta).sum()
    data = {
        "logl": (("model", "subject"), logl),
        "n": ("subject", n.astype(np.int64)),
        "aic": (("model", "subject"), aic),
        "bic": (("model", "subject"), bic),
        "k": ("model", k),
        "total_logl": ("model", logl.sum(axis=1)),
        "total_aic": ("model", total_aic),
        "total_bic": ("model", bic.sum(axis=1)),
        "delta_aic": ("model", delta),
        "akaike_weight": ("model", weight),
        "n_best_aic": ("model", _wins(-aic)),
    }
    criterion, score = "aic", -aic / 2.0  # AIC-penalised log-likelihood
    if cv is not None:
        if set(cv) != set(names):
            raise SchemaError(f"cv must have the models of fits ({names}); got {list(cv)}")
        cv_aligned = {m: _per_subject(cv[m], m, "recall_cv", subjects) for m in names}
        cv_logl = np.array([cv_aligned[m]["logl"].values for m in names])
        data["cv_logl"] = (("model", "subject"), cv_logl)
        data["total_cv_logl"] = ("model", cv_logl.sum(axis=1))
        data["n_best_cv"] = ("model", _wins(cv_logl))
        criterion, score = "cv_logl", cv_logl
    best = int(np.argmax(score.sum(axis=1)))
    diff = score - score[best][None, :]
    data["paired_statistic"] = ("model", diff.mean(axis=1))
    data["paired_p"] = ("model", np.array([_wilcoxon(row) if i != best else np.nan for i, row in enumerate(diff)]))
    ds = xr.Dataset(data, coords={"model": np.array(names), "subject": np.array(subjects, dtype=object)},
                    attrs=provenance_attrs("model_comparison", "cmr.compare_models", models=names,
                                           criterion=criterion, best=names[best]))
    ds.attrs["criterion"] = criterion
    ds.attrs["best_model"] = names[best]
    return ds


def _wins(score: np.ndarray) -> np.ndarray:
    """Subjects for which each model has the highest score (ties to the first)."""
    return np.bincount(np.argmax(score, axis=0), minlength=score.shape[0]).astype(np.int64)


def _wilcoxon(diff: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p of per-subject differences (NaN with < 2 nonzero)."""
    from scipy import stats

    nonzero = diff[diff != 0]
    if nonzero.size < 2:
        return float("nan")
    return float(stats.wilcoxon(nonzero).pvalue)
