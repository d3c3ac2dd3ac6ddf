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


def _family(pvalues) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The p-values as float64, a NaN output of their shape and the flat indices of the finite ones, by p."""
    p = np.asarray(pvalues, dtype=np.float64)
    flat = p.ravel()
    keep = np.flatnonzero(np.isfinite(flat))
    if np.any((flat[keep] < 0) | (flat[keep] > 1)):
        bad = flat[keep][(flat[keep] < 0) | (flat[keep] > 1)]
        raise ParameterError(f"p-values must lie in [0, 1] (or be NaN, left out of the family); got {bad[:5].tolist()}")
    return p, np.full(p.shape, np.nan), keep[np.argsort(flat[keep], kind="stable")]


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
    p, out, order = _family(pvalues)
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p.ravel()[order]) if m else np.empty(0)
    result = out.ravel()
    result[order] = np.minimum(adjusted, 1.0)
    return result.reshape(p.shape)


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
    p, out, order = _family(pvalues)
    m = order.size
    ranks = np.arange(1, m + 1)
    adjusted = np.minimum.accumulate((p.ravel()[order] * (m / ranks))[::-1])[::-1] if m else np.empty(0)
    result = out.ravel()
    result[order] = np.minimum(adjusted, 1.0)
    return result.reshape(p.shape)
