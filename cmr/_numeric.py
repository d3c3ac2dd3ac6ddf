"""Small numerical helpers shared by the analyses: ratios of counts and SEMs across units."""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT

__all__ = ["ratio", "sem_across", "means_by_count"]


def ratio(actual, possible) -> np.ndarray:
    """``actual / possible`` as float64, NaN where ``possible == 0`` (no warning)."""
    actual = np.asarray(actual)
    possible = np.asarray(possible)
    out = np.full(np.broadcast(actual, possible).shape, np.nan)
    np.divide(actual, possible, out=out, where=possible > 0)
    return out


def sem_across(values) -> np.ndarray:
    """Standard error of the mean across axis 0, ignoring NaN; NaN where fewer than two values."""
    values = np.asarray(values, dtype=np.float64)
    valid = ~np.isnan(values)
    n = valid.sum(axis=0)
    mean = ratio(np.where(valid, values, 0.0).sum(axis=0), n)
    deviation = np.where(valid, values - mean, 0.0)
    variance = ratio((deviation**2).sum(axis=0), np.maximum(n - 1, 0))
    return np.where(n >= 2, np.sqrt(variance) / np.sqrt(np.maximum(n, 1)), np.nan)


@njit(**JIT)
def means_by_count(n_used, first, second, third):
    """Divide three running sums in place by ``n_used`` (the steps that reached each lag); NaN where none did.

    The last step of the teacher-forced kernels of both CMR variants.
    """
    for k in range(n_used.size):
        if n_used[k] > 0:
            first[k] /= n_used[k]
            second[k] /= n_used[k]
            third[k] /= n_used[k]
        else:
            first[k] = np.nan
            second[k] = np.nan
            third[k] = np.nan
