"""numba kernels: teacher-forced lag profiles of textbook CMR, built on the likelihood kernels.

Study an ``n``-item list, reinstate the start context with B_start, then force recall of
items 1..n in study order (each forced recall updates context with B_rec exactly as a real
recall does). After forced recall k the support ``a = M_cf c`` (floored as cymr does) over
*all* studied items gives the choice probabilities ``P_k = softmax(2 a / T)`` (no item is
excluded: attention can look at any earlier token). The profile at a lag is the mean over
steps of ``P_k(k + lag)`` and of ``log P_k(k + lag) = 2 a / T - logsumexp``, over the steps
where item k + lag exists, and of the support ``a`` itself. Item j is stored in M_cf under the
context after it was studied (cymr) or, for prefix matching, the context before it.
List-sized context (no pool units). No validation here.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .._numeric import means_by_count
from ..jit import JIT
from . import _kernels


@njit(**JIT)
def _context_keys(c_study, key_before):
    """Context each item is stored under in M_cf: after it was studied (cymr) or before (prefix matching)."""
    if not key_before:
        return c_study
    n = c_study.shape[0]
    keys = np.zeros_like(c_study)
    keys[0, n] = 1.0  # before item 1 the context is the start unit
    for i in range(1, n):
        for j in range(c_study.shape[1]):
            keys[i, j] = c_study[i - 1, j]
    return keys


@njit(**JIT)
def _textbook_one_point(params, n, max_lag, key_before, prob, log_prob, mean_support):
    n_lags = 2 * max_lag + 1
    c, c_study, unit_weight = _kernels.study_list(params, n, 0)
    _kernels.reinstate_start(params, c, unit_weight)
    m_cf = _kernels.mcf_after_study(params, _context_keys(c_study, key_before))
    nothing_recalled = np.zeros(n, dtype=np.bool_)
    support = np.zeros(n)
    c_in = np.zeros(n + 2)
    n_used = np.zeros(n_lags)
    scale = 2.0 / params[_kernels.TEMP]
    for k in range(n_lags):
        prob[k] = 0.0
        log_prob[k] = 0.0
        mean_support[k] = 0.0
    for step in range(n):
        _kernels.recall_update(params, step, c, c_study, unit_weight, c_in)
        _kernels.retrieval_support(m_cf, c, unit_weight, nothing_recalled, support)
        top = support.max()
        total = 0.0
        for i in range(n):
            total += math.exp(scale * (support[i] - top))
        log_norm = scale * top + math.log(total)
        for k in range(n_lags):
            j = step + k - max_lag
            if 0 <= j < n:
                log_p = scale * support[j] - log_norm
                prob[k] += math.exp(log_p)
                log_prob[k] += log_p
                mean_support[k] += support[j]
                n_used[k] += 1.0
    means_by_count(n_used, prob, log_prob, mean_support)


@njit(**JIT, parallel=True)
def textbook_teacher_forced_grid(param_sets, n, max_lag, key_before):
    """Teacher-forced profiles for many textbook-CMR parameter vectors (prange).

    Parameters
    ----------
    param_sets : float64 (n_points, 14)
        Parameter vectors in cmr.parameters.PARAMETER_NAMES order.

    key_before : bool
        Store item j in M_cf under the context before it was studied (prefix matching, as the
        paper's variant and an induction head do) instead of after it (cymr).

    Returns
    -------
    prob, log_prob, support : float64 (n_points, 2*max_lag+1)
        Mean choice probability, mean log probability and mean support ``a = M_cf c``
        (cymr's floor of 1e-6 included) by lag.
    """
    n_points = param_sets.shape[0]
    n_lags = 2 * max_lag + 1
    prob = np.empty((n_points, n_lags))
    log_prob = np.empty((n_points, n_lags))
    support = np.empty((n_points, n_lags))
    for p in prange(n_points):
        _textbook_one_point(param_sets[p], n, max_lag, key_before, prob[p], log_prob[p], support[p])
    return prob, log_prob, support
