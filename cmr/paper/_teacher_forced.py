"""numba kernels: teacher-forced lag profiles of the paper's simplified CMR.

Same state layout as cmr/paper/_kernels.py: items 0..n_items-1 (one-hot), weights
``M[i, j] = a**(j-i-1)`` for ``j > i`` with ``a = 1 - beta_enc``. No validation here.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numeric import means_by_count
from ..jit import JIT


@njit(**JIT)
def _teacher_forced_one_point(a, beta_rec, gamma, n_items, max_lag, floor, t, support, prob, log_prob, zero):
    """Teacher-forced lag profile of one parameter point.

    The context starts one-hot at item 0 (the study's start-state convention); at step k
    (k >= 1) item k is "recalled" and context moves towards its input
    ``((1-g) f_k + g M f_k) / norm`` with rate ``beta_rec``. At every step the support
    ``F = M^T t`` over the studied items is normalised to probabilities P_k; the profile is
    the mean over steps of P_k(k + lag), and of log(max(P_k, floor)), over the steps where
    item k + lag exists. Steps with no support on any studied item are skipped.
    Writes ``prob``, ``log_prob`` and ``zero`` (2*max_lag+1,): ``zero`` is the share of the
    steps at which the probability at that lag is exactly 0 (where the floor enters the log).
    """
    n_lags = 2 * max_lag + 1
    for i in range(n_items):
        t[i] = 0.0
    t[0] = 1.0
    back_sq = 1.0  # sum_{m<k} a**(2m), |M f_k|^2, for k = 1
    n_used = np.zeros(n_lags)
    for k in range(n_lags):
        prob[k] = 0.0
        log_prob[k] = 0.0
        zero[k] = 0.0
    for step in range(n_items):
        if step > 0:
            norm_in = np.sqrt((1.0 - gamma) ** 2 + gamma * gamma * back_sq)
            back_sq = back_sq * a * a + 1.0
            keep = 1.0 - beta_rec
            back = beta_rec * gamma / norm_in
            power = 1.0
            for i in range(step - 1, -1, -1):
                t[i] = keep * t[i] + back * power
                power *= a
            t[step] = keep * t[step] + beta_rec * (1.0 - gamma) / norm_in
            norm = 0.0
            for i in range(step + 1):
                norm += t[i] * t[i]
            norm = np.sqrt(norm)
            for i in range(step + 1):
                t[i] /= norm
        value = 0.0
        total = 0.0
        for j in range(n_items):
            support[j] = value
            total += value
            value = a * value + t[j]
        if total <= 0.0:
            continue
        for k in range(n_lags):
            j = step + k - max_lag
            if 0 <= j < n_items:
                p = support[j] / total
                prob[k] += p
                log_prob[k] += np.log(max(p, floor))
                if p <= 0.0:
                    zero[k] += 1.0
                n_used[k] += 1.0
    means_by_count(n_used, prob, log_prob, zero)


@njit(**JIT, parallel=True)
def teacher_forced_grid(a, beta_rec, gamma, n_items, max_lag, floor):
    """Teacher-forced probability and log-probability profiles for many points (prange).

    Parameters
    ----------
    a, beta_rec, gamma : float64 (n_points,)
        ``a = 1 - beta_enc``.

    Returns
    -------
    prob, log_prob, zero : float64 (n_points, 2*max_lag+1)
        ``zero``: share of steps with probability exactly 0 at that lag (floored in ``log_prob``).
    """
    n_points = a.shape[0]
    n_lags = 2 * max_lag + 1
    prob = np.empty((n_points, n_lags))
    log_prob = np.empty((n_points, n_lags))
    zero = np.empty((n_points, n_lags))
    for p in prange(n_points):
        t = np.empty(n_items)
        support = np.empty(n_items)
        _teacher_forced_one_point(a[p], beta_rec[p], gamma[p], n_items, max_lag, floor, t, support, prob[p],
                                  log_prob[p], zero[p])
    return prob, log_prob, zero
