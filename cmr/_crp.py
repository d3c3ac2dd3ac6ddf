"""numba kernels: lag-CRP transition counts with psifr's masking rule.

Inputs are recall matrices (``recalls[t, o]``: 1-based serial position, -1 intrusion, 0 padding),
int64 list lengths, and an int64 group index per trial (the unit the counts are pooled into).
Which transitions count is psifr's rule (``maskers.transitions_masker``), kept in one place,
cmr/_transitions.py: a transition from output o to o+1 counts when both recalls are valid
(first-time correct recalls); ``possible`` then counts every lag from the "from" position to each
study position not yet recalled (the "to" position included).
No validation here: the public layer (cmr/lag_crp.py) checks and coerces inputs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from ._transitions import is_end, start_pool, start_trial, step_masked_transition, step_transition


@njit(**JIT)
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
        start_trial(recalled, length)
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_transition(recalls, t, o, recalled):
                continue
            prev = recalls[t, o]
            actual[g, max_lag + recalls[t, o + 1] - prev] += 1
            for j in range(1, length + 1):
                if not recalled[j]:
                    possible[g, max_lag + j - prev] += 1
    return actual, possible


@njit(**JIT)
def count_lags_compound(recalls, list_length, group, n_groups, max_lag, in_pool, code, allowed):
    """Transition counts conditional on the lag of the previous transition.

    Two transitions form a pair when they are adjacent valid transitions (outputs o-1 -> o
    and o -> o+1), as psifr's ``sequences_masker(2, ...)``; ``in_pool``, ``code`` and
    ``allowed`` are psifr's masks (cmr/masks.py), applied to both.

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
        start_pool(recalled, length, in_pool, t)
        last_valid = -2  # output index of the last valid transition
        last_lag = 0
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_masked_transition(recalls, t, o, recalled, code, allowed):
                continue
            prev = recalls[t, o]
            c_prev = code[t, prev - 1]
            lag = recalls[t, o + 1] - prev
            if last_valid == o - 1:
                p = max_lag + last_lag
                actual[g, p, max_lag + lag] += 1
                for j in range(1, length + 1):
                    if not recalled[j] and allowed[c_prev, code[t, j - 1]]:
                        possible[g, p, max_lag + j - prev] += 1
            last_valid = o
            last_lag = lag
    return actual, possible


@njit(**JIT)
def count_lags_per_trial(recalls, list_length, max_lag):
    """Actual and possible counts of each trial separately: int64 (n_trials, 2*max_lag+1) each."""
    n_trials = recalls.shape[0]
    group = np.arange(n_trials)
    return count_lags(recalls, list_length, group, n_trials, max_lag)


@njit(**JIT)
def count_lags_masked(recalls, list_length, group, n_groups, max_lag, labels, in_pool, code, allowed, count_unique):
    """:func:`count_lags` with psifr's options: lag labels, item pool, transition test, unique counting.

    Parameters
    ----------
    labels : int64 (n_trials, n_study)
        Label of each studied item the lag is taken on (psifr's ``lag_key``; serial positions
        for the plain lag-CRP). Every lag between two labels must lie in -max_lag..max_lag.
    in_pool, code, allowed
        The masks of cmr/masks.py (``TransitionMask``).
    count_unique : bool
        Count each possible lag once per transition, however many items have it.

    Returns
    -------
    actual, possible : int64 (n_groups, 2 * max_lag + 1)
    """
    n_trials, n_outputs = recalls.shape
    n_lags = 2 * max_lag + 1
    actual = np.zeros((n_groups, n_lags), dtype=np.int64)
    possible = np.zeros((n_groups, n_lags), dtype=np.int64)
    recalled = np.zeros(labels.shape[1] + 2, dtype=np.bool_)
    seen = np.full(n_lags, -1, dtype=np.int64)  # transition stamp per lag, for count_unique
    stamp = 0
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        start_pool(recalled, length, in_pool, t)
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_masked_transition(recalls, t, o, recalled, code, allowed):
                continue
            prev = recalls[t, o] - 1
            c_prev = code[t, prev]
            origin = max_lag - labels[t, prev]
            actual[g, origin + labels[t, recalls[t, o + 1] - 1]] += 1
            stamp += 1
            for j in range(length):
                if recalled[j + 1] or not allowed[c_prev, code[t, j]]:
                    continue
                b = origin + labels[t, j]
                if count_unique:
                    if seen[b] == stamp:
                        continue
                    seen[b] = stamp
                possible[g, b] += 1
    return actual, possible


@njit(**JIT)
def count_input_pairs(recalls, list_length, group, n_groups, n_positions, in_pool, code, allowed):
    """Transition counts by the serial positions of both items (psifr ``count_input_pairs``).

    Returns
    -------
    actual, possible : int64 (n_groups, n_positions, n_positions)
        Indexed ``[group, previous - 1, current - 1]``.
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    possible = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    recalled = np.zeros(n_positions + 2, dtype=np.bool_)
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        start_pool(recalled, length, in_pool, t)
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_masked_transition(recalls, t, o, recalled, code, allowed):
                continue
            prev = recalls[t, o] - 1
            c_prev = code[t, prev]
            actual[g, prev, recalls[t, o + 1] - 1] += 1
            for j in range(length):
                if not recalled[j + 1] and allowed[c_prev, code[t, j]]:
                    possible[g, prev, j] += 1
    return actual, possible
