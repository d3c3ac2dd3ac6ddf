"""numba kernels: serial position curve, probability of nth recall and lag rank.

Same inputs as cmr/_lag_crp.py: ``recalls[t, o]`` are 1-based serial positions, -1 intrusions,
0 padding. Which recalls and transitions are valid (a serial position not recalled before in the
list) is psifr's rule, kept in one place, cmr/_transitions.py. No validation here.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from ._transitions import is_end, is_fresh, start_pool, start_trial, step_masked_transition, step_recall


@njit(**JIT)
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
    # lists of each length per group; possible[g, j] is then the lists of g longer than j
    n_lists = np.zeros((n_groups, n_positions), dtype=np.int64)
    for t in range(n_trials):
        g = group[t]
        length = list_length[t]
        start_trial(recalled, length)
        for o in range(n_outputs):
            if is_end(recalls, t, o):
                break
            if step_recall(recalls, t, o, recalled):  # a position's first valid recall: counted once
                actual[g, recalls[t, o] - 1] += 1
        n_lists[g, length - 1] += 1
    for g in range(n_groups):
        longer = 0
        for j in range(n_positions - 1, -1, -1):
            longer += n_lists[g, j]
            possible[g, j] = longer
    return actual, possible


@njit(**JIT)
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
        start_trial(recalled, length)
        op = 0
        for o in range(n_outputs):
            if is_end(recalls, t, o):
                break
            pos = recalls[t, o]
            if not is_fresh(pos, recalled):
                continue
            for j in range(1, length + 1):
                if not recalled[j]:
                    possible[g, op, j - 1] += 1
            actual[g, op, pos - 1] += 1
            step_recall(recalls, t, o, recalled)  # marks pos recalled
            op += 1
    return actual, possible


@njit(**JIT)
def rank_lags(recalls, list_length, group, n_groups, in_pool, code, allowed):
    """Sum and count of absolute-lag percentile ranks of valid transitions (psifr ``rank_lags``).

    For each valid transition, the absolute lag made is ranked among the absolute lags to all
    not-yet-recalled positions (ties get the average rank); rank 1 = the closest available,
    0 = the farthest. Transitions with a single possible item have no rank and are skipped.
    psifr's masks (cmr/masks.py ``TransitionMask``: ``in_pool``, ``code``, ``allowed``) restrict
    the transitions and the possible positions as in the lag-CRP.

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
        start_pool(recalled, length, in_pool, t)
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_masked_transition(recalls, t, o, recalled, code, allowed):
                continue
            prev = recalls[t, o]
            made = abs(recalls[t, o + 1] - prev)
            n_possible = 0
            n_less = 0
            n_equal = 0
            for j in range(1, length + 1):
                if not recalled[j] and allowed[code[t, prev - 1], code[t, j - 1]]:
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


@njit(**JIT)
def count_outputs_masked(recalls, list_length, group, n_groups, n_positions, in_pool, code, passes):
    """:func:`count_outputs` with psifr's pool (``item_query``) and a test of single items.

    Output positions count every valid recall of a pool item; a recall whose item fails the
    test (``passes[code]`` False) is not counted, and only items passing it are possible.

    Returns
    -------
    actual, possible : int64 (n_groups, n_positions, n_positions)
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    possible = np.zeros((n_groups, n_positions, n_positions), dtype=np.int64)
    recalled = np.zeros(n_positions + 2, dtype=np.bool_)
    for t in range(n_trials):
        g = group[t]
        length = list_length[t]
        start_pool(recalled, length, in_pool, t)
        op = -1
        for o in range(n_outputs):
            if is_end(recalls, t, o):
                break
            pos = recalls[t, o]
            if not is_fresh(pos, recalled):
                continue
            op += 1
            if not passes[code[t, pos - 1]]:
                recalled[pos] = True
                continue
            for j in range(1, length + 1):
                if not recalled[j] and passes[code[t, j - 1]]:
                    possible[g, op, j - 1] += 1
            actual[g, op, pos - 1] += 1
            recalled[pos] = True
    return actual, possible
