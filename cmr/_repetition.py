"""numba kernels of the repetition analyses (cmr/repetition.py).

Inputs: ``recalls[t, o]`` first-presentation serial positions (1-based), -1 intrusions, 0 padding;
``pres[t, p]`` the first-presentation position of the item studied at position p + 1, 0 padding.
A recall that is an intrusion or an item recalled before in its list is skipped: the next
transition is from the last recall that was neither (jaxcmr's rule for repeated recalls). Every
presentation of a recalled item leaves the pool of available positions. No validation here.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT


@njit(**JIT)
def _occurrences(pres_row, length, size):
    """Positions (1-based) of the first ``size`` presentations of each item (by item index =
    first position - 1), 0 padded, and how many presentations each item has in all."""
    n_pos = pres_row.size
    occ = np.zeros((n_pos, size), dtype=np.int64)
    count = np.zeros(n_pos, dtype=np.int64)
    for p in range(length):
        item = pres_row[p] - 1
        if count[item] < size:
            occ[item, count[item]] = p + 1
        count[item] += 1
    return occ, count


@njit(**JIT)
def rep_crp_counts(recalls, pres, lengths, group, n_groups, min_lag, size):
    """Lag-CRP counts centred on each of the first ``size`` presentations of the previous recall's
    item, for transitions from items whose first two presentations lie more than ``min_lag``
    positions apart (jaxcmr ``repcrp``).

    Returns
    -------
    actual, possible : int64 (n_groups, size, 2 * n_pos - 1); lag index = lag + n_pos - 1
    """
    n_trials, n_out = recalls.shape
    n_pos = pres.shape[1]
    actual = np.zeros((n_groups, size, 2 * n_pos - 1), dtype=np.int64)
    possible = np.zeros((n_groups, size, 2 * n_pos - 1), dtype=np.int64)
    for t in range(n_trials):
        g = group[t]
        length = lengths[t]
        occ, count = _occurrences(pres[t], length, size)
        available = np.zeros(n_pos, dtype=np.bool_)
        available[:length] = True
        prev = -1
        for o in range(n_out):
            r = recalls[t, o]
            if r == 0:
                break
            if r < 0 or not available[r - 1]:
                continue
            item = r - 1
            if prev >= 0 and count[prev] >= 2 and occ[prev, 1] - occ[prev, 0] > min_lag:
                for k in range(size):
                    origin = occ[prev, k]
                    if origin == 0:
                        continue
                    for j in range(size):
                        if occ[item, j] > 0:
                            actual[g, k, occ[item, j] - origin + n_pos - 1] += 1
                    for q in range(length):
                        if available[q]:
                            possible[g, k, q + 1 - origin + n_pos - 1] += 1
            for p in range(length):  # every presentation of the item leaves the pool
                if pres[t, p] == r:
                    available[p] = False
            prev = item
    return actual, possible


@njit(**JIT)
def neighbor_crp_counts(recalls, pres, lengths, group, n_groups, min_lag, use_i2j, use_j2i, use_lag2):
    """Repetition-neighbour CRP counts (jaxcmr ``repneighborcrp``): for an item studied at i and j
    (j - i > ``min_lag``), a transition from j+1 (and j+2 with ``use_lag2``) is scored by its lag
    from i, and one from i+1 (i+2) by its lag from j; lag +1 from i is i+1, from j is j+1.

    Returns
    -------
    actual, possible : int64 (n_groups, 2 * n_pos - 1); lag index = lag + n_pos - 1
    """
    n_trials, n_out = recalls.shape
    n_pos = pres.shape[1]
    actual = np.zeros((n_groups, 2 * n_pos - 1), dtype=np.int64)
    possible = np.zeros((n_groups, 2 * n_pos - 1), dtype=np.int64)
    for t in range(n_trials):
        g = group[t]
        length = lengths[t]
        occ, count = _occurrences(pres[t], length, 2)
        # centre[p, m]: the presentation whose lags a transition from position p + 1 is scored by
        centre = np.zeros((n_pos + 3, 4), dtype=np.int64)
        for item in range(length):
            i, j = occ[item, 0], occ[item, 1]
            if count[item] < 2 or j - i <= min_lag:
                continue
            if use_j2i:
                centre[j, 0] = i  # row index = position - 1: row j is position j + 1
                if use_lag2:
                    centre[j + 1, 1] = i
            if use_i2j:
                centre[i, 2] = j
                if use_lag2:
                    centre[i + 1, 3] = j
        available = np.zeros(n_pos, dtype=np.bool_)
        available[:length] = True
        prev = -1
        seen_actual = np.zeros(2 * n_pos - 1, dtype=np.bool_)
        seen_possible = np.zeros(2 * n_pos - 1, dtype=np.bool_)
        for o in range(n_out):
            r = recalls[t, o]
            if r == 0:
                break
            if r < 0 or not available[r - 1]:
                continue
            item = r - 1
            if prev >= 0:
                seen_actual[:] = False
                seen_possible[:] = False
                scored = False
                for a in range(2):
                    origin = occ[prev, a]
                    if origin == 0:
                        continue
                    for m in range(4):
                        c = centre[origin - 1, m]
                        if c == 0:
                            continue
                        scored = True
                        for b in range(2):
                            if occ[item, b] > 0:
                                seen_actual[occ[item, b] - c + n_pos - 1] = True
                        for q in range(length):
                            if available[q]:
                                seen_possible[q + 1 - c + n_pos - 1] = True
                if scored:
                    for k in range(2 * n_pos - 1):
                        actual[g, k] += seen_actual[k]
                        possible[g, k] += seen_possible[k]
            for p in range(length):
                if pres[t, p] == r:
                    available[p] = False
            prev = item
    return actual, possible


@njit(**JIT)
def spacing_counts(recalls, pres, lengths, group, n_groups, max_spacing):
    """Items presented and recalled by the distance between their first two presentations
    (jaxcmr ``rpl``): bin 0 once-presented, bin d a distance of d positions (1 = massed),
    bin ``max_spacing + 1`` a longer distance.

    Returns
    -------
    recalled, presented : int64 (n_groups, max_spacing + 2)
    """
    n_trials, n_out = recalls.shape
    n_pos = pres.shape[1]
    recalled = np.zeros((n_groups, max_spacing + 2), dtype=np.int64)
    presented = np.zeros((n_groups, max_spacing + 2), dtype=np.int64)
    for t in range(n_trials):
        g = group[t]
        occ, count = _occurrences(pres[t], lengths[t], 2)
        hit = np.zeros(n_pos + 1, dtype=np.bool_)
        for o in range(n_out):
            r = recalls[t, o]
            if r == 0:
                break
            if r > 0:
                hit[r] = True
        for item in range(lengths[t]):
            if count[item] == 0:
                continue
            b = 0 if count[item] < 2 else min(occ[item, 1] - occ[item, 0], max_spacing + 1)
            presented[g, b] += 1
            if hit[item + 1]:
                recalled[g, b] += 1
    return recalled, presented


# --- serial position curve and nth recall of lists with repeats (cmr.spc, cmr.pnr, cmr.pfr) ------------


def repeated_spc_counts(recalls, pres, group, n_groups):
    """SPC counts when items repeat: a recalled item counts as recalled at every one of its
    presentations (so a list's positions of one item are recalled together), each presentation as
    studied. Returns actual, possible int64 (n_groups, n_pos)."""
    n_trials, n_pos = pres.shape
    recalled = np.zeros((n_trials, n_pos + 1), dtype=bool)
    rows, cols = np.nonzero(recalls > 0)
    recalled[rows, recalls[rows, cols]] = True
    recalled[:, 0] = False
    studied = pres > 0
    actual = np.zeros((n_groups, n_pos), dtype=np.int64)
    possible = np.zeros((n_groups, n_pos), dtype=np.int64)
    np.add.at(actual, group, np.take_along_axis(recalled, pres, axis=1).astype(np.int64))
    np.add.at(possible, group, studied.astype(np.int64))
    return actual, possible


def repeated_pnr_counts(recalls, pres, group, n_groups):
    """PNR counts when items repeat: the n-th valid recall (intrusions and items recalled before
    skipped, as psifr) counts at every presentation of its item, and every presentation of an item
    not yet recalled is possible (jaxcmr's convention: presentations [1, 2, 1] and first recall
    [1] give PFR [1, 0, 1]). Returns actual, possible int64 (n_groups, n_pos, n_pos)."""
    n_trials, n_pos = pres.shape
    seen = np.zeros((n_trials, n_pos + 1), dtype=bool)
    seen[:, 0] = True  # padding is never possible
    nth = np.zeros(n_trials, dtype=np.int64)
    actual = np.zeros((n_groups, n_pos, n_pos), dtype=np.int64)
    possible = np.zeros((n_groups, n_pos, n_pos), dtype=np.int64)
    rows = np.arange(n_trials)
    for o in range(recalls.shape[1]):  # vectorised over trials; outputs are few
        r = recalls[:, o]
        valid = (r > 0) & ~seen[rows, np.maximum(r, 0)] & (nth < n_pos)
        t = rows[valid]
        if t.size == 0:
            continue
        open_ = ~np.take_along_axis(seen[t], pres[t], axis=1)
        hit = pres[t] == r[t][:, None]
        np.add.at(actual, (group[t], nth[t]), hit.astype(np.int64))
        np.add.at(possible, (group[t], nth[t]), open_.astype(np.int64))
        seen[t, r[t]] = True
        nth[t] += 1
    return actual, possible
