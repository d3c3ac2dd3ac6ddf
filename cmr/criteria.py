"""AIC and BIC, one formula for every fit: likelihood fits of recall and least-squares fits of profiles.

:func:`aic_bic` takes a maximised log-likelihood, the number of free parameters
``k`` and the number of data points ``n``::

    AIC = 2k - 2 logL        BIC = k ln(n) - 2 logL        (Akaike 1974; Schwarz 1978)

A least-squares fit passes its Gaussian log-likelihood (errors of unknown variance, variance at
its maximum-likelihood value ``RSS/n``, additive constants dropped) from
:func:`least_squares_logl`: ``logL = -(n/2) ln(RSS/n)``, so ``AIC = n ln(RSS/n) + 2k``
(Burnham & Anderson 2002, section 2.2). Criteria of fits to the same data compare; the
dropped constant is the same for every model of those data.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["aic_bic", "least_squares_logl"]


def _as_float(values):
    """float64 values, leaving xarray objects (possibly dask-backed) to compute lazily."""
    if isinstance(values, (xr.DataArray, xr.Dataset)):
        return values
    return np.asarray(values, dtype=np.float64)


def aic_bic(logl, k, n):
    """AIC ``2k - 2 logL`` and BIC ``k ln(n) - 2 logL`` of maximum-likelihood fits.

    Parameters
    ----------
    logl : float or array_like of float (or xarray.DataArray)
        Maximised log-likelihood of each fit.
    k : int or array_like of int
        Free parameters of each fit (broadcast against ``logl``).
    n : int or array_like of int
        Data points of each fit (scored recall events, or lags of a profile).

    Returns
    -------
    aic, bic : float64, the broadcast shape of the arguments (xarray in, xarray out)

    Examples
    --------
    A least-squares fit of 4 parameters to 11 lags with residual sum of squares 0.2:

    >>> aic, bic = cmr.aic_bic(cmr.least_squares_logl(0.2, 11), 4, 11)
    """
    logl = _as_float(logl)
    return 2.0 * k - 2.0 * logl, k * np.log(_as_float(n)) - 2.0 * logl


def least_squares_logl(rss, n):
    """The Gaussian log-likelihood ``-(n/2) ln(RSS/n)`` of a least-squares fit, up to a constant.

    Parameters
    ----------
    rss : float or array_like of float (or xarray.DataArray)
        Residual sum of squares; floored at the smallest positive float64 (a perfect fit gets a
        large, finite log-likelihood).
    n : int
        Data points of the fit.

    Returns
    -------
    float64, the shape of ``rss`` (xarray in, xarray out)
    """
    rss = np.maximum(_as_float(rss), np.finfo(np.float64).tiny)
    return -0.5 * (n * np.log(rss / n))
