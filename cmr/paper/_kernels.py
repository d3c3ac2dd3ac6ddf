"""numba kernels of the paper's simplified CMR (Ji-An et al. 2024): free recall and lag statistics.

States 0..n_items-1 are the studied items (one-hot), state n_items is the absorbing
end-of-list state. Context->item weights ``M[i, j] = a**(j-i-1)`` for ``j > i`` with
``a = 1 - beta_enc``, so the support ``F = M^T t`` follows the recursion
``F[0] = 0, F[j+1] = a*F[j] + t[j]`` (O(n) per recall, no matrix). Randomness comes only from
the ``rng`` argument (a numpy Generator; each grid point gets its own), so a point's result
depends only on its generator, not on which thread ran it. No validation here.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..jit import JIT


@njit(**JIT)
def _support_prefix(t, a, n_items, out):
    """Prefix sums of the support F = M^T t over all n_items+1 states, into ``out``."""
    support = 0.0
    total = 0.0
    for k in range(n_items + 1):
        total += support
        out[k] = total
        if k < n_items:
            support = a * support + t[k]


@njit(**JIT)
def _recall_inputs(a, gamma, n_items):
    """Per recalled item j: its normalised context input and the prefix sums of its support.

    Returns
    -------
    t_in : float64 (n_items, n_items)
        ``t_in[j] = ((1-g) f_j + g M f_j) / norm`` with ``(M f_j)[i] = a**(j-1-i)`` for i < j.
    in_prefix : float64 (n_items, n_items+1)
        Prefix sums over states of ``M^T t_in[j]``; the support is linear in the context, so
        the running prefix sums update as ``(1-B_rec) * old + B_rec * in_prefix[j]`` (then
        normalised) without recomputing the recursion.
    in_back : float64 (n_items,)
        ``g / norm``, the weight of ``M f_j`` in ``t_in[j]`` (for the context-norm update).
    """
    powers = np.empty(n_items + 1)
    powers[0] = 1.0
    for m in range(1, n_items + 1):
        powers[m] = powers[m - 1] * a  # 0**0 = 1 for beta_enc = 1
    t_in = np.zeros((n_items, n_items))
    in_prefix = np.zeros((n_items, n_items + 1))
    in_back = np.zeros(n_items)
    back_sq = 0.0  # sum_{m<j} a**(2m) = |M f_j|^2
    for j in range(n_items):
        norm = np.sqrt((1.0 - gamma) ** 2 + gamma * gamma * back_sq)
        back_sq += powers[j] * powers[j]
        if norm == 0.0:
            continue  # gamma = 1 and j = 0: item 0 has no support, so it is never recalled
        for i in range(j):
            t_in[j, i] = gamma * powers[j - 1 - i] / norm
        t_in[j, j] = (1.0 - gamma) / norm
        in_back[j] = gamma / norm
        _support_prefix(t_in[j], a, n_items, in_prefix[j])
    return t_in, in_prefix, in_back


@njit(**JIT)
def _recall_one_trial(rng, a, beta_rec, n_items, start, max_recalls, t_in, in_prefix, in_back, t, prefix, out):
    """Simulate one free-recall trial from study position ``start``; return the number of recalls.

    ``t`` (n_items,) and ``prefix`` (n_items+1,) are work buffers (the unit-norm context and
    the prefix sums of its support); recalled item indices (0-based) go to ``out[:count]``.
    Sampling follows the study: the first state whose cumulative probability exceeds a
    uniform draw; the absorbing state ends the trial.
    """
    for i in range(n_items):
        t[i] = 0.0
    t[start] = 1.0
    _support_prefix(t, a, n_items, prefix)
    keep = 1.0 - beta_rec
    count = 0
    while count < max_recalls:
        target = rng.random() * prefix[n_items]
        chosen = np.searchsorted(prefix, target, side="right")
        if chosen > n_items:  # rounding put the draw at the very top: take the last state with mass
            chosen = n_items
            while chosen > 0 and prefix[chosen] == prefix[chosen - 1]:
                chosen -= 1
        if chosen >= n_items:
            break  # absorbing end-of-list state
        out[count] = chosen
        count += 1
        # |keep*t + B t_in|^2 with |t| = |t_in| = 1; t.t_in = (1-g)/norm t_j + g/norm F_j
        support_j = prefix[chosen] - prefix[chosen - 1] if chosen > 0 else 0.0
        overlap = t_in[chosen, chosen] * t[chosen] + in_back[chosen] * support_j
        norm = np.sqrt(keep * keep + beta_rec * beta_rec + 2.0 * keep * beta_rec * overlap)
        c_old = keep / norm
        c_new = beta_rec / norm
        row_t = t_in[chosen]
        for i in range(n_items):
            t[i] = c_old * t[i] + c_new * row_t[i]
        row_p = in_prefix[chosen]
        for k in range(n_items + 1):
            prefix[k] = c_old * prefix[k] + c_new * row_p[k]
    return count


@njit(**JIT)
def simulate_recalls(rng, a, beta_rec, gamma, n_items, starts, n_trials, max_recalls):
    """Recall sequences for every start position and trial.

    Returns
    -------
    recalls : int64 (len(starts) * n_trials, max_recalls)
        0-based item indices, -1 after the last recall; rows ordered start-major.
    """
    t_in, in_prefix, in_back = _recall_inputs(a, gamma, n_items)
    t = np.zeros(n_items)
    prefix = np.zeros(n_items + 1)
    recalls = np.full((starts.shape[0] * n_trials, max_recalls), -1, dtype=np.int64)
    buf = np.empty(max_recalls, dtype=np.int64)
    row = 0
    for s in range(starts.shape[0]):
        for _ in range(n_trials):
            count = _recall_one_trial(rng, a, beta_rec, n_items, starts[s], max_recalls, t_in, in_prefix, in_back, t, prefix, buf)
            recalls[row, :count] = buf[:count]
            row += 1
    return recalls


@njit(**JIT)
def lag_stats_one_point(rng, a, beta_rec, gamma, n_items, starts, n_trials, max_recalls, max_lag, crp, var):
    """The study's lag distribution per start position, with its Monte Carlo variance.

    Per trial, y[lag] = (transitions at lag) / (all transitions), the first transition being
    from the start position to the first recall and lags beyond +-max_lag counted only in the
    denominator; per start, c = mean of y over trials with >= 1 recall, crp = c / sum(c). The
    variance of crp comes from the delta method on that ratio (per-trial influence values).
    Writes ``crp`` and ``var`` of shape (len(starts), 2*max_lag+1).
    """
    n_lags = 2 * max_lag + 1
    t_in, in_prefix, in_back = _recall_inputs(a, gamma, n_items)
    t = np.zeros(n_items)
    prefix = np.zeros(n_items + 1)
    buf = np.empty(max_recalls, dtype=np.int64)
    counts = np.zeros(n_lags)
    y_trial = np.zeros(n_lags)
    sum_y = np.zeros(n_lags)
    sum_y2 = np.zeros(n_lags)
    sum_yY = np.zeros(n_lags)
    for s in range(starts.shape[0]):
        sum_y[:] = 0.0
        sum_y2[:] = 0.0
        sum_yY[:] = 0.0
        sum_Y = 0.0
        sum_Y2 = 0.0
        n_valid = 0
        for _ in range(n_trials):
            count = _recall_one_trial(rng, a, beta_rec, n_items, starts[s], max_recalls, t_in, in_prefix, in_back, t, prefix, buf)
            if count == 0:
                continue  # the study's nanmean skips trials without recalls
            counts[:] = 0.0
            previous = starts[s]
            for r in range(count):
                lag = buf[r] - previous
                if -max_lag <= lag <= max_lag:
                    counts[lag + max_lag] += 1.0
                previous = buf[r]
            big_y = 0.0
            for k in range(n_lags):
                y = counts[k] / count
                big_y += y
                sum_y[k] += y
                sum_y2[k] += y * y
                y_trial[k] = y
            for k in range(n_lags):
                sum_yY[k] += y_trial[k] * big_y
            sum_Y += big_y
            sum_Y2 += big_y * big_y
            n_valid += 1
        if n_valid == 0 or sum_Y == 0.0:
            crp[s, :] = np.nan
            var[s, :] = np.nan
            continue
        mean_big = sum_Y / n_valid
        for k in range(n_lags):
            ratio = sum_y[k] / sum_Y
            crp[s, k] = ratio
            if n_valid < 2:
                var[s, k] = np.nan
                continue
            # influence z = (y - ratio*Y) / mean(Y); its mean is 0 by construction
            second = (sum_y2[k] - 2.0 * ratio * sum_yY[k] + ratio * ratio * sum_Y2) / n_valid
            var[s, k] = max(second, 0.0) / (mean_big * mean_big) / (n_valid - 1)
