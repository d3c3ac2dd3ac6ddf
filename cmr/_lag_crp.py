"""numba kernels: lag-CRP transition counts with psifr's masking rule.

Inputs are recall matrices (``recalls[t, o]``: 1-based serial position, -1 intrusion, 0 padding),
int64 list lengths, and an int64 group index per trial (the unit the counts are pooled into).
The rule (psifr ``maskers.transitions_masker``): walk the outputs; a recall is *valid* when it is
a serial position not recalled before in this list (intrusions and repeats are not). A transition
from output o to o+1 counts when both are valid; ``possible`` then counts every lag from the
"from" position to each study position not yet recalled (the "to" position included).
No validation here: the public layer (cmr/lag_crp.py) checks and coerces inputs.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def count_lags(recalls, list_length, group, n_groups, max_lag):
    """Actual and possible transition counts per group.

    Parameters
    ----------
    recalls : int64 (n_trials, n_outputs)
    list_length : int64 (n_trials,)
    group : int64 (n_trials,)
        Group (0..n_groups-1) each trial's counts are added to.
    n_groups : int
    max_lag : int
        Counts cover lags -max_lag..max_lag (at least the longest list length - 1).

    Returns
    -------
    actual, possible : int64 (n_groups, 2 * max_lag + 1)
        Column ``max_lag + lag`` holds lag ``lag``.
    """
    n_trials, n_outputs = recalls.shape
    n_lags = 2 * max_lag + 1
    actual = np.zeros((n_groups, n_lags), dtype=np.int64)
    possible = np.zeros((n_groups, n_lags), dtype=np.int64)
    recalled = np.zeros(max_lag + 2, dtype=np.bool_)
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        recalled[: length + 1] = False
        for o in range(n_outputs - 1):
            prev = recalls[t, o]
            if prev == 0:
                break  # padding: no more recalls in this list
            if prev < 0 or recalled[prev]:
                continue  # intrusion or repeat: not a valid "from" recall
            recalled[prev] = True
            curr = recalls[t, o + 1]
            if curr <= 0 or recalled[curr]:
                continue  # to an intrusion, a repeat or padding
            actual[g, max_lag + curr - prev] += 1
            for j in range(1, length + 1):
                if not recalled[j]:
                    possible[g, max_lag + j - prev] += 1
    return actual, possible


@njit(cache=True, nogil=True)
def count_lags_compound(recalls, list_length, group, n_groups, max_lag):
    """Transition counts conditional on the lag of the previous transition.

    Two transitions form a pair when they are adjacent valid transitions (outputs o-1 -> o
    and o -> o+1), as psifr's ``sequences_masker(2, ...)``.

    Returns
    -------
    actual, possible : int64 (n_groups, 2 * max_lag + 1, 2 * max_lag + 1)
        Indexed ``[group, max_lag + previous_lag, max_lag + current_lag]``.
    """
    n_trials, n_outputs = recalls.shape
    n_lags = 2 * max_lag + 1
    actual = np.zeros((n_groups, n_lags, n_lags), dtype=np.int64)
    possible = np.zeros((n_groups, n_lags, n_lags), dtype=np.int64)
    recalled = np.zeros(max_lag + 2, dtype=np.bool_)
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        recalled[: length + 1] = False
        last_valid = -2  # output index of the last valid transition
        last_lag = 0
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
            lag = curr - prev
            if last_valid == o - 1:
                p = max_lag + last_lag
                actual[g, p, max_lag + lag] += 1
                for j in range(1, length + 1):
                    if not recalled[j]:
                        possible[g, p, max_lag + j - prev] += 1
            last_valid = o
            last_lag = lag
    return actual, possible


@njit(cache=True, nogil=True)
def count_lags_per_trial(recalls, list_length, max_lag):
    """Actual and possible counts of each trial separately: int64 (n_trials, 2*max_lag+1) each."""
    n_trials = recalls.shape[0]
    group = np.arange(n_trials)
    return count_lags(recalls, list_length, group, n_trials, max_lag)
