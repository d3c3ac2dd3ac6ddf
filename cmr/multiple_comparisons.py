"""Adjusted p-values for a family of tests: Holm's step-down and Benjamini-Hochberg's step-up.

One home for the corrections every layer applies (the causal test's head sets and measures,
the first-presentation preference of heads, the share of units CMR-like beyond chance)::

    import cmr
    adjusted = cmr.holm(p)                          # family-wise error rate (Holm 1979)
    discoveries = cmr.benjamini_hochberg(p) <= 0.05  # false discovery rate (Benjamini & Hochberg 1995)

Both take p-values of any shape, treat the finite entries as one family (NaN entries are left
out of it and stay NaN) and return adjusted p-values of the same shape, each between the raw
p-value and 1 and monotone in it: a test is rejected at level ``alpha`` when its adjusted
p-value is ``<= alpha``. They agree with ``statsmodels.stats.multitest.multipletests``
(methods ``holm`` and ``fdr_bh``) up to rounding.
"""
from __future__ import annotations

import numpy as np

from .errors import ParameterError

__all__ = ["holm", "benjamini_hochberg"]


def _adjusted(pvalues, adjust) -> np.ndarray:
    """``adjust`` (sorted finite p-values -> their adjusted values) applied to the family of ``pvalues``."""
    p = np.asarray(pvalues, dtype=np.float64)
    flat = p.ravel()
    keep = np.flatnonzero(np.isfinite(flat))
    if np.any((flat[keep] < 0) | (flat[keep] > 1)):
        bad = flat[keep][(flat[keep] < 0) | (flat[keep] > 1)]
        raise ParameterError(f"p-values must lie in [0, 1] (or be NaN, left out of the family); got {bad[:5].tolist()}")
    order = keep[np.argsort(flat[keep], kind="stable")]
    result = np.full(flat.shape, np.nan)
    if order.size:
        result[order] = np.minimum(adjust(flat[order]), 1.0)
    return result.reshape(p.shape)


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979), controlling the family-wise error rate.

    Parameters
    ----------
    pvalues : array_like
        P-values of any shape; the finite ones form the family, NaN entries are left out.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values, the shape of ``pvalues``: with the ``m`` finite p-values sorted,
        ``p_(i)`` becomes ``max_{j <= i} (m - j + 1) p_(j)``, at most 1; NaN where the input is.

    Raises
    ------
    ParameterError
        If a finite p-value is outside [0, 1].

    Examples
    --------
    >>> holm([0.01, 0.02, 0.03, 0.5]).round(6).tolist()
    [0.04, 0.06, 0.06, 0.5]
    """
    return _adjusted(pvalues, lambda ranked: np.maximum.accumulate((ranked.size - np.arange(ranked.size)) * ranked))


def benjamini_hochberg(pvalues) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (1995), controlling the false discovery rate.

    Parameters
    ----------
    pvalues : array_like
        P-values of any shape; the finite ones form the family, NaN entries are left out.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values (q-values), the shape of ``pvalues``: with the ``m`` finite p-values
        sorted, ``p_(i)`` becomes ``min_{j >= i} p_(j) m / j``, at most 1; NaN where the input is.
        ``benjamini_hochberg(p) <= q`` marks the tests the step-up rule rejects at level ``q``
        (the largest ``i`` with ``p_(i) <= q i / m`` and every smaller p-value).

    Raises
    ------
    ParameterError
        If a finite p-value is outside [0, 1].

    Examples
    --------
    >>> benjamini_hochberg([0.01, 0.02, 0.03, 0.5]).round(6).tolist()
    [0.04, 0.04, 0.04, 0.5]
    """
    return _adjusted(pvalues, lambda ranked: np.minimum.accumulate(
        (ranked * (ranked.size / np.arange(1, ranked.size + 1)))[::-1])[::-1])
