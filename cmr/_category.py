"""numba kernels: category CRP and category clustering (LBC, ARC), psifr's rules.

Inputs as cmr/_crp.py, plus ``category[t, j]``: an int64 code per studied item (-1 for a
missing category, equal to nothing). Which recalls and transitions count is cmr/_transitions.py.
No validation here: the public layer (cmr/category.py) checks and coerces inputs.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from ._transitions import is_end, start_pool, start_trial, step_masked_transition, step_recall


@njit(**JIT)
def count_category(recalls, list_length, group, n_groups, category, in_pool, code, allowed):
    """Within-category transitions made, where one was possible (psifr ``count_category``), and expected by chance.

    ``expected`` adds, for each transition counted in ``possible``, the share of the items
    still available to it (not yet recalled, in the pool, passing the test from the "from"
    item; the "to" item included) that share the "from" item's category: the within-category
    transitions a recall choosing uniformly among the available items would make on average.

    Returns
    -------
    actual, possible : int64 (n_groups,)
    expected : float64 (n_groups,)
    """
    n_trials, n_outputs = recalls.shape
    actual = np.zeros(n_groups, dtype=np.int64)
    possible = np.zeros(n_groups, dtype=np.int64)
    expected = np.zeros(n_groups, dtype=np.float64)
    recalled = np.zeros(category.shape[1] + 2, dtype=np.bool_)
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
            cat = category[t, prev]
            if cat < 0:
                continue  # a missing category equals nothing
            if category[t, curr] == cat:
                actual[g] += 1
            n_available = 0
            n_same = 0
            for j in range(length):
                if not recalled[j + 1] and allowed[c_prev, code[t, j]]:
                    n_available += 1
                    if category[t, j] == cat:
                        n_same += 1
            if n_same > 0:
                possible[g] += 1
                expected[g] += n_same / n_available
    return actual, possible, expected


@njit(**JIT)
def cluster_lists(recalls, list_length, category, n_categories):
    """List-based clustering (LBC) and adjusted ratio of clustering (ARC) of each list.

    As psifr's ``category_clustering``: intrusions and repeats are removed from the recall
    sequence first, so two correct recalls around an intrusion are adjacent. LBC (Stricker et
    al. 2002) = observed - (r - 1)(m - 1)/(n - 1); ARC (Roenker et al. 1971) =
    (observed - expected) / (maximum - expected), NaN where maximum == expected.

    Returns
    -------
    lbc, arc : float64 (n_trials,)
    """
    n_trials, n_outputs = recalls.shape
    lbc = np.zeros(n_trials)
    arc = np.zeros(n_trials)
    recalled = np.zeros(category.shape[1] + 2, dtype=np.bool_)
    in_study = np.zeros(n_categories, dtype=np.int64)
    in_recall = np.zeros(n_categories, dtype=np.int64)
    for t in range(n_trials):
        length = list_length[t]
        start_trial(recalled, length)
        in_study[:] = 0
        in_recall[:] = 0
        for j in range(length):
            in_study[category[t, j]] += 1
        n_unique = 0
        for c in range(n_categories):
            if in_study[c] > 0:
                n_unique += 1
        r = 0
        observed = 0
        last = -1
        for o in range(n_outputs):
            if is_end(recalls, t, o):
                break
            if not step_recall(recalls, t, o, recalled):
                continue
            cat = category[t, recalls[t, o] - 1]
            if r > 0 and cat == last:
                observed += 1
            in_recall[cat] += 1
            last = cat
            r += 1
        m = length / n_unique
        lbc[t] = observed - ((r - 1) * (m - 1)) / (length - 1)
        expected = 0.0
        n_recalled_categories = 0
        for c in range(n_categories):
            if in_recall[c] > 0:
                expected += (in_recall[c] * (in_recall[c] - 1)) / r
                n_recalled_categories += 1
        maximum = r - n_recalled_categories
        if maximum == expected:
            arc[t] = np.nan
        else:
            arc[t] = (observed - expected) / (maximum - expected)
    return lbc, arc
