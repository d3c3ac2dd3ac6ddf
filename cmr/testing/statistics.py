"""Chi-square tests of simulated recalls against a model's own event probabilities.

Two tests, both at a level ``alpha`` the caller states:

* :func:`multinomial_chi_square`: independent draws from one distribution (the first event of
  each simulated trial: stop or a serial position), Pearson's statistic after pooling the
  categories expected fewer than 5 times (Cochran's rule).
* :func:`sequential_chi_square`: every later event of every trial against the model's
  distribution given that trial's own history, counted in categories (stop, each lag). The
  differences ``observed - expected`` are a sum of martingale increments with covariance
  ``sum_steps (diag(p) - p p^T)``, so the quadratic form with its pseudo-inverse is
  chi-square with ``rank`` degrees of freedom for many steps (martingale central limit
  theorem).

:func:`chi_square_power` gives the power of a chi-square test against a departure of
Cohen's effect size ``w`` (Cohen 1988, ch. 7: noncentrality ``n w^2``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..deprecation import keyword_only

__all__ = ["ChiSquareResult", "multinomial_chi_square", "sequential_chi_square", "chi_square_power", "MIN_EXPECTED"]

#: Cochran's rule: categories expected fewer times than this are pooled.
MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class ChiSquareResult:
    """A chi-square test: statistic, degrees of freedom, p-value, and the pooled categories."""

    statistic: float
    df: int
    pvalue: float
    labels: tuple[str, ...]
    observed: np.ndarray
    expected: np.ndarray
    impossible: int = 0  # events seen where the model gives probability 0

    def describe(self, top: int = 4) -> str:
        """One line: statistic, df, p, and the categories that deviate most."""
        if self.impossible:
            return f"{self.impossible} simulated event(s) have probability 0 under the likelihood"
        z = (self.observed - self.expected) / np.sqrt(np.maximum(self.expected, 1e-300))
        worst = np.argsort(-np.abs(z))[:top]
        detail = ", ".join(f"{self.labels[i]}: {self.observed[i]:.0f} vs {self.expected[i]:.1f}" for i in worst)
        return f"chi2 = {self.statistic:.1f}, df = {self.df}, p = {self.pvalue:.2g} (observed vs expected: {detail})"


def _pooling(expected: np.ndarray, minimum: float) -> np.ndarray:
    """Bin of each category: the rarest ones merged until each pooled bin expects >= minimum."""
    order = np.argsort(expected, kind="stable")
    bins = np.arange(expected.size)
    pooled, total = [], 0.0
    for index in order:
        if expected[index] >= minimum:
            break
        pooled.append(index)
        total += expected[index]
    if pooled:
        if total < minimum and len(pooled) < expected.size:
            # too few even together: fold them into the next-rarest category
            pooled.append(order[len(pooled)])
        bins[pooled] = pooled[0]
    _, bins = np.unique(bins, return_inverse=True)
    return bins


def _labels(labels, bins) -> tuple[str, ...]:
    out = []
    for b in range(bins.max() + 1):
        members = [str(labels[i]) for i in np.flatnonzero(bins == b)]
        out.append(members[0] if len(members) == 1 else "+".join(members))
    return tuple(out)


@keyword_only
def multinomial_chi_square(observed, probabilities, *, labels=None, minimum: float = MIN_EXPECTED) -> ChiSquareResult:
    """Pearson's chi-square of counts against one distribution (rare categories pooled).

    Parameters
    ----------
    observed : array_like of int, shape (categories,)
    probabilities : array_like of float, shape (categories,)
        The model's distribution (sums to 1).
    labels : sequence of str, optional
        Category names for the report.
    """
    observed = np.asarray(observed, dtype=np.float64)
    probabilities = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, None)
    labels = list(range(observed.size)) if labels is None else list(labels)
    impossible = int(observed[probabilities <= 0].sum())
    expected = observed.sum() * probabilities / probabilities.sum()
    bins = _pooling(expected, minimum)
    obs = np.bincount(bins, observed)
    exp = np.bincount(bins, expected)
    df = obs.size - 1
    statistic = float(((obs - exp) ** 2 / np.maximum(exp, 1e-300)).sum()) if df > 0 else 0.0
    pvalue = 0.0 if impossible else (float(stats.chi2.sf(statistic, df)) if df > 0 else 1.0)
    return ChiSquareResult(statistic, df, pvalue, _labels(labels, bins), obs, exp, impossible)


@keyword_only
def sequential_chi_square(events, probabilities, *, labels=None, minimum: float = MIN_EXPECTED) -> ChiSquareResult:
    """Chi-square of events drawn step by step, each from its own distribution.

    Parameters
    ----------
    events : array_like of int, shape (steps,)
        The category of the event at each step.
    probabilities : array_like of float, shape (steps, categories)
        The model's distribution over categories at each step, given the history.
    labels : sequence of str, optional
    """
    events = np.asarray(events, dtype=np.int64)
    probabilities = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, None)
    n_categories = probabilities.shape[1]
    labels = list(range(n_categories)) if labels is None else list(labels)
    impossible = int((probabilities[np.arange(events.size), events] <= 0).sum())
    probabilities = probabilities / probabilities.sum(axis=1, keepdims=True)
    bins = _pooling(probabilities.sum(axis=0), minimum)
    n_bins = bins.max() + 1
    pooled = np.zeros((events.size, n_bins))
    np.add.at(pooled.T, bins, probabilities.T)
    obs = np.bincount(bins[events], minlength=n_bins).astype(np.float64)
    exp = pooled.sum(axis=0)
    covariance = np.diag(exp) - pooled.T @ pooled
    difference = obs - exp
    scale = max(float(np.abs(covariance).max()), 1e-300)
    df = int(np.linalg.matrix_rank(covariance, tol=1e-9 * scale))
    statistic = float(difference @ np.linalg.pinv(covariance, rcond=1e-9, hermitian=True) @ difference) if df else 0.0
    pvalue = 0.0 if impossible else (float(stats.chi2.sf(statistic, df)) if df > 0 else 1.0)
    return ChiSquareResult(statistic, df, pvalue, _labels(labels, bins), obs, exp, impossible)


def chi_square_power(n: int, df: int, effect: float, alpha: float) -> float:
    """Power of a level-``alpha`` chi-square test with ``df`` degrees of freedom and ``n``
    observations against a departure of effect size ``w = effect`` (Cohen 1988)."""
    critical = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(critical, df, n * effect**2))
