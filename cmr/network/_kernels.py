"""numba kernels of the general CMR network, unit by unit, arithmetic in cymr's order.

A list's network has item units ``f`` (the recallable item segment, then the start unit, then
the distraction units) and context units ``c`` (sublayers side by side; ``c_ind[s]`` is the
half-open unit range of sublayer ``s``). Pre-experimental weights come per weight group
(``w_fc_pre[g]``, ``w_cf_pre[g]``, ``w_ff_pre[g]``); learned weights start at zero for each list.
Every per-list parameter array has a last axis of sublayers. One call loops over all lists.
No validation here; the public layer checks everything.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import JIT

AMIN = 0.000001  # cymr's amin: minimum support of a not-yet-recalled item
EVENT_FLOOR = 10e-6  # cymr clips each event probability to [10e-6, 1] before the log


@njit(**JIT)
def integrate(w_fc_exp, w_fc_pre, c, c_in, f, item, c_ind, beta):
    """Integrate item ``item``'s normalised context input into every sublayer (cymr's integrate)."""
    for i in range(f.shape[0]):
        f[i] = 0.0
    f[item] = 1.0
    for s in range(c_ind.shape[0]):
        sum_squares = 0.0
        for j in range(c_ind[s, 0], c_ind[s, 1]):
            c_in[j] = w_fc_exp[item, j] + w_fc_pre[item, j]
            sum_squares += c_in[j] * c_in[j]
        norm = math.sqrt(sum_squares)
        for j in range(c_ind[s, 0], c_ind[s, 1]):
            c_in[j] /= norm
        cdot = 0.0
        for j in range(c_ind[s, 0], c_ind[s, 1]):
            cdot += c[j] * c_in[j]
        b = beta[s]
        rho = math.sqrt(1 + (b * b) * ((cdot * cdot) - 1)) - (b * cdot)
        for j in range(c_ind[s, 0], c_ind[s, 1]):
            c[j] = rho * c[j] + b * c_in[j]


@njit(**JIT)
def present(w_fc_exp, w_fc_pre, w_cf_exp, c, c_in, f, item, c_ind, beta, lfc, lcf):
    """Integrate an item, then learn its associations with context (cymr's present)."""
    integrate(w_fc_exp, w_fc_pre, c, c_in, f, item, c_ind, beta)
    for s in range(c_ind.shape[0]):
        if lfc[s] > 0:
            for j in range(c_ind[s, 0], c_ind[s, 1]):
                w_fc_exp[item, j] += lfc[s] * c[j]
    for s in range(c_ind.shape[0]):
        if lcf[s] > 0:
            for j in range(c_ind[s, 0], c_ind[s, 1]):
                w_cf_exp[item, j] += lcf[s] * c[j]


@njit(**JIT)
def study_list(w_fc_pre, w_fc_exp, w_cf_exp, c, c_in, f, c_ind, n_seg, study, b_enc, lfc, lcf, b_distract,
               b_start, distraction, ones):
    """Reset the learned weights and context, study the list, reinstate the start unit."""
    for i in range(w_fc_exp.shape[0]):
        for j in range(w_fc_exp.shape[1]):
            w_fc_exp[i, j] = 0.0
            w_cf_exp[i, j] = 0.0
    for j in range(c.shape[0]):
        c[j] = 0.0
        c_in[j] = 0.0
    start = n_seg
    integrate(w_fc_exp, w_fc_pre, c, c_in, f, start, c_ind, ones)
    n = study.shape[0]
    for i in range(n):
        if distraction:
            integrate(w_fc_exp, w_fc_pre, c, c_in, f, n_seg + 1 + i, c_ind, b_distract[i])
        present(w_fc_exp, w_fc_pre, w_cf_exp, c, c_in, f, study[i], c_ind, b_enc[i], lfc[i], lcf[i])
    if distraction:
        integrate(w_fc_exp, w_fc_pre, c, c_in, f, n_seg + 1 + n, c_ind, b_distract[n])
    integrate(w_fc_exp, w_fc_pre, c, c_in, f, start, c_ind, b_start)


@njit(**JIT)
def cue_items(n_seg, w_cf_pre, w_cf_exp, w_ff_pre, f_in, c, exclude, previous, temperature):
    """Support of each item of the segment (cymr's cue_item then apply_softmax): context cue plus
    the ff cue of the previous recall, floored at AMIN, then exp(2 a / T); excluded items get 0."""
    n_c = c.shape[0]
    for i in range(n_seg):
        f_in[i] = 0.0
        if exclude[i]:
            continue
        for j in range(n_c):
            f_in[i] += (w_cf_exp[i, j] + w_cf_pre[i, j]) * c[j]
        if previous >= 0:
            f_in[i] += 0.0 + w_ff_pre[previous, i]
    for i in range(n_seg):
        if exclude[i]:
            continue
        if f_in[i] < AMIN:
            f_in[i] = AMIN
        f_in[i] = math.exp((2 * f_in[i]) / temperature)


@njit(**JIT)
def _work(n_f, n_c, n_seg):
    return (np.zeros((n_f, n_c)), np.zeros((n_f, n_c)), np.zeros(n_c), np.zeros(n_c), np.zeros(n_f),
            np.zeros(n_seg), np.zeros(n_seg, dtype=np.bool_))


@njit(**JIT)
def lists_log_likelihood(w_fc_pre, w_cf_pre, w_ff_pre, group, c_ind, n_seg, study, b_enc, lfc, lcf, b_distract,
                         b_start, b_rec, temperature, p_stop, recalls, n_recall, distraction, event_p, list_logl):
    """Log-likelihood of every list (cymr's p_recall, clipped to [1e-5, 1] before the log).

    Parameters
    ----------
    w_fc_pre, w_cf_pre : (G, n_f, n_c); w_ff_pre : (G, n_seg, n_seg)
    group : (L,) weight group of each list; c_ind : (S, 2) sublayer unit ranges
    study : (L, n) segment index of each studied item
    b_enc, lfc, lcf : (L, n, S); b_distract : (L, n + 1, S); b_start : (L, S); b_rec : (L, R, S)
    temperature : (L,); p_stop : (L, n + 1)
    recalls : (L, R) segment index of each scored recall; n_recall : (L,)
    Outputs: event_p (L, R + 1) NaN-padded raw probabilities, list_logl (L,).
    """
    n_lists = study.shape[0]
    n_f = w_fc_pre.shape[1]
    n_c = w_fc_pre.shape[2]
    w_fc_exp, w_cf_exp, c, c_in, f, f_in, exclude = _work(n_f, n_c, n_seg)
    ones = np.ones(c_ind.shape[0])
    for k in range(n_lists):
        g = group[k]
        study_list(w_fc_pre[g], w_fc_exp, w_cf_exp, c, c_in, f, c_ind, n_seg, study[k], b_enc[k], lfc[k], lcf[k],
                   b_distract[k], b_start[k], distraction, ones)
        for i in range(n_seg):
            exclude[i] = False
        n_r = n_recall[k]
        row = event_p[k]
        for i in range(row.shape[0]):
            row[i] = np.nan
        previous = -1
        for i in range(n_r):
            cue_items(n_seg, w_cf_pre[g], w_cf_exp, w_ff_pre[g], f_in, c, exclude, previous, temperature[k])
            total = 0.0
            for j in range(n_seg):
                total += f_in[j]
            item = recalls[k, i]
            row[i] = (f_in[item] / total) * (1 - p_stop[k, i])
            if i < n_r - 1:
                exclude[item] = True
                integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, item, c_ind, b_rec[k, i])
            previous = item
        row[n_r] = p_stop[k, n_r]
        logl = 0.0
        for i in range(n_r + 1):
            p = row[i]
            if p < EVENT_FLOOR:
                p = EVENT_FLOOR
            elif p > 1.0:
                p = 1.0
            logl += math.log(p)  # NaN stays NaN: the public layer warns
        list_logl[k] = logl


@njit(**JIT)
def simulate_lists(w_fc_pre, w_cf_pre, w_ff_pre, group, c_ind, n_seg, study, b_enc, lfc, lcf, b_distract, b_start,
                   b_rec, temperature, p_stop, distraction, screen, a1, a2, rng, out):
    """Free recall of every list into rows of ``out`` (segment indices, -1 padding): cymr's
    generate_recall with randomness from ``rng`` only. ``b_rec`` is (L, n_seg, S).

    With ``screen`` (cymr's filter_recalls) each candidate's choice probability is multiplied by
    its acceptance probability expit(A1 + A2 m), m = its item-to-context input . context, and
    the result renormalised; ``a1``, ``a2`` (L,).
    """
    n_lists = study.shape[0]
    n_f = w_fc_pre.shape[1]
    n_c = w_fc_pre.shape[2]
    w_fc_exp, w_cf_exp, c, c_in, f, f_in, exclude = _work(n_f, n_c, n_seg)
    prob = np.zeros(n_seg)
    ones = np.ones(c_ind.shape[0])
    n_stop = p_stop.shape[1]
    for k in range(n_lists):
        g = group[k]
        study_list(w_fc_pre[g], w_fc_exp, w_cf_exp, c, c_in, f, c_ind, n_seg, study[k], b_enc[k], lfc[k], lcf[k],
                   b_distract[k], b_start[k], distraction, ones)
        for i in range(n_seg):
            exclude[i] = False
        for i in range(out.shape[1]):
            out[k, i] = -1
        previous = -1
        for i in range(min(n_seg, n_stop)):
            if rng.random() < p_stop[k, i]:
                break
            cue_items(n_seg, w_cf_pre[g], w_cf_exp, w_ff_pre[g], f_in, c, exclude, previous, temperature[k])
            total = 0.0
            for j in range(n_seg):
                total += f_in[j]
            for j in range(n_seg):
                prob[j] = f_in[j] / total
            if screen:
                total = 0.0
                for j in range(n_seg):
                    match = 0.0
                    for u in range(n_c):
                        match += (w_fc_exp[j, u] + w_fc_pre[g, j, u]) * c[u]
                    prob[j] = prob[j] * (1 / (1 + math.exp(-(a1[k] + a2[k] * match))))
                    total += prob[j]
                for j in range(n_seg):
                    prob[j] = prob[j] / total
            undefined = False
            for j in range(n_seg):
                if math.isnan(prob[j]):
                    undefined = True
            if undefined:  # cymr draws uniformly among the items left
                for j in range(n_seg):
                    prob[j] = 0.0 if exclude[j] else 1.0 / (n_seg - i)
            draw = rng.random()
            item = -1
            last = -1
            cum = 0.0
            for j in range(n_seg):
                if exclude[j]:
                    continue
                last = j
                cum += prob[j]
                if draw < cum:
                    item = j
                    break
            if item < 0:  # rounding left the draw above the cumulative sum: take the last candidate
                item = last
            out[k, i] = item
            exclude[item] = True
            integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, item, c_ind, b_rec[k, i])
            previous = item


@njit(**JIT)
def record_lists(w_fc_pre, w_cf_pre, w_ff_pre, group, c_ind, n_seg, study, b_enc, lfc, lcf, b_distract, b_start,
                 b_rec, temperature, recalls, n_recall, distraction, c_out, c_in_out, f_out, f_in_out):
    """States of every list (cymr's record_study and record_recall): rows ``0..n-1`` of the
    outputs (L, n + R, units) after each studied item, rows ``n + i`` at scored recall ``i``
    (cue context, supports of every item, the recalled item), before context is updated."""
    n_lists = study.shape[0]
    n_f = w_fc_pre.shape[1]
    n_c = w_fc_pre.shape[2]
    w_fc_exp, w_cf_exp, c, c_in, f, f_in, exclude = _work(n_f, n_c, n_seg)
    ones = np.ones(c_ind.shape[0])
    n = study.shape[1]
    for k in range(n_lists):
        g = group[k]
        for i in range(w_fc_exp.shape[0]):
            for j in range(n_c):
                w_fc_exp[i, j] = 0.0
                w_cf_exp[i, j] = 0.0
        for j in range(n_c):
            c[j] = 0.0
            c_in[j] = 0.0
        for i in range(n_seg):
            f_in[i] = 0.0
            exclude[i] = False
        integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, n_seg, c_ind, ones)
        for i in range(n):
            if distraction:
                integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, n_seg + 1 + i, c_ind, b_distract[k, i])
            present(w_fc_exp, w_fc_pre[g], w_cf_exp, c, c_in, f, study[k, i], c_ind, b_enc[k, i], lfc[k, i],
                    lcf[k, i])
            _copy_state(c, c_in, f, f_in, n_seg, c_out[k, i], c_in_out[k, i], f_out[k, i], f_in_out[k, i])
        if distraction:
            integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, n_seg + 1 + n, c_ind, b_distract[k, n])
        integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, n_seg, c_ind, b_start[k])
        previous = -1
        for i in range(n_recall[k]):
            item = recalls[k, i]
            cue_items(n_seg, w_cf_pre[g], w_cf_exp, w_ff_pre[g], f_in, c, exclude, previous, temperature[k])
            for j in range(n_f):
                f[j] = 0.0
            f[item] = 1.0
            exclude[item] = True
            _copy_state(c, c_in, f, f_in, n_seg, c_out[k, n + i], c_in_out[k, n + i], f_out[k, n + i],
                        f_in_out[k, n + i])
            integrate(w_fc_exp, w_fc_pre[g], c, c_in, f, item, c_ind, b_rec[k, i])
            previous = item


@njit(**JIT)
def _copy_state(c, c_in, f, f_in, n_seg, c_row, c_in_row, f_row, f_in_row):
    for j in range(c.shape[0]):
        c_row[j] = c[j]
        c_in_row[j] = c_in[j]
    for j in range(f.shape[0]):
        f_row[j] = f[j]
        f_in_row[j] = f_in[j] if j < n_seg else 0.0
