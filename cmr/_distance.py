"""numba kernels: transitions by item distance (semantic CRP, distance ranks), psifr's rules.

Inputs as cmr/_crp.py, plus ``index[t, j]``: the row of studied item j in the square
``distances`` matrix, and the masks of cmr/masks.py. Which recalls and transitions count is
cmr/_transitions.py. No validation here: the public layer (cmr/distance.py) checks inputs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from ._transitions import is_end, start_pool, step_masked_transition, step_transition


@njit(**JIT)
def count_distance(recalls, list_length, group, n_groups, index, cut_bin, histogram_bin, in_pool, code, allowed,
                   n_bins, count_unique):
    """Transitions made and possible per distance bin (psifr ``count_distance``).

    ``cut_bin[a, b]`` is the bin of the distance between items a and b in right-closed bins
    (pandas.cut, as psifr bins actual and possible transitions), ``histogram_bin`` the same in
    left-closed bins (numpy.histogram, as psifr bins possible ones with ``count_unique``; only
    read then); -1 outside. With ``count_unique`` a bin counts once per transition however
    many items fall in it.

    Returns
    -------
    actual, possible : int64 (n_groups, n_bins)
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros((n_groups, n_bins), dtype=np.int64)
    possible = np.zeros((n_groups, n_bins), dtype=np.int64)
    recalled = np.zeros(index.shape[1] + 2, dtype=np.bool_)
    seen = np.full(n_bins, -1, dtype=np.int64)
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
            curr = recalls[t, o + 1] - 1
            c_prev = code[t, prev]
            row = index[t, prev]
            b = cut_bin[row, index[t, curr]]
            if b >= 0:
                actual[g, b] += 1
            stamp += 1
            for j in range(length):
                if recalled[j + 1] or not allowed[c_prev, code[t, j]]:
                    continue
                if count_unique:
                    b = histogram_bin[row, index[t, j]]
                    if b < 0 or seen[b] == stamp:
                        continue
                    seen[b] = stamp
                else:
                    b = cut_bin[row, index[t, j]]
                    if b < 0:
                        continue
                possible[g, b] += 1
    return actual, possible


@njit(**JIT, inline="always")
def _rank_among(distances, index, row, made, recalled, length, allowed, code, t, testers, exclude_testers):
    """1 - percentile rank of distance ``made`` among the available items' distances from ``row``.

    An available item j counts when the test allows the transition from every position in
    ``testers`` (1-based) to it, and, with ``exclude_testers``, when it is not one of them.
    Ties take the average rank (scipy.stats.rankdata, as psifr); NaN when a single item counts.
    """
    n_possible = 0
    n_less = 0
    n_equal = 0
    for j in range(length):
        if recalled[j + 1]:
            continue
        keep = True
        for w in range(testers.size):
            if (exclude_testers and testers[w] == j + 1) or not allowed[code[t, testers[w] - 1], code[t, j]]:
                keep = False
        if not keep:
            continue
        d = distances[row, index[t, j]]
        n_possible += 1
        if d < made:
            n_less += 1
        elif d == made:
            n_equal += 1
    if n_possible < 2:
        return np.nan
    return 1.0 - (n_less + (n_equal - 1) / 2.0) / (n_possible - 1)


@njit(**JIT)
def rank_distance(recalls, list_length, group, n_groups, index, distances, in_pool, code, allowed, max_shift):
    """Sum and count of distance percentile ranks relative to the last ``max_shift`` items recalled.

    Column ``max_shift - k`` ranks the distance from the item recalled k transitions before the
    current one (psifr ``rank_distance_shifted``; ``max_shift = 1`` is ``rank_distance``).
    Only runs of ``max_shift`` adjacent valid transitions count, and the possible items are
    those of the last transition (psifr ``sequences_masker``).

    Returns
    -------
    rank_sum : float64 (n_groups, max_shift)
    n_ranked : int64 (n_groups, max_shift)
    """
    n_trials, n_outputs = recalls.shape
    rank_sum = np.zeros((n_groups, max_shift))
    n_ranked = np.zeros((n_groups, max_shift), dtype=np.int64)
    recalled = np.zeros(index.shape[1] + 2, dtype=np.bool_)
    history = np.zeros(max_shift, dtype=np.int64)  # "from" positions of the current run, newest last
    tester = np.zeros(1, dtype=np.int64)  # the test runs from the last transition's "from" item
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        start_pool(recalled, length, in_pool, t)
        last_valid = -2
        run = 0
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_masked_transition(recalls, t, o, recalled, code, allowed):
                continue
            prev = recalls[t, o] - 1
            curr = recalls[t, o + 1] - 1
            run = run + 1 if last_valid == o - 1 else 1
            last_valid = o
            history[:-1] = history[1:]
            history[-1] = prev
            tester[0] = prev + 1
            if run < max_shift:
                continue
            for k in range(1, max_shift + 1):
                source = history[max_shift - k]
                row = index[t, source]
                rank = _rank_among(distances, index, row, distances[row, index[t, curr]], recalled, length, allowed,
                                   code, t, tester, False)
                if rank == rank:
                    rank_sum[g, max_shift - k] += rank
                    n_ranked[g, max_shift - k] += 1
    return rank_sum, n_ranked


@njit(**JIT)
def rank_distance_window(recalls, list_length, group, n_groups, index, distances, in_pool, code, allowed,
                         window_lags, exclude_prev_window):
    """Distance ranks relative to the items at ``window_lags`` around the previous item (psifr ``rank_distance_window``).

    A transition counts when every window position exists, the current item is not in the
    window and (with ``exclude_prev_window``) the recall before the previous one is not in it;
    window items are never possible.

    Returns
    -------
    rank_sum : float64 (n_groups, n_window)
    n_ranked : int64 (n_groups, n_window)
    asym_sum : float64 (n_groups,)
        Sum over transitions of rank[last lag] - rank[first lag], where both are defined.
    n_asym : int64 (n_groups,)
    """
    n_trials, n_outputs = recalls.shape
    n_window = window_lags.size
    rank_sum = np.zeros((n_groups, n_window))
    n_ranked = np.zeros((n_groups, n_window), dtype=np.int64)
    asym_sum = np.zeros(n_groups)
    n_asym = np.zeros(n_groups, dtype=np.int64)
    recalled = np.zeros(index.shape[1] + 2, dtype=np.bool_)
    window = np.zeros(n_window, dtype=np.int64)
    ranks = np.zeros(n_window)
    for t in range(n_trials):
        length = list_length[t]
        g = group[t]
        start_pool(recalled, length, in_pool, t)
        for o in range(n_outputs - 1):
            if is_end(recalls, t, o):
                break
            if not step_transition(recalls, t, o, recalled):
                continue
            prev = recalls[t, o]
            curr = recalls[t, o + 1]
            outside = False
            for w in range(n_window):
                window[w] = prev + window_lags[w]
                if window[w] < 1 or window[w] > length:
                    outside = True
            if outside:
                continue
            skip = False
            for w in range(n_window):
                if window[w] == curr or (exclude_prev_window and o > 0 and window[w] == recalls[t, o - 1]):
                    skip = True
                if not allowed[code[t, window[w] - 1], code[t, curr - 1]]:
                    skip = True
            if skip:
                continue
            for w in range(n_window):
                row = index[t, window[w] - 1]
                ranks[w] = _rank_among(distances, index, row, distances[row, index[t, curr - 1]], recalled, length,
                                       allowed, code, t, window, True)
                if ranks[w] == ranks[w]:
                    rank_sum[g, w] += ranks[w]
                    n_ranked[g, w] += 1
            difference = ranks[n_window - 1] - ranks[0]
            if difference == difference:
                asym_sum[g] += difference
                n_asym[g] += 1
    return rank_sum, n_ranked, asym_sum, n_asym


@njit(**JIT)
def bin_distances(matrix, edges, left_closed):
    """Bin of every distance, -1 outside or NaN, int16.

    Right-closed bins ``(edges[k], edges[k+1]]`` as pandas.cut, or with ``left_closed``
    ``[edges[k], edges[k+1])`` with the last one closed, as numpy.histogram.
    """
    n_bins = edges.size - 1
    out = np.full(matrix.shape, -1, dtype=np.int16)
    for a in range(matrix.shape[0]):
        for b in range(matrix.shape[1]):
            value = matrix[a, b]
            if not (edges[0] <= value <= edges[n_bins]):
                continue  # outside, or NaN
            lo = 0  # bisection: lo = number of edges < value
            hi = n_bins + 1
            while lo < hi:
                mid = (lo + hi) >> 1
                if edges[mid] < value:
                    lo = mid + 1
                else:
                    hi = mid
            if left_closed:
                at_or_below = lo + 1 if lo <= n_bins and edges[lo] == value else lo
                out[a, b] = min(at_or_below - 1, n_bins - 1)
            elif lo > 0:
                out[a, b] = lo - 1
    return out
