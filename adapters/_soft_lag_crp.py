"""numba kernel: soft-transition lag counts (private; see icl_cmr.adapters.head_profiles)."""
from __future__ import annotations

import numpy as np
from numba import njit

from cmr.jit import JIT


@njit(**JIT)
def soft_lag_counts(from_pos, weights, unavailable, max_lag):
    """Soft ``actual`` and integer ``possible`` lag counts per unit.

    Parameters
    ----------
    from_pos : int64 (n_steps,)
        Serial position (1-based) of the item each step transitions from; <= 0 skips the step.
    weights : float64 (n_units, n_steps, list_length)
        Non-negative transition weights to each study position (attention or one-hot).
    unavailable : uint8 (n_steps, list_length)
        1 where a study position cannot be transitioned to at that step (already recalled,
        the "from" item itself, or beyond the list).
    max_lag : int
        Lags -max_lag..max_lag are counted (transitions beyond are dropped).

    Returns
    -------
    actual : float64 (n_units, 2 * max_lag + 1)
        Sum over steps of the weight on each lag, renormalised over available positions.
    possible : int64 (n_units, 2 * max_lag + 1)
        Number of steps at which each lag was available (steps with zero available mass skipped).
    """
    n_units, n_steps, length = weights.shape
    n_lags = 2 * max_lag + 1
    actual = np.zeros((n_units, n_lags))
    possible = np.zeros((n_units, n_lags), dtype=np.int64)
    for u in range(n_units):
        for s in range(n_steps):
            start = from_pos[s]
            if start <= 0:
                continue
            mass = 0.0
            for j in range(length):
                if unavailable[s, j] == 0:
                    mass += weights[u, s, j]
            if not mass > 0.0:
                continue
            for j in range(length):
                if unavailable[s, j] != 0:
                    continue
                lag = j + 1 - start
                if lag < -max_lag or lag > max_lag:
                    continue
                actual[u, lag + max_lag] += weights[u, s, j] / mass
                possible[u, lag + max_lag] += 1
    return actual, possible
