"""numba kernels: inter-response times and conditional response latency by lag.

Inputs as cmr/_crp.py, plus ``times[t, o]``: the recall-onset time of output o (NaN where
unknown). Which transitions count is cmr/_transitions.py (both recalls first-time correct).
No validation here: the public layer (cmr/timing.py) checks inputs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from ._transitions import is_end, start_trial, step_transition


@njit(**JIT)
def sum_latencies(recalls, list_length, group, n_groups, times, max_lag):
    """Sums and counts of inter-response times by output position and by lag.

    Returns
    -------
    by_output_sum : float64 (n_groups, n_outputs)
        Column k - 1 sums the time from the recall at output k - 1 to the one at output k.
    by_output_n : int64 (n_groups, n_outputs)
    by_lag_sum : float64 (n_groups, 2 * max_lag + 1)
    by_lag_n : int64 (n_groups, 2 * max_lag + 1)
    """
    n_trials, n_outputs = recalls.shape
    by_output_sum = np.zeros((n_groups, n_outputs))
    by_output_n = np.zeros((n_groups, n_outputs), dtype=np.int64)
    by_lag_sum = np.zeros((n_groups, 2 * max_lag + 1))
    by_lag_n = np.zeros((n_groups, 2 * max_lag + 1), dtype=np.int64)
    recalled = np.zeros(max_lag + 2, dtype=np.bool_)
    for t in range(n_trials):
        g = group[t]
        start_trial(recalled, list_length[t])
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_transition(recalls, t, o, recalled):
                continue
            interval = times[t, o + 1] - times[t, o]
            if interval != interval:
                continue  # a missing time
            by_output_sum[g, o + 1] += interval
            by_output_n[g, o + 1] += 1
            b = max_lag + recalls[t, o + 1] - recalls[t, o]
            by_lag_sum[g, b] += interval
            by_lag_n[g, b] += 1
    return by_output_sum, by_output_n, by_lag_sum, by_lag_n
