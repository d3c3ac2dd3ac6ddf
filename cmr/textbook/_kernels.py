"""numba kernels of textbook localist CMR, arithmetic matched to cymr 0.14 (config_loc_cmr).

Layout. ``params`` is the float64 vector of cmr.parameters.PARAMETER_NAMES. A list of
``n`` items has ``n + 2`` context units: ``0..n-1`` the items (serial positions),
``n`` the start-of-list unit, ``n + 1`` one unit standing for ``n_other`` identical
context units of pool items that were not studied (cymr's pool-sized context; they all
receive the same input, so one unit with multiplicity ``n_other`` in every dot product is
exact). ``unit_weight`` holds those multiplicities (1, ..., 1, 1, n_other).

Learned weights are stored implicitly: ``M_fc_exp[i] = Lfc * c_study[i]`` and
``M_cf_exp[i] = Lcf_i * c_study[i]``, where ``c_study[i]`` is context right after item i.
No validation here; the public layer checks everything.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# parameter vector indices (cmr.parameters.PARAMETER_NAMES order)
LFC, LCF, P1, P2, B_ENC, B_START, B_REC, TEMP, X1, X2, AFC, ACF, DFC, DCF = range(14)
SUPPORT_FLOOR = 1e-6  # cymr's amin: minimum support of a not-yet-recalled item
STOP_FLOOR = 1e-6  # cymr's pmin: p_stop clipped to [pmin, 1 - pmin]
EVENT_FLOOR = 1e-5  # cymr clips each event probability to [10e-6, 1] before the log


@njit(cache=True, nogil=True)
def integrate_context(c, c_in, beta, unit_weight):
    """c <- rho c + beta c_in with rho keeping |c| = 1 (c_in already unit length). In place."""
    cdot = 0.0
    for j in range(c.shape[0]):
        cdot += unit_weight[j] * c[j] * c_in[j]
    rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
    for j in range(c.shape[0]):
        c[j] = rho * c[j] + beta * c_in[j]


@njit(cache=True, nogil=True)
def item_input(params, item, n, c_study, studied, unit_weight, c_in):
    """Unit-length context input of item ``item``: (M_fc_pre + M_fc_exp)[item], normalised."""
    afc = params[AFC]
    lfc = params[LFC]
    for j in range(n + 2):
        c_in[j] = 0.0
    for j in range(n):
        c_in[j] = afc
    c_in[n + 1] = afc
    c_in[item] += params[DFC]
    if studied:
        for j in range(n + 2):
            c_in[j] += lfc * c_study[item, j]
    sum_squares = 0.0
    for j in range(n + 2):
        sum_squares += unit_weight[j] * c_in[j] * c_in[j]
    if sum_squares > 0:
        norm = math.sqrt(sum_squares)
        for j in range(n + 2):
            c_in[j] /= norm


@njit(cache=True, nogil=True)
def primacy_rate(params, position):
    """Context-to-item learning rate at 0-based serial position: Lcf + P1 exp(-P2 i)."""
    return params[LCF] + params[P1] * math.exp(-params[P2] * position)


@njit(cache=True, nogil=True)
def stop_probability(params, output_position, n_left):
    """P(stop) before output ``output_position`` (0-based); 1 when nothing is left."""
    if n_left == 0:
        return 1.0
    p = params[X1] * math.exp(params[X2] * output_position)
    if p < STOP_FLOOR:
        p = STOP_FLOOR
    if p > 1.0 - STOP_FLOOR:
        p = 1.0 - STOP_FLOOR
    return p


@njit(cache=True, nogil=True)
def study_list(params, n, n_other):
    """Run study of an ``n``-item list.

    Returns
    -------
    c : (n + 2,) context at the end of study (before start reinstatement)
    c_study : (n, n + 2) context right after each item was studied
    unit_weight : (n + 2,) multiplicity of each context unit
    """
    unit_weight = np.ones(n + 2)
    unit_weight[n + 1] = n_other
    c = np.zeros(n + 2)
    c[n] = 1.0  # cymr: context starts as the start unit (integration with B = 1)
    c_study = np.zeros((n, n + 2))
    c_in = np.zeros(n + 2)
    for i in range(n):
        item_input(params, i, n, c_study, False, unit_weight, c_in)
        integrate_context(c, c_in, params[B_ENC], unit_weight)
        for j in range(n + 2):
            c_study[i, j] = c[j]
    return c, c_study, unit_weight


@njit(cache=True, nogil=True)
def reinstate_start(params, c, unit_weight):
    """Integrate the start-of-list unit into context with B_start (in place)."""
    n = c.shape[0] - 2
    c_in = np.zeros(n + 2)
    c_in[n] = 1.0
    integrate_context(c, c_in, params[B_START], unit_weight)


@njit(cache=True, nogil=True)
def mcf_after_study(params, c_study):
    """Full context-to-item weights M_cf = M_cf_pre + M_cf_exp, shape (n, n + 2)."""
    n = c_study.shape[0]
    m_cf = np.zeros((n, n + 2))
    for i in range(n):
        rate = primacy_rate(params, i)
        for j in range(n + 2):
            m_cf[i, j] = rate * c_study[i, j]
        for j in range(n):
            m_cf[i, j] += params[ACF]
        m_cf[i, n + 1] += params[ACF]
        m_cf[i, i] += params[DCF]
    return m_cf


@njit(cache=True, nogil=True)
def retrieval_support(m_cf, c, unit_weight, recalled, support):
    """Support a = M_cf c for each item, floored at 1e-6; recalled items get 0. In place."""
    n = m_cf.shape[0]
    weighted = np.empty(n + 2)
    for j in range(n + 2):
        weighted[j] = unit_weight[j] * c[j]
    for i in range(n):
        if recalled[i]:
            support[i] = 0.0
            continue
        a = 0.0
        for j in range(n + 2):
            a += m_cf[i, j] * weighted[j]
        if a < SUPPORT_FLOOR:
            a = SUPPORT_FLOOR
        support[i] = a


@njit(cache=True, nogil=True)
def choice_probabilities(support, recalled, temperature, prob):
    """Softmax exp(2 a / T) over not-yet-recalled items (shifted by the max; exact ratios)."""
    n = support.shape[0]
    top = -np.inf
    for i in range(n):
        if not recalled[i] and support[i] > top:
            top = support[i]
    total = 0.0
    for i in range(n):
        if recalled[i]:
            prob[i] = 0.0
        else:
            prob[i] = math.exp(2.0 * (support[i] - top) / temperature)
            total += prob[i]
    for i in range(n):
        prob[i] /= total


@njit(cache=True, nogil=True)
def recall_update(params, item, c, c_study, unit_weight, c_in):
    """Context update after recalling ``item``: integrate its M_fc input with B_rec."""
    n = c_study.shape[0]
    item_input(params, item, n, c_study, True, unit_weight, c_in)
    integrate_context(c, c_in, params[B_REC], unit_weight)


@njit(cache=True, nogil=True)
def trial_event_probabilities(params, n, n_other, recalls, event_p):
    """Probabilities of one trial's recall events and the final stop, as cymr scores them.

    ``recalls`` holds 1-based serial positions, -1 intrusions, 0 padding (end). Intrusions
    and repeats are skipped (cymr removes them before scoring); the remaining correct
    first recalls and then the stop event are scored. Probabilities are raw (not floored).
    Returns the number of events written to ``event_p``.
    """
    c, c_study, unit_weight = study_list(params, n, n_other)
    reinstate_start(params, c, unit_weight)
    m_cf = mcf_after_study(params, c_study)
    recalled = np.zeros(n, dtype=np.bool_)
    support = np.zeros(n)
    prob = np.zeros(n)
    c_in = np.zeros(n + 2)
    n_events = 0
    n_left = n
    for k in range(recalls.shape[0]):
        pos = recalls[k]
        if pos == 0:
            break
        if pos < 0 or recalled[pos - 1]:
            continue
        item = pos - 1
        p_stop = stop_probability(params, n_events, n_left)
        retrieval_support(m_cf, c, unit_weight, recalled, support)
        choice_probabilities(support, recalled, params[TEMP], prob)
        event_p[n_events] = prob[item] * (1.0 - p_stop)
        n_events += 1
        recalled[item] = True
        n_left -= 1
        recall_update(params, item, c, c_study, unit_weight, c_in)
    event_p[n_events] = stop_probability(params, n_events, n_left)
    return n_events + 1


@njit(cache=True, nogil=True)
def trials_log_likelihood(params, list_length, n_other, recalls, trial_logl, trial_n, event_p):
    """Floored log-likelihood of every trial; event probabilities into ``event_p`` rows.

    params (14,), list_length (trials,) int64, n_other (trials,) int64, recalls
    (trials, outputs) int64; outputs trial_logl (trials,), trial_n (trials,) int64,
    event_p (trials, outputs + 1) (NaN beyond each trial's events).
    """
    for t in range(recalls.shape[0]):
        row = event_p[t]
        for k in range(row.shape[0]):
            row[k] = np.nan
        count = trial_event_probabilities(params, list_length[t], n_other[t], recalls[t], row)
        logl = 0.0
        for k in range(count):
            p = row[k]
            if p < EVENT_FLOOR:
                p = EVENT_FLOOR
            elif p > 1.0:
                p = 1.0
            logl += math.log(p)  # NaN stays NaN: the public layer warns
        trial_logl[t] = logl
        trial_n[t] = count


@njit(cache=True, nogil=True)
def population_log_likelihood(param_sets, list_length, n_other, recalls):
    """Total floored log-likelihood of all trials for each row of ``param_sets`` (S, 14)."""
    n_trials, n_out = recalls.shape
    trial_logl = np.zeros(n_trials)
    trial_n = np.zeros(n_trials, dtype=np.int64)
    event_p = np.zeros((n_trials, n_out + 1))
    totals = np.zeros(param_sets.shape[0])
    for s in range(param_sets.shape[0]):
        trials_log_likelihood(param_sets[s], list_length, n_other, recalls, trial_logl, trial_n, event_p)
        totals[s] = trial_logl.sum()
    return totals


@njit(cache=True, nogil=True)
def simulate_trials(params, list_length, n_other, rng, out):
    """Free recall of each trial into rows of ``out`` (1-based positions, 0 padding).

    Follows cymr's generate_recall: before each output draw stop with P(stop); otherwise
    draw an item from the choice probabilities, then update context with B_rec.
    """
    n_trials = list_length.shape[0]
    for t in range(n_trials):
        n = list_length[t]
        for k in range(out.shape[1]):
            out[t, k] = 0
        c, c_study, unit_weight = study_list(params, n, n_other[t])
        reinstate_start(params, c, unit_weight)
        m_cf = mcf_after_study(params, c_study)
        recalled = np.zeros(n, dtype=np.bool_)
        support = np.zeros(n)
        prob = np.zeros(n)
        c_in = np.zeros(n + 2)
        for k in range(n):
            if rng.random() < stop_probability(params, k, n - k):
                break
            retrieval_support(m_cf, c, unit_weight, recalled, support)
            choice_probabilities(support, recalled, params[TEMP], prob)
            u = rng.random()
            item = -1
            cum = 0.0
            last = -1
            for i in range(n):
                if recalled[i]:
                    continue
                last = i
                cum += prob[i]
                if u < cum:
                    item = i
                    break
            if item < 0:  # rounding left u above the cumulative sum: take the last candidate
                item = last
            out[t, k] = item + 1
            recalled[item] = True
            recall_update(params, item, c, c_study, unit_weight, c_in)
