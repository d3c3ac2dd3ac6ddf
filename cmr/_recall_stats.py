"""numba kernels: serial position curve, probability of nth recall and lag rank.

Same inputs and masking rule as cmr/_lag_crp.py: ``recalls[t, o]`` are 1-based serial positions,
-1 intrusions, 0 padding; a recall is valid when it is a serial position not recalled before in
the list. No validation here.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_recalled(recalls, list_length, group, n_groups, n_positions):
    """Serial position curve counts: lists where each position was recalled / was studied.

    Returns
    -------
    actual, possible : int64 (n_groups, n_positions)
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros((n_groups, n_positions), dtype=np.int64)
    possible = np.zeros((n_groups, n_positions), dtype=np.int64)
    recalled = np.zeros(n_positions + 1, dtype=np.bool_)
    for t in range(n_trials):
        g = group[t]
        length = list_length[t]
        recalled[:] = False
        for o in range(n_outputs):
            pos = recalls[t, o]
            if pos == 0:
                break
            if pos > 0:
                recalled[pos] = True
        for j in range(length):
            possible[g, j] += 1
            if recalled[j + 1]:
                actual[g, j] += 1
    return actual, possible


@njit(cache=True, nogil=True)
def count_outputs(recalls, list_length, group, n_groups, n_positions):
    """Probability-of-nth-recall counts (psifr ``outputs_masker``).

    Output positions count valid recalls only (intrusions and repeats are skipped and do not
    advance the output count). At the n-th valid recall, ``possible`` counts every position
    not yet recalled (the recalled one included) and ``actual`` the recalled position.

    Returns
    -------
    actual, possible : int64 (n_groups, n_positions, n_positions)
        Indexed ``[group, output - 1, serial_position - 1]``.
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    possible = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    recalled = np.zeros(n_positions + 1, dtype=np.bool_)
    for t in range(n_trials):
        g = group[t]
        length = list_length[t]
        recalled[:] = False
        op = 0
        for o in range(n_outputs):
            pos = recalls[t, o]
            if pos == 0:
                break
            if pos < 0 or recalled[pos]:
                continue
            for j in range(1, length + 1):
                if not recalled[j]:
                    possible[g, op, j - 1] += 1
            actual[g, op, pos - 1] += 1
            recalled[pos] = True
            op += 1
    return actual, possible


@njit(cache=True, nogil=True)
def rank_lags(recalls, list_length, group, n_groups):
    """Sum and count of absolute-lag percentile ranks of valid transitions (psifr ``rank_lags``).

    For each valid transition, the absolute lag made is ranked among the absolute lags to all
    not-yet-recalled positions (ties get the average rank); rank 1 = the closest available,
    0 = the farthest. Transitions with a single possible item have no rank and are skipped.

    Returns
    -------
    rank_sum : float64 (n_groups,)
    n_ranked : int64 (n_groups,)
    """
    n_trials, n_outputs = recalls.shape
    rank_sum = np.zeros(n_groups, dtype=np.float64)
    n_ranked = np.zeros(n_groups, dtype=np.int64)
    longest = 1
    for t in range(n_trials):
        longest = max(longest, list_length[t])
    recalled = np.zeros(longest + 1, dtype=np.bool_)
    for t in range(n_trials):
        g = group[t]
        length = list_length[t]
        recalled[: length + 1] = False
        for o in range(n_outputs - 1):
            prev = recalls[t, o]
            if prev == 0:
                break
            if prev < 0 or recalled[prev]:
                continue
            recalled[prev] = True
            curr = recalls[t, o + 1]
            if curr <= 0 or recalled[curr]:
                continue
            made = abs(curr - prev)
            n_possible = 0
            n_less = 0
            n_equal = 0
            for j in range(1, length + 1):
                if not recalled[j]:
                    d = abs(j - prev)
                    n_possible += 1
                    if d < made:
                        n_less += 1
                    elif d == made:
                        n_equal += 1
            if n_possible < 2:
                continue
            percentile = (n_less + (n_equal - 1) / 2.0) / (n_possible - 1)
            rank_sum[g] += 1.0 - percentile
            n_ranked[g] += 1
    return rank_sum, n_ranked
