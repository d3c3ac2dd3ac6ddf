"""numba kernels of CMR in list coordinates: localist, semantic and category CMR, equal to cymr.

Why coordinates. Context is always a combination of the start unit and the item-to-context
input vectors of the studied items (their pre-experimental rows ``b_k = M_fc_pre[k]``; learned
rows are earlier contexts), so it lives in a space of dimension ``m = n + 1`` however many
units the network has (cymr's pool-sized context has one unit per pool item, 768 for
Morton2013). A context is held as coefficients ``x`` over the basis ``(start, b_0 .. b_{n-1})``
and every dot product goes through the basis' Gram matrix ``G``; ``H[i, k] = M_cf_pre[i] . b_k``
gives supports. Both are built from a few list-level arrays (``sim``, ``sim @ sim.T``, row
sums, ``F @ F.T``), so semantic similarities over a large pool cost nothing per unit.

During recall the kernels keep three vectors per context block instead of the context itself:
``a`` (support of each item), ``ub[p] = c . b_p`` and ``z[k] = c . c_study[k]``; after
recalling item j each is ``rho * old + beta * (column j of a precomputed matrix)``, O(n) per
recall. Columns are computed on first use and shared by every trial with the same structure
(localist lists of one length share one study phase).

Layout. ``params`` is the float64 vector of ``MODEL_PARAMETER_NAMES`` (19 values). A block is
one context sublayer (1, or 2 when feature units form their own sublayer, each with its own
start unit). Work arrays (:func:`work_arrays`) are allocated once per kernel call.
No validation here; the public layers check everything.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import JIT
from ._kernels import (
    ACF, AFC, B_ENC, B_REC, B_START, DCF, DFC, EVENT_FLOOR, LFC, SUPPORT_FLOOR, TEMP,
    choice_probabilities, primacy_rate, stop_probability,
)
from ._repeats import add_repeat_row, close_repeat_slots, distinct_items, study_repeat
from ._repeats import integrate as _integrate

SFC, SCF, SFF, CFC, CCF = range(14, 19)

# slots of the structure arrays
MAT_G, MAT_H, MAT_AS, MAT_CC = range(4)  # (nb, 4, L, L): Gram, cf-fc dots, A xs^T, xs us^T
VEC_NRM, VEC_A0, VEC_UB0, VEC_Z0 = range(4)  # (nb, 4, L)
# (nb, 5, L, m): study contexts by position, their duals G x, support rows, and per item the sums
# of its presentations' study contexts and duals (the learned M_fc row over Lfc; equal to the
# position's own for an item studied once)
CO_XS, CO_US, CO_A, CO_XF, CO_UF = range(5)


@njit(**JIT)
def work_arrays(n_blocks, max_length):
    """Structure arrays for lists of up to ``max_length`` items (reused across lists)."""
    m = max_length + 1
    mats = np.zeros((n_blocks, 4, max_length, max_length))
    vecs = np.zeros((n_blocks, 4, max_length))
    coords = np.zeros((n_blocks, 5, max_length, m))
    start = np.zeros((n_blocks, 2, m))  # x0, u0: context at the start of recall
    ready = np.zeros(max_length, dtype=np.bool_)
    return mats, vecs, coords, start, ready


@njit(**JIT)
def pattern_dot(a1, d1, s1, a2, d2, s2, pool, i, k, sim, sim_gram, row_sum):
    """(a1 + d1 loc_i + s1 sem_i) . (a2 + d2 loc_k + s2 sem_k) over the pool's item units."""
    value = (a1 * a2 * pool + a1 * d2 + d1 * a2 + a1 * s2 * row_sum[k] + s1 * a2 * row_sum[i]
             + d1 * s2 * sim[k, i] + s1 * d2 * sim[i, k] + s1 * s2 * sim_gram[i, k])
    if i == k:
        value += d1 * d2
    return value


@njit(**JIT)
def pair_terms(params, pool, i, k, sim, sim_gram, row_sum, feature_gram, n_blocks):
    """Gram ``G[i, k]`` and support ``H[i, k]`` entries of items i, k: (G, H) of block 0, then
    of block 1 (the feature sublayer; zeros with one block, where features join block 0)."""
    afc, dfc, sfc, cfc = params[AFC], params[DFC], params[SFC], params[CFC]
    acf, dcf, scf, ccf = params[ACF], params[DCF], params[SCF], params[CCF]
    g_item = pattern_dot(afc, dfc, sfc, afc, dfc, sfc, pool, i, k, sim, sim_gram, row_sum)
    h_item = pattern_dot(acf, dcf, scf, afc, dfc, sfc, pool, i, k, sim, sim_gram, row_sum)
    g_feat = cfc * cfc * feature_gram[i, k]
    h_feat = ccf * cfc * feature_gram[i, k]
    if n_blocks == 1:
        return g_item + g_feat, h_item + h_feat, 0.0, 0.0
    return g_item, h_item, g_feat, h_feat


@njit(**JIT)
def build_structure(params, n, pool, sim, sim_gram, row_sum, feature_gram, n_blocks, items,
                    mats, vecs, coords, start, ready):
    """Study an ``n``-presentation list and prepare recall: fill the structure arrays in place.

    ``pool`` is the number of item units (cymr's pool size; the number of distinct items for a
    list-sized context); ``sim``, ``sim_gram``, ``feature_gram`` (n, n) and ``row_sum`` (n,)
    are the list's pattern terms (zeros where the model has none). ``items`` (n,) is the item of
    each presentation as the 0-based position of its first presentation (``items[i] == i`` for
    a list without repeats). A repeated item keeps the slot of its first presentation: each
    presentation integrates the item's full input (pre-experimental plus everything learned at
    its earlier presentations) and adds its context to the item's learned rows; the slots of
    later presentations hold no item (their basis coefficients stay 0).
    """
    lfc = params[LFC]
    for i in range(n):
        ready[i] = False
        for k in range(n):
            g0, h0, g1, h1 = pair_terms(params, pool, i, k, sim, sim_gram, row_sum, feature_gram, n_blocks)
            mats[0, MAT_G, i, k] = g0
            mats[0, MAT_H, i, k] = h0
            if n_blocks == 2:
                mats[1, MAT_G, i, k] = g1
                mats[1, MAT_H, i, k] = h1
    for b in range(n_blocks):
        g = mats[b, MAT_G]
        h = mats[b, MAT_H]
        xs = coords[b, CO_XS]
        us = coords[b, CO_US]
        rows = coords[b, CO_A]
        x = start[b, 0]
        u = start[b, 1]
        for k in range(n + 1):
            x[k] = 0.0
            u[k] = 0.0
        xf = coords[b, CO_XF]
        uf = coords[b, CO_UF]
        x[0] = 1.0  # cymr: context starts as the start unit
        u[0] = 1.0
        beta = params[B_ENC]
        for i in range(n):
            item = items[i]
            if item == i:  # first presentation: the item's input is its pre-experimental row
                s = 1.0 / math.sqrt(g[i, i]) if g[i, i] > 0 else 0.0
                _integrate(x, u, n, u[1 + i] * s, beta)
                x[1 + i] += beta * s
                for k in range(n):
                    u[1 + k] += beta * s * g[k, i]
                for k in range(n + 1):
                    xs[i, k] = x[k]
                    us[i, k] = u[k]
                    xf[i, k] = x[k]
                    uf[i, k] = u[k]
            else:  # a repeat: input b_item + Lfc * (sum of the item's earlier study contexts)
                study_repeat(params, n, item, g, x, u, xf, uf, beta)
                for k in range(n + 1):
                    xs[i, k] = x[k]
                    us[i, k] = u[k]
                    xf[item, k] += x[k]
                    uf[item, k] += u[k]
        beta = params[B_START]
        _integrate(x, u, n, u[0], beta)
        x[0] += beta
        u[0] += beta
        for i in range(n):
            rate = primacy_rate(params, i)
            rows[i, 0] = rate * us[i, 0]
            for k in range(n):
                rows[i, 1 + k] = h[i, k] + rate * us[i, 1 + k]
        for i in range(n):  # a repeated item's M_cf row sums its presentations' rate * context
            if items[i] != i:
                add_repeat_row(params, n, i, items, h, us, rows)
        for j in range(n):
            cc = 0.0
            for q in range(n + 1):
                cc += xf[j, q] * uf[j, q]
            norm2 = g[j, j] + 2.0 * lfc * uf[j, 1 + j] + lfc * lfc * cc
            vecs[b, VEC_NRM, j] = math.sqrt(norm2) if norm2 > 0 else 0.0
            a0 = 0.0
            z0 = 0.0
            for q in range(n + 1):
                a0 += rows[j, q] * x[q]
                z0 += u[q] * xf[j, q]
            vecs[b, VEC_A0, j] = a0
            vecs[b, VEC_UB0, j] = u[1 + j]
            vecs[b, VEC_Z0, j] = z0


@njit(**JIT)
def _prepare_column(n, n_blocks, j, mats, coords, ready):
    """Columns of the recall updates for item j: A XF[j] and XF[j] . UF[k] (on first use)."""
    if ready[j]:
        return
    for b in range(n_blocks):
        xs = coords[b, CO_XF]
        us = coords[b, CO_UF]
        rows = coords[b, CO_A]
        for i in range(n):
            acc = 0.0
            cc = 0.0
            for q in range(n + 1):
                acc += rows[i, q] * xs[j, q]
                cc += xs[j, q] * us[i, q]
            mats[b, MAT_AS, i, j] = acc
            mats[b, MAT_CC, j, i] = cc
    ready[j] = True


@njit(**JIT)
def start_recall(n, n_blocks, vecs, state):
    """Recall state (n_blocks, 3, L): supports, c . b_p, c . c_study[k] at the start of recall."""
    for b in range(n_blocks):
        for i in range(n):
            state[b, 0, i] = vecs[b, VEC_A0, i]
            state[b, 1, i] = vecs[b, VEC_UB0, i]
            state[b, 2, i] = vecs[b, VEC_Z0, i]


@njit(**JIT)
def recall_update(params, n, n_blocks, j, mats, vecs, coords, ready, state, x):
    """Integrate the recalled item j into context with B_rec (every block), O(n).

    ``x`` (n_blocks, m) context coefficients are updated too when it has rows (recording);
    pass a (0, 0) array to skip them.
    """
    _prepare_column(n, n_blocks, j, mats, coords, ready)
    lfc = params[LFC]
    beta = params[B_REC]
    for b in range(n_blocks):
        nrm = vecs[b, VEC_NRM, j]
        s = 1.0 / nrm if nrm > 0 else 0.0
        a = state[b, 0]
        ub = state[b, 1]
        z = state[b, 2]
        cdot = (ub[j] + lfc * z[j]) * s
        rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
        coef = beta * s
        g = mats[b, MAT_G]
        a_s = mats[b, MAT_AS]
        cc = mats[b, MAT_CC]
        rows = coords[b, CO_A]
        us = coords[b, CO_UF]
        for i in range(n):
            a[i] = rho * a[i] + coef * (rows[i, 1 + j] + lfc * a_s[i, j])
            ub[i] = rho * ub[i] + coef * (g[i, j] + lfc * us[j, 1 + i])
            z[i] = rho * z[i] + coef * (us[i, 1 + j] + lfc * cc[j, i])
        if x.shape[0] > 0:
            xs = coords[b, CO_XF]
            for q in range(n + 1):
                x[b, q] = rho * x[b, q] + coef * lfc * xs[j, q]
            x[b, 1 + j] += coef


@njit(**JIT)
def supports(params, n, n_blocks, state, sim, previous, recalled, out):
    """Floored support of each not-yet-recalled item (0 for recalled), into ``out``.

    The context support sums over blocks; after a recall, the last recalled item adds
    ``Sff * sim[previous, i]`` (cymr's M_ff cue) before the floor.
    """
    sff = params[SFF]
    for i in range(n):
        if recalled[i]:
            out[i] = 0.0
            continue
        value = 0.0
        for b in range(n_blocks):
            value += state[b, 0, i]
        if previous >= 0:
            value += sff * sim[previous, i]
        if value < SUPPORT_FLOOR:
            value = SUPPORT_FLOOR
        out[i] = value


@njit(**JIT)
def _choice_probability(params, n, n_blocks, state, sim, previous, recalled, item, support):
    """Choice probability of ``item`` among the not-yet-recalled items (the arithmetic of
    ``choice_probabilities``, without writing the other items' probabilities)."""
    supports(params, n, n_blocks, state, sim, previous, recalled, support)
    top = -np.inf
    for i in range(n):
        if not recalled[i] and support[i] > top:
            top = support[i]
    temperature = params[TEMP]
    total = 0.0
    for i in range(n):
        if not recalled[i]:
            total += math.exp(2.0 * (support[i] - top) / temperature)
    return math.exp(2.0 * (support[item] - top) / temperature) / total


@njit(**JIT)
def scored_recalls(recalls, n, seen, items):
    """The scored recalls of one trial's row, in output order, into ``items`` (0-based serial
    positions); returns their count. cymr's rules: output stops at the first padding zero;
    intrusions (< 0) and repeats are skipped. ``seen`` (n,) is scratch, left all False."""
    for i in range(n):
        seen[i] = False
    count = 0
    for k in range(recalls.shape[0]):
        pos = recalls[k]
        if pos == 0:
            break
        if pos < 0 or seen[pos - 1]:
            continue
        seen[pos - 1] = True
        items[count] = pos - 1
        count += 1
    for e in range(count):
        seen[items[e]] = False
    return count


@njit(**JIT)
def _trial_events(params, n, sim, recalls, n_blocks, mats, vecs, coords, ready, state, support, stops,
                  recalled, items, no_x, event_p, list_items, n_distinct):
    """Raw probabilities of one trial's scored events (cymr's rules; see likelihood.py).

    ``stops[k]`` is P(stop) before output k while items are left (1 when none are);
    ``list_items`` (n,) the item of each presentation (``build_structure``), ``n_distinct``
    the number of distinct items (the candidates of recall).
    """
    start_recall(n, n_blocks, vecs, state)
    count = scored_recalls(recalls, n, recalled, items)
    if n_distinct < n:
        close_repeat_slots(n, list_items, recalled)
    previous = -1
    for e in range(count):
        item = items[e]
        event_p[e] = _choice_probability(params, n, n_blocks, state, sim, previous, recalled, item,
                                         support) * (1.0 - stops[e])
        recalled[item] = True
        if e < count - 1:  # the context after the last recall is never used
            recall_update(params, n, n_blocks, item, mats, vecs, coords, ready, state, no_x)
        previous = item
    event_p[count] = stops[count] if count < n_distinct else 1.0
    return count + 1


@njit(**JIT)
def _visit(idx, order, param_table, trial_param, trial_group, group_length, group_pool, group_sim, group_sim_gram,
           group_row_sum, group_feature_gram, n_blocks, group_items, work, visited, stops):
    """Trial ``order[idx]``: build its study phase (and P(stop) by output) unless the trial
    visited before shares them (same parameter row and pattern group). Returns (t, p, g);
    ``visited[2]`` is then the number of distinct items of the group."""
    t = order[idx]
    p = trial_param[t]
    g = trial_group[t]
    if p != visited[0] or g != visited[1]:
        mats, vecs, coords, start, ready = work
        params = param_table[p]
        n = group_length[g]
        build_structure(params, n, group_pool[g], group_sim[g], group_sim_gram[g], group_row_sum[g],
                        group_feature_gram[g], n_blocks, group_items[g], mats, vecs, coords, start, ready)
        n_distinct = distinct_items(n, group_items[g])
        for k in range(n_distinct):
            stops[k] = stop_probability(params, k, n_distinct - k)
        visited[0] = p
        visited[1] = g
        visited[2] = n_distinct
    return t, p, g


@njit(**JIT)
def trials_log_likelihood(param_table, trial_param, trial_group, order, group_length, group_pool,
                          group_sim, group_sim_gram, group_row_sum, group_feature_gram, n_blocks,
                          group_items, recalls, trial_logl, trial_n, event_p):
    """Floored log-likelihood of every trial; raw event probabilities into ``event_p`` rows.

    Parameters
    ----------
    param_table : (K, 19) parameter vectors; trial t uses row ``trial_param[t]``.
    trial_group : (T,) pattern group of each trial: lists of one group share length, pool size,
        pattern terms and presentation items (``group_*`` arrays, indexed by group).
    group_items : (G, L) item of each presentation as the 0-based position of its first
        presentation (``build_structure``).
    order : (T,) the order in which to visit trials; a study phase is computed once per run
        of consecutive trials with the same (parameter row, group).
    recalls : (T, outputs) 1-based serial positions (a repeated item's first), -1 intrusions, 0 padding.
    Outputs: trial_logl (T,), trial_n (T,), event_p (T, outputs + 1) NaN-padded.
    """
    max_length = group_sim.shape[1]
    work = work_arrays(n_blocks, max_length)
    mats, vecs, coords, start, ready = work
    state = np.zeros((n_blocks, 3, max_length))
    support = np.zeros(max_length)
    stops = np.zeros(max_length + 1)
    recalled = np.zeros(max_length, dtype=np.bool_)
    items = np.zeros(max_length, dtype=np.int64)
    no_x = np.zeros((0, 0))
    visited = np.array([-1, -1, 0])  # parameter row, group and distinct items of the study phase in ``work``
    for idx in range(order.shape[0]):
        t, p, g = _visit(idx, order, param_table, trial_param, trial_group, group_length, group_pool, group_sim,
                         group_sim_gram, group_row_sum, group_feature_gram, n_blocks, group_items, work, visited,
                         stops)
        params = param_table[p]
        n = group_length[g]
        row = event_p[t]
        for k in range(row.shape[0]):
            row[k] = np.nan
        count = _trial_events(params, n, group_sim[g], recalls[t], n_blocks, mats, vecs, coords, ready, state,
                              support, stops, recalled, items, no_x, row, group_items[g], visited[2])
        logl = 0.0
        for k in range(count):
            value = row[k]
            if value < EVENT_FLOOR:
                value = EVENT_FLOOR
            elif value > 1.0:
                value = 1.0
            logl += math.log(value)  # NaN stays NaN: the public layer warns
        trial_logl[t] = logl
        trial_n[t] = count


@njit(**JIT)
def simulate_trials(param_table, trial_param, trial_group, order, group_length, group_pool, group_sim,
                    group_sim_gram, group_row_sum, group_feature_gram, n_blocks, group_items, rng, out):
    """Free recall of each trial into rows of ``out`` (1-based positions, 0 padding).

    cymr's generate_recall: before each output stop with P(stop); otherwise draw one
    not-yet-recalled distinct item from the choice rule and integrate it with B_rec (a
    repeated item is reported by its first position). Trials are simulated in ``order``;
    randomness comes only from ``rng``.
    """
    max_length = group_sim.shape[1]
    work = work_arrays(n_blocks, max_length)
    mats, vecs, coords, start, ready = work
    state = np.zeros((n_blocks, 3, max_length))
    support = np.zeros(max_length)
    stops = np.zeros(max_length + 1)
    prob = np.zeros(max_length)
    recalled = np.zeros(max_length, dtype=np.bool_)
    no_x = np.zeros((0, 0))
    visited = np.array([-1, -1, 0])  # parameter row, group and distinct items of the study phase in ``work``
    for idx in range(order.shape[0]):
        t, p, g = _visit(idx, order, param_table, trial_param, trial_group, group_length, group_pool, group_sim,
                         group_sim_gram, group_row_sum, group_feature_gram, n_blocks, group_items, work, visited,
                         stops)
        params = param_table[p]
        n = group_length[g]
        for k in range(out.shape[1]):
            out[t, k] = 0
        n_distinct = visited[2]
        start_recall(n, n_blocks, vecs, state)
        for i in range(n):
            recalled[i] = False
        if n_distinct < n:
            close_repeat_slots(n, group_items[g], recalled)
        previous = -1
        for k in range(n_distinct):
            if rng.random() < stops[k]:
                break
            supports(params, n, n_blocks, state, group_sim[g], previous, recalled, support)
            choice_probabilities(support[:n], recalled[:n], params[TEMP], prob[:n])
            draw = rng.random()
            item = -1
            cum = 0.0
            last = -1
            for i in range(n):
                if recalled[i]:
                    continue
                last = i
                cum += prob[i]
                if draw < cum:
                    item = i
                    break
            if item < 0:  # rounding left the draw above the cumulative sum: take the last candidate
                item = last
            out[t, k] = item + 1
            recalled[item] = True
            recall_update(params, n, n_blocks, item, mats, vecs, coords, ready, state, no_x)
            previous = item


@njit(**JIT)
def record_trial(params, n, pool, sim, sim_gram, row_sum, feature_gram, n_blocks, recalls,
                 study_x, start_x, cue_x, support_out, prob_out, stop_out):
    """One trial's states: context coefficients during study and before each scored event.

    Outputs (NaN-padded by the caller): study_x (nb, n, m) after each studied item; start_x
    (nb, m) after start reinstatement; cue_x (nb, E, m) before each scored event (the cue);
    support_out (E, n) floored supports (NaN for recalled items); prob_out (E, n) probability
    of recalling each item at that event (choice x (1 - P(stop))); stop_out (E,) P(stop).
    Returns the number of scored events E (correct first recalls + the stop).
    """
    mats, vecs, coords, start, ready = work_arrays(n_blocks, n)
    build_structure(params, n, pool, sim, sim_gram, row_sum, feature_gram, n_blocks, np.arange(n),
                    mats, vecs, coords, start, ready)
    m = n + 1
    x = np.zeros((n_blocks, m))
    for b in range(n_blocks):
        for q in range(m):
            x[b, q] = start[b, 0, q]
            start_x[b, q] = start[b, 0, q]
        for i in range(n):
            for q in range(m):
                study_x[b, i, q] = coords[b, CO_XS, i, q]
    state = np.zeros((n_blocks, 3, n))
    start_recall(n, n_blocks, vecs, state)
    support = np.zeros(n)
    prob = np.zeros(n)
    recalled = np.zeros(n, dtype=np.bool_)
    n_events = 0
    n_left = n
    previous = -1
    for k in range(recalls.shape[0] + 1):
        pos = recalls[k] if k < recalls.shape[0] else 0
        if pos != 0 and (pos < 0 or recalled[pos - 1]):
            continue
        p_stop = stop_probability(params, n_events, n_left)
        for b in range(n_blocks):
            for q in range(m):
                cue_x[b, n_events, q] = x[b, q]
        stop_out[n_events] = p_stop
        if n_left > 0:
            supports(params, n, n_blocks, state, sim, previous, recalled, support)
            choice_probabilities(support, recalled, params[TEMP], prob)
            for i in range(n):
                support_out[n_events, i] = np.nan if recalled[i] else support[i]
                prob_out[n_events, i] = prob[i] * (1.0 - p_stop)
        n_events += 1
        if pos == 0:
            break
        item = pos - 1
        recalled[item] = True
        n_left -= 1
        recall_update(params, n, n_blocks, item, mats, vecs, coords, ready, state, x)
        previous = item
    return n_events
