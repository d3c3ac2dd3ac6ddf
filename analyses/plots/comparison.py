"""Comparing CMR variants on held-out lists and by information criteria, subject by subject."""
from __future__ import annotations

import numpy as np

from ._common import checked, legend_above
from .style import PALETTE, REFERENCE_GREY, house_style, new_figure

__all__ = ["model_comparison", "recall_cv"]


def _offsets(n: int, width: float = 0.3) -> np.ndarray:
    """Fixed horizontal offsets of ``n`` points at one position (no randomness: a figure is reproducible)."""
    return np.linspace(-width / 2, width / 2, n) if n > 1 else np.zeros(n)


def model_comparison(comparison):
    """Each subject's difference to the best model, per model, with the sums and Akaike weights below the axis.

    The criterion is the dataset's (``criterion``): the cross-validated log-likelihood (the
    difference to the best model, higher is better, the best at 0) or AIC (delta AIC, lower is
    better). The best model is the one with the best sum over the subjects drawn; the tick
    labels give each model's summed difference, its Akaike weight (of the summed AIC) and the
    subjects for which it is best, so with every subject they are the dataset's ``delta_aic``,
    ``akaike_weight`` and ``n_best_*``.

    Parameters
    ----------
    comparison : xarray.Dataset
        ``model_comparison`` dataset from :func:`cmr.compare_models`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    comparison = checked(comparison, "model_comparison", "cmr.compare_models")
    by_cv = comparison.attrs.get("criterion") == "cv_logl" and "cv_logl" in comparison
    models = [str(m) for m in comparison["model"].values]
    values = np.asarray(comparison["cv_logl" if by_cv else "aic"].transpose("model", "subject").values, dtype=float)
    aic = np.asarray(comparison["aic"].transpose("model", "subject").values, dtype=float)
    totals = np.nansum(values, axis=1)  # a subject without a score for a model counts as none
    best = int(np.argmax(totals) if by_cv else np.argmin(totals))
    difference = values - values[best]  # per subject, to the model best in sum
    summed_aic = np.nansum(aic, axis=1)
    delta_aic = summed_aic - summed_aic.min()
    weight = np.exp(-delta_aic / 2) / np.exp(-delta_aic / 2).sum()
    scored = np.isfinite(values).any(axis=0)
    filled = np.where(np.isfinite(values), values, -np.inf if by_cv else np.inf)
    per_subject_best = np.where(scored, np.argmax(filled, axis=0) if by_cv else np.argmin(filled, axis=0), -1)
    n_subjects = values.shape[1]
    fig, ax = new_figure(width=max(1.9, 0.85 * len(models) + 0.8), height=2.4)
    with house_style():
        ax.axhline(0.0, color=REFERENCE_GREY, linewidth=0.8, linestyle="--", zorder=0)
        offsets = _offsets(n_subjects)
        for m in range(len(models)):
            ax.scatter(m + offsets, difference[m], s=12, marker="o" if m != best else "D", linewidths=0.8,
                       facecolors="none" if m != best else PALETTE[1], edgecolors=PALETTE[1] if m == best
                       else PALETTE[0], zorder=3)
            if np.isfinite(difference[m]).any():
                ax.plot([m - 0.25, m + 0.25], [np.nanmean(difference[m])] * 2, color="black", linewidth=1.0)
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([f"{name}\nsum {np.nansum(difference[m]):+.1f}\nw_AIC {weight[m]:.2f}\n"
                            f"best {int((per_subject_best == m).sum())}/{n_subjects}"
                            for m, name in enumerate(models)])
        ax.set_xlim(-0.6, len(models) - 0.4)
        ax.set_ylabel("Held-out log-lik. - best model's" if by_cv else "AIC - best model's (delta AIC)")
        ax.set_title(f"best: {models[best]} ({'cross-validated log-lik.' if by_cv else 'AIC'}); "
                     f"bar: mean of {n_subjects} subjects", fontsize=7)
    return fig


def recall_cv(cv):
    """Held-out log-likelihood per event of each subject, the folds' range as error bars, training beside it.

    Per event (the sum divided by the scored events), so subjects with more lists compare; the
    error bars span the folds' own per-event values, and the hollow marker is the training lists'
    per-event log-likelihood at the same fits (above the held-out one: what the fit gains on the
    lists it saw).

    Parameters
    ----------
    cv : xarray.Dataset
        ``recall_cv`` dataset from :func:`cmr.cross_validate` (``icl-cmr fit-recall --folds``).

    Returns
    -------
    matplotlib.figure.Figure
    """
    cv = checked(cv, "recall_cv", "cmr.cross_validate")
    subjects = [str(s) for s in cv["subject"].values]
    held = np.asarray(cv["logl"].values, dtype=float) / np.asarray(cv["n"].values, dtype=float)
    fold_n = np.asarray(cv["fold_n"].transpose("subject", "fold").values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_fold = np.asarray(cv["fold_logl"].transpose("subject", "fold").values, dtype=float) / fold_n
        training_n = fold_n.sum(axis=1, keepdims=True) - fold_n
        training = (np.asarray(cv["fold_train_logl"].transpose("subject", "fold").values, dtype=float)
                    / training_n)
    per_fold = np.where(fold_n > 0, per_fold, np.nan)
    low = held - np.nanmin(per_fold, axis=1, initial=np.inf, where=np.isfinite(per_fold))
    high = np.nanmax(per_fold, axis=1, initial=-np.inf, where=np.isfinite(per_fold)) - held
    low, high = np.where(np.isfinite(low), low, 0.0), np.where(np.isfinite(high), high, 0.0)
    training_mean = np.array([np.nanmean(row) if np.isfinite(row).any() else np.nan
                              for row in np.where(training_n > 0, training, np.nan)])
    x = np.arange(len(subjects))
    fig, ax = new_figure(width=max(2.4, 0.3 * len(subjects) + 1.0), height=2.4)
    with house_style():
        ax.errorbar(x, held, yerr=[low, high], linestyle="none", marker="o", color=PALETTE[0], elinewidth=0.8,
                    label=f"held out (folds' range; {cv.sizes['fold']} folds)")
        ax.scatter(x + 0.2, training_mean, s=12, marker="s", facecolors="none", edgecolors=PALETTE[1],
                   linewidths=0.8, label="training lists (mean of folds)", zorder=3)
        ax.set_xticks(x)
        ax.set_xticklabels(subjects, rotation=90 if len(subjects) > 8 else 0)
        ax.set_xlim(-0.6, len(subjects) - 0.4)
        ax.set_xlabel("Subject")
        ax.set_ylabel("Log-likelihood per event")
        legend_above(ax, ncols=1)
    return fig
