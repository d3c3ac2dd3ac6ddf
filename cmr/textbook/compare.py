"""Model comparison across CMR variants fitted to the same subjects.

Per subject and model: maximised log-likelihood, parameter count, AIC and BIC and their
per-subject Akaike weights (from the ``recall_fit`` datasets) and, when given, the
cross-validated log-likelihood (``recall_cv``). Per model: totals over subjects, AIC
differences and Akaike weights of the summed AIC (Wagenmakers & Farrell 2004), the share of
subjects each model wins under each criterion (ties shared), and a paired test of every model
against every other over subjects (two-sided Wilcoxon signed-rank, or a paired t-test, of the
per-subject difference in cross-validated, or else AIC-penalised, log-likelihood), so a ranking
comes with its null. A model that nests another (semantic CMR at ``Scf = Sff = 0`` is textbook
CMR) can never have a lower maximum; subjects where its fit does are flagged.
"""
from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np
import xarray as xr

from ..criteria import aic_bic
from ..errors import ParameterError, SchemaError
from ..schema import provenance_attrs, validate

__all__ = ["compare_models", "PAIRED_TESTS"]

#: the paired tests over subjects :func:`compare_models` runs, by name
PAIRED_TESTS = {
    "wilcoxon": "two-sided Wilcoxon signed-rank test (zero differences dropped)",
    "t": "two-sided paired t-test",
}


def _per_subject(ds, name, kind, subjects):
    validate(ds, kind)
    if "subject" not in ds.dims:
        raise SchemaError(f"model comparison needs per-subject {kind} datasets; {name!r} has no subject dim")
    labels = [str(s) for s in ds["subject"].values]
    if sorted(labels) != sorted(subjects):
        raise SchemaError(f"{kind} of model {name!r} covers other subjects than the first model's")
    order = [labels.index(s) for s in subjects]
    return ds.isel(subject=order)


def _check_nested(nested, names) -> dict:
    """``{nesting model: nested model}`` restricted to the compared models; ParameterError otherwise."""
    nested = dict(nested or {})
    for outer, inner in nested.items():
        if outer == inner or outer not in names or inner not in names:
            raise ParameterError(f"nested must map a compared model to another compared model ({', '.join(names)}); "
                                 f"got {outer!r}: {inner!r}")
    return nested


def compare_models(fits: Mapping[str, xr.Dataset], cv: Mapping[str, xr.Dataset] | None = None, *,
                   nested: Mapping[str, str] | None = None, test: str = "wilcoxon",
                   nested_tolerance: float = 0.01) -> xr.Dataset:
    """Comparison table of CMR variants (same subjects, same data).

    Parameters
    ----------
    fits : mapping of model name -> recall_fit dataset (per subject)
    cv : mapping of model name -> recall_cv dataset, optional (the same model names)
    nested : mapping of model name -> name of a model it nests, optional
        E.g. ``{"semantic": "textbook"}`` (:data:`cmr.NESTED_MODELS`): the nesting model's
        maximum can never be lower, so subjects where its fit is are flagged.
    test : {"wilcoxon", "t"}
        The paired test over subjects (:data:`PAIRED_TESTS`).
    nested_tolerance : float
        Log-likelihood units by which a nesting model may fall short of its nested model before
        the subject is flagged (the searches stop within numerical noise of a maximum).

    Returns
    -------
    xarray.Dataset
        Kind ``model_comparison`` (docs/schema.md): (model, subject) ``logl``, ``aic``,
        ``bic``, ``subject_akaike_weight`` [, ``cv_logl``] [, ``converged``] and, with
        ``nested``, ``nested_gain`` and ``fits_worse_than_nested``; (subject) ``n``; (model)
        ``k``, ``total_logl``, ``total_aic``, ``total_bic``, ``delta_aic``, ``akaike_weight``,
        ``n_best_aic``, ``winner_ratio_logl``, ``winner_ratio_aic``, ``winner_ratio_bic`` [,
        ``total_cv_logl``, ``n_best_cv``, ``winner_ratio_cv_logl``], ``nested_model`` ('' for
        none), ``paired_statistic`` and ``paired_p`` (against the best model); (model,
        comparison) ``difference_versus`` (mean per-subject difference of the criterion, row
        minus column), ``p_versus`` (the paired test's p; symmetric, NaN on the diagonal) and
        ``win_share_versus`` (share of subjects where the row model beats the column model);
        (model, subject, parameter) ``parameter_value`` (the fitted free parameters, NaN where
        a model has no such free parameter). ``converged`` is kept when every fit has it.
    """
    if not fits:
        raise SchemaError("compare_models needs at least one fitted model")
    if test not in PAIRED_TESTS:
        raise ParameterError(f"test must be one of {', '.join(PAIRED_TESTS)}; got {test!r}")
    if isinstance(nested_tolerance, bool) or not isinstance(nested_tolerance, (int, float, np.number)) \
            or not (np.isfinite(nested_tolerance) and nested_tolerance >= 0):
        raise ParameterError(f"nested_tolerance must be a finite number >= 0; got {nested_tolerance!r}")
    nested_tolerance = float(nested_tolerance)
    names = list(fits)
    nested = _check_nested(nested, names)
    first = fits[names[0]]
    validate(first, "recall_fit")
    subjects = [str(s) for s in first["subject"].values] if "subject" in first.dims else []
    aligned = {m: _per_subject(fits[m], m, "recall_fit", subjects) for m in names}
    _check_same_events(aligned, names)
    k = np.array([int(aligned[m].attrs["k"]) for m in names], dtype=np.int64)
    logl = np.array([aligned[m]["logl"].values for m in names], dtype=np.float64)
    n = aligned[names[0]]["n"].values
    aic, bic = aic_bic(logl, k[:, None], n[None, :])
    total_aic = aic.sum(axis=1)
    delta = total_aic - total_aic.min()
    weight = np.exp(-0.5 * delta) / np.exp(-0.5 * delta).sum()
    pair, versus = ("model", "subject"), ("model", "comparison")
    data = {
        "logl": (pair, logl),
        "n": ("subject", n.astype(np.int64)),
        "aic": (pair, aic),
        "bic": (pair, bic),
        "subject_akaike_weight": (pair, _weights(aic)),
        "k": ("model", k),
        "total_logl": ("model", logl.sum(axis=1)),
        "total_aic": ("model", total_aic),
        "total_bic": ("model", bic.sum(axis=1)),
        "delta_aic": ("model", delta),
        "akaike_weight": ("model", weight),
        "n_best_aic": ("model", _wins(-aic)),
        "winner_ratio_logl": ("model", winner_ratio(logl)),
        "winner_ratio_aic": ("model", winner_ratio(-aic)),
        "winner_ratio_bic": ("model", winner_ratio(-bic)),
    }
    if all("converged" in aligned[m] and aligned[m]["converged"].dims == ("subject",) for m in names):
        data["converged"] = (pair, np.array([aligned[m]["converged"].values.astype(bool) for m in names]))
    criterion, score = "aic", -aic / 2.0  # AIC-penalised log-likelihood
    if cv is not None:
        if set(cv) != set(names):
            raise SchemaError(f"cv must have the models of fits ({names}); got {list(cv)}")
        cv_aligned = {m: _per_subject(cv[m], m, "recall_cv", subjects) for m in names}
        cv_logl = np.array([cv_aligned[m]["logl"].values for m in names], dtype=np.float64)
        data["cv_logl"] = (pair, cv_logl)
        data["total_cv_logl"] = ("model", cv_logl.sum(axis=1))
        data["n_best_cv"] = ("model", _wins(cv_logl))
        data["winner_ratio_cv_logl"] = ("model", winner_ratio(cv_logl))
        criterion, score = "cv_logl", cv_logl
    best = int(np.argmax(score.sum(axis=1)))
    diff = score - score[best][None, :]
    data["paired_statistic"] = ("model", diff.mean(axis=1))
    data["paired_p"] = ("model", np.array([_paired_p(row, test) if i != best else np.nan
                                           for i, row in enumerate(diff)]))
    difference, p = paired_matrix(score, test)
    data["difference_versus"] = (versus, difference)
    data["p_versus"] = (versus, p)
    data["win_share_versus"] = (versus, win_share_matrix(score))
    data["nested_model"] = ("model", np.array([nested.get(m, "") for m in names], dtype=object))
    if nested:
        gain = np.full(logl.shape, np.nan)
        for outer, inner in nested.items():
            gain[names.index(outer)] = logl[names.index(outer)] - logl[names.index(inner)]
        data["nested_gain"] = (pair, gain)
        data["fits_worse_than_nested"] = (pair, np.nan_to_num(gain, nan=0.0) < -nested_tolerance)
    parameters, values = _free_values(aligned, names)
    data["parameter_value"] = (("model", "subject", "parameter"), values)
    ds = xr.Dataset(data, coords={"model": np.array(names), "subject": np.array(subjects, dtype=object),
                                  "comparison": np.array(names), "parameter": np.array(parameters)},
                    attrs=provenance_attrs("model_comparison", "cmr.compare_models", models=names,
                                           criterion=criterion, best=names[best], test=test, nested=nested,
                                           nested_tolerance=nested_tolerance))
    ds.attrs["criterion"] = criterion
    ds.attrs["best_model"] = names[best]
    ds.attrs["paired_test"] = PAIRED_TESTS[test]
    ds.attrs["nested_tolerance"] = nested_tolerance
    return ds


def _check_same_events(aligned, names) -> None:
    """SchemaError unless every model scored the same number of events for every subject."""
    n0 = aligned[names[0]]["n"].values
    for m in names[1:]:
        differs = np.flatnonzero(aligned[m]["n"].values != n0)
        if differs.size:
            subject = str(aligned[m]["subject"].values[differs[0]])
            raise SchemaError(
                f"models were fitted to different data: {names[0]!r} scored {int(n0[differs[0]])} events of subject "
                f"{subject!r}, {m!r} {int(aligned[m]['n'].values[differs[0]])} ({differs.size} subject(s) differ); "
                "likelihoods of different events do not compare (CMR2 also scores prior-list intrusions)")


def _free_values(aligned, names) -> tuple[list, np.ndarray]:
    """Union of the models' free parameters (first appearance order) and their fitted values, NaN elsewhere."""
    parameters: list[str] = []
    for m in names:
        fit = aligned[m]
        free = fit["free"].values.astype(bool) if "free" in fit else np.ones(fit.sizes["parameter"], dtype=bool)
        parameters += [str(p) for p, f in zip(fit["parameter"].values, free) if f and str(p) not in parameters]
    values = np.full((len(names), aligned[names[0]].sizes["subject"], len(parameters)), np.nan)
    for i, m in enumerate(names):
        fit = aligned[m]
        free = fit["free"].values.astype(bool) if "free" in fit else np.ones(fit.sizes["parameter"], dtype=bool)
        for p, f in zip(fit["parameter"].values, free):
            if f:
                values[i, :, parameters.index(str(p))] = fit["value"].sel(parameter=p).values
    return parameters, values


def _weights(aic: np.ndarray) -> np.ndarray:
    """Akaike weights over models (axis 0) of each subject's AIC."""
    delta = aic - np.nanmin(aic, axis=0, keepdims=True)
    w = np.exp(-0.5 * np.nan_to_num(delta, nan=np.inf))
    return w / w.sum(axis=0, keepdims=True)


def _wins(score: np.ndarray) -> np.ndarray:
    """Subjects for which each model has the highest score (ties to the first)."""
    return np.bincount(np.argmax(score, axis=0), minlength=score.shape[0]).astype(np.int64)


def winner_ratio(score: np.ndarray) -> np.ndarray:
    """Share of subjects (axis 1) for which each model (axis 0) has the highest score.

    A tie shares the subject equally among the tied models, so the shares sum to 1; NaN
    counts as the lowest score.
    """
    score = np.where(np.isnan(score), -np.inf, np.asarray(score, dtype=np.float64))
    top = score == score.max(axis=0, keepdims=True)
    return (top / top.sum(axis=0, keepdims=True)).mean(axis=1)


def win_share_matrix(score: np.ndarray) -> np.ndarray:
    """(model, comparison): share of subjects whose row-model score beats the column model's (ties
    count one half), NaN on the diagonal; entry (i, j) + entry (j, i) = 1."""
    score = np.where(np.isnan(score), -np.inf, np.asarray(score, dtype=np.float64))
    a, b = score[:, None, :], score[None, :, :]
    share = ((a > b) + 0.5 * (a == b)).mean(axis=2)
    np.fill_diagonal(share, np.nan)
    return share


def paired_matrix(score: np.ndarray, test: str = "wilcoxon") -> tuple[np.ndarray, np.ndarray]:
    """(model, comparison) mean per-subject difference (row minus column) and two-sided paired p.

    Both tests are two-sided, so the p-matrix is symmetric; the diagonal is NaN.
    """
    m = score.shape[0]
    difference = np.full((m, m), np.nan)
    p = np.full((m, m), np.nan)
    for i in range(m):
        for j in range(m):
            if i != j:
                d = score[i] - score[j]
                difference[i, j] = d.mean()
                p[i, j] = p[j, i] if j < i else _paired_p(d, test)
    return difference, p


def _paired_p(diff: np.ndarray, test: str = "wilcoxon") -> float:
    """Two-sided p of per-subject differences: Wilcoxon signed-rank (NaN with < 2 nonzero) or paired t
    (NaN with < 2 subjects or no spread)."""
    from scipy import stats

    diff = np.asarray(diff, dtype=np.float64)
    if not np.isfinite(diff).all():
        return float("nan")
    if test == "t":
        if diff.size < 2 or np.ptp(diff) == 0:
            return float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(stats.ttest_1samp(diff, 0.0).pvalue)
    nonzero = diff[diff != 0]
    if nonzero.size < 2:
        return float("nan")
    return float(stats.wilcoxon(nonzero).pvalue)
