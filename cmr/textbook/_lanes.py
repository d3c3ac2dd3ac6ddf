"""numba kernel scoring many parameter sets at once, one SIMD lane per set.

An optimiser generation scores ~150 parameter sets on the same trials. Which items are
recalled, and when context is updated, depends only on the data, so the sets can run side by
side: every work array carries a last axis of lanes (one per set) and every loop over lanes
is elementwise, which the compiler vectorises. Each lane does the arithmetic of
``_network.trials_log_likelihood`` in the same order (the same expressions, sums in the same
order), so a lane's total is that kernel's trial log-likelihoods summed in trial order, to the
last bit. Only ``math.exp`` and ``math.log`` stay scalar calls.

Lists that study an item more than once are scored by ``_network`` instead
(:func:`population_totals` chooses); this kernel refuses them.

Layout: ``p`` (19, W) parameter columns; per block ``b`` and lane ``s``: ``gram``, ``hcf``
(L, L, W) as ``_network``'s ``MAT_G``, ``MAT_H``; ``col_a[j, i]`` and ``col_c[j, i]`` its
``MAT_AS[i, j]`` and ``MAT_CC[j, i]``; ``xs``, ``us``, ``rows`` (L, m, W) its ``coords``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import JIT
from ._kernels import B_ENC, B_REC, B_START, EVENT_FLOOR, LFC, SUPPORT_FLOOR, TEMP, primacy_rate, stop_probability
from ._network import SFF, pair_terms, scored_recalls

LANES = 64  # most parameter sets scored side by side (blocks of equal width)


@njit(**JIT)
def _build(lane_params, p, w, n, pool, sim, sim_gram, row_sum, feature_gram, n_blocks, gram, hcf, xs, us, rows,
           vecs, x, u, tmp, stops, ready):
    """``_network.build_structure`` for ``w`` lanes (vecs: A0, UB0, Z0, NRM) and P(stop) by output."""
    for i in range(n):
        ready[i] = False
        for k in range(n):
            for s in range(w):
                g0, h0, g1, h1 = pair_terms(lane_params[s], pool, i, k, sim, sim_gram, row_sum, feature_gram,
                                            n_blocks)
                gram[0, i, k, s] = g0
                hcf[0, i, k, s] = h0
                if n_blocks == 2:
                    gram[1, i, k, s] = g1
                    hcf[1, i, k, s] = h1
    rate, rho, step = tmp[0], tmp[1], tmp[2]
    for b in range(n_blocks):
        g = gram[b]
        for q in range(n + 1):
            for s in range(w):
                x[q, s] = 0.0
                u[q, s] = 0.0
        for s in range(w):
            x[0, s] = 1.0  # cymr: context starts as the start unit
            u[0, s] = 1.0
        for i in range(n):
            for s in range(w):
                g_ii = g[i, i, s]
                scale = 1.0 / math.sqrt(g_ii) if g_ii > 0 else 0.0
                beta = p[B_ENC, s]
                cdot = u[1 + i, s] * scale
                rho[s] = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
                step[s] = beta * scale
            for q in range(n + 1):
                for s in range(w):
                    x[q, s] *= rho[s]
                    u[q, s] *= rho[s]
            for s in range(w):
                x[1 + i, s] += step[s]
            for k in range(n):
                for s in range(w):
                    u[1 + k, s] += step[s] * g[k, i, s]
            for q in range(n + 1):
                for s in range(w):
                    xs[b, i, q, s] = x[q, s]
                    us[b, i, q, s] = u[q, s]
        for s in range(w):
            beta = p[B_START, s]
            cdot = u[0, s]
            rho[s] = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
        for q in range(n + 1):
            for s in range(w):
                x[q, s] *= rho[s]
                u[q, s] *= rho[s]
        for s in range(w):
            x[0, s] += p[B_START, s]
            u[0, s] += p[B_START, s]
        h = hcf[b]
        for i in range(n):
            for s in range(w):
                rate[s] = primacy_rate(lane_params[s], i)
            for s in range(w):
                rows[b, i, 0, s] = rate[s] * us[b, i, 0, s]
            for k in range(n):
                for s in range(w):
                    rows[b, i, 1 + k, s] = h[i, k, s] + rate[s] * us[b, i, 1 + k, s]
        cc, a0, z0 = tmp[0], tmp[1], tmp[2]
        for j in range(n):
            for s in range(w):
                cc[s] = 0.0
                a0[s] = 0.0
                z0[s] = 0.0
            for q in range(n + 1):
                for s in range(w):
                    cc[s] += xs[b, j, q, s] * us[b, j, q, s]
                    a0[s] += rows[b, j, q, s] * x[q, s]
                    z0[s] += u[q, s] * xs[b, j, q, s]
            for s in range(w):
                lfc = p[LFC, s]
                norm2 = g[j, j, s] + 2.0 * lfc * us[b, j, 1 + j, s] + lfc * lfc * cc[s]
                vecs[b, 3, j, s] = math.sqrt(norm2) if norm2 > 0 else 0.0
                vecs[b, 0, j, s] = a0[s]
                vecs[b, 1, j, s] = u[1 + j, s]
                vecs[b, 2, j, s] = z0[s]
    for k in range(n):
        for s in range(w):
            stops[k, s] = stop_probability(lane_params[s], k, n - k)


@njit(**JIT)
def _recall_update(p, w, n, n_blocks, j, gram, xs, us, rows, vecs, col_a, col_c, ready, state, tmp):
    """``_network.recall_update`` of item ``j`` for ``w`` lanes (columns of j computed on first use)."""
    if not ready[j]:
        for b in range(n_blocks):
            for i in range(n):
                acc = col_a[b, j, i]
                cc = col_c[b, j, i]
                for s in range(w):
                    acc[s] = 0.0
                    cc[s] = 0.0
                for q in range(n + 1):
                    for s in range(w):
                        acc[s] += rows[b, i, q, s] * xs[b, j, q, s]
                        cc[s] += xs[b, j, q, s] * us[b, i, q, s]
        ready[j] = True
    rho, coef = tmp[0], tmp[1]
    for b in range(n_blocks):
        a, ub, z = state[b, 0], state[b, 1], state[b, 2]
        for s in range(w):
            nrm = vecs[b, 3, j, s]
            scale = 1.0 / nrm if nrm > 0 else 0.0
            beta = p[B_REC, s]
            cdot = (ub[j, s] + p[LFC, s] * z[j, s]) * scale
            rho[s] = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
            coef[s] = beta * scale
        for i in range(n):
            for s in range(w):
                lfc = p[LFC, s]
                a[i, s] = rho[s] * a[i, s] + coef[s] * (rows[b, i, 1 + j, s] + lfc * col_a[b, j, i, s])
                ub[i, s] = rho[s] * ub[i, s] + coef[s] * (gram[b, i, j, s] + lfc * us[b, j, 1 + i, s])
                z[i, s] = rho[s] * z[i, s] + coef[s] * (us[b, i, 1 + j, s] + lfc * col_c[b, j, i, s])


@njit(**JIT)
def _add_log(value, logl):
    """logl + log(value clipped to [EVENT_FLOOR, 1]) (NaN stays NaN)."""
    if value < EVENT_FLOOR:
        value = EVENT_FLOOR
    elif value > 1.0:
        value = 1.0
    return logl + math.log(value)


@njit(**JIT)
def _trial_logl(p, w, n, sim, recalls, n_blocks, gram, xs, us, rows, vecs, col_a, col_c, ready, state, support,
                stops, recalled, items, tmp, logl):
    """One trial's floored log-likelihood for ``w`` lanes into ``logl`` (``_network._trial_events``)."""
    for b in range(n_blocks):
        for r in range(3):
            for i in range(n):
                for s in range(w):
                    state[b, r, i, s] = vecs[b, r, i, s]
    for s in range(w):
        logl[s] = 0.0
    top, total, chosen = tmp[2], tmp[3], tmp[4]
    count = scored_recalls(recalls, n, recalled, items)
    previous = -1
    for e in range(count):
        item = items[e]
        for s in range(w):
            top[s] = -np.inf
            total[s] = 0.0
        for i in range(n):
            if recalled[i]:
                continue
            value = support[i]
            for s in range(w):
                value[s] = 0.0
            for b in range(n_blocks):
                for s in range(w):
                    value[s] += state[b, 0, i, s]
            if previous >= 0:
                sim_i = sim[previous, i]
                for s in range(w):
                    value[s] += p[SFF, s] * sim_i
            for s in range(w):
                v = value[s]
                if v < SUPPORT_FLOOR:
                    v = SUPPORT_FLOOR
                value[s] = v
                if v > top[s]:
                    top[s] = v
        for i in range(n):
            if recalled[i]:
                continue
            for s in range(w):
                weight = math.exp(2.0 * (support[i, s] - top[s]) / p[TEMP, s])
                total[s] += weight
                if i == item:
                    chosen[s] = weight
        for s in range(w):
            logl[s] = _add_log(chosen[s] / total[s] * (1.0 - stops[e, s]), logl[s])
        recalled[item] = True
        if e < count - 1:  # the context after the last recall is never used
            _recall_update(p, w, n, n_blocks, item, gram, xs, us, rows, vecs, col_a, col_c, ready, state, tmp)
        previous = item
    for s in range(w):
        logl[s] = _add_log(stops[count, s] if count < n else 1.0, logl[s])


@njit(**JIT)
def population_log_likelihood(param_sets, trial_group, order, group_length, group_pool, group_sim,
                              group_sim_gram, group_row_sum, group_feature_gram, n_blocks, group_items, recalls):
    """Total floored log-likelihood of all trials for each row of ``param_sets`` (S, 19).

    Equals ``_network.trials_log_likelihood`` with every trial on the same row, summed over
    trials in index order. ``order`` visits trials of one pattern group consecutively (a study
    phase is built once per run of a group and lane block). Lists without repeated items only
    (``group_items[g, i] == i``; :func:`population_totals` scores the others).
    """
    for g in range(group_items.shape[0]):
        for i in range(group_length[g]):
            if group_items[g, i] != i:
                raise ValueError("the lanes kernel scores lists without repeated items only")
    n_sets, n_params = param_sets.shape
    n_trials = recalls.shape[0]
    max_length = group_sim.shape[1]
    m = max_length + 1
    blocks = max(1, (n_sets + LANES - 1) // LANES)
    lanes = max(1, (n_sets + blocks - 1) // blocks)  # blocks of equal width (150 sets: 3 x 50), no idle lanes
    stride = (lanes + 7) // 8 * 8  # rows of whole cache lines (64 bytes)
    p = np.zeros((n_params, stride))
    gram = np.zeros((n_blocks, max_length, max_length, stride))
    hcf = np.zeros((n_blocks, max_length, max_length, stride))
    col_a = np.zeros((n_blocks, max_length, max_length, stride))
    col_c = np.zeros((n_blocks, max_length, max_length, stride))
    xs = np.zeros((n_blocks, max_length, m, stride))
    us = np.zeros((n_blocks, max_length, m, stride))
    rows = np.zeros((n_blocks, max_length, m, stride))
    vecs = np.zeros((n_blocks, 4, max_length, stride))
    state = np.zeros((n_blocks, 3, max_length, stride))
    x = np.zeros((m, stride))
    u = np.zeros((m, stride))
    support = np.zeros((max_length, stride))
    stops = np.zeros((max_length + 1, stride))
    tmp = np.zeros((5, stride))
    recalled = np.zeros(max_length, dtype=np.bool_)
    items = np.zeros(max_length, dtype=np.int64)
    ready = np.zeros(max_length, dtype=np.bool_)
    trial_logl = np.zeros((n_trials, stride))
    totals = np.zeros(n_sets)
    for first in range(0, n_sets, lanes):
        w = min(lanes, n_sets - first)
        lane_params = param_sets[first:first + w]
        for q in range(n_params):
            for s in range(w):
                p[q, s] = lane_params[s, q]
        built = -1
        for idx in range(n_trials):
            t = order[idx]
            g = trial_group[t]
            n = group_length[g]
            if g != built:
                _build(lane_params, p, w, n, group_pool[g], group_sim[g], group_sim_gram[g], group_row_sum[g],
                       group_feature_gram[g], n_blocks, gram, hcf, xs, us, rows, vecs, x, u, tmp, stops, ready)
                built = g
            _trial_logl(p, w, n, group_sim[g], recalls[t], n_blocks, gram, xs, us, rows, vecs, col_a, col_c, ready,
                        state, support, stops, recalled, items, tmp, trial_logl[t])
        for s in range(w):
            total = 0.0
            for t in range(n_trials):
                total += trial_logl[t, s]
            totals[first + s] = total
    return totals


def population_totals(param_sets, arrays, order):
    """Total log-likelihood of ``arrays``' trials for each row of ``param_sets`` (S, 19).

    The lanes kernel for lists without repeated items; otherwise ``_network`` scores every
    (set, trial) pair and the trial log-likelihoods are summed per set in trial order.
    """
    if not arrays.has_repeats:
        return population_log_likelihood(param_sets, arrays.trial_group, order, *arrays.kernel_groups(),
                                         arrays.recalls)
    from ._network import trials_log_likelihood

    n_sets, n_trials = param_sets.shape[0], arrays.n_trials
    trial_param = np.repeat(np.arange(n_sets, dtype=np.int64), n_trials)
    trial_group = np.tile(arrays.trial_group, n_sets)
    visit = (np.repeat(np.arange(n_sets, dtype=np.int64) * n_trials, n_trials) + np.tile(order, n_sets))
    recalls = np.tile(arrays.recalls, (n_sets, 1))
    trial_logl = np.zeros(n_sets * n_trials)
    trial_n = np.zeros(n_sets * n_trials, dtype=np.int64)
    event_p = np.zeros((n_sets * n_trials, recalls.shape[1] + 1))
    trials_log_likelihood(np.ascontiguousarray(param_sets), trial_param, trial_group, visit,
                          *arrays.kernel_groups(), recalls, trial_logl, trial_n, event_p)
    totals = np.zeros(n_sets)
    logl = trial_logl.reshape(n_sets, n_trials)
    for t in range(n_trials):
        totals += logl[:, t]
    return totals
