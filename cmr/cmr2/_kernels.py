"""numba kernels of CMR2 (Lohnas, Polyn & Kahana 2015): one network per session, lists in order.

Layout. ``params`` is the float64 vector of ``CMR2_PARAMETER_NAMES`` (textbook CMR's 14, then
``B_distract``, ``C_thresh``). A session of ``L`` lists whose lists studied ``U`` distinct items has
``D = L + U`` context units: ``l`` the start-of-list unit of list ``l`` (the distractor presented
before it), ``L + i`` item ``i`` (items numbered in order of first study). Weights are dense
``(U, D)`` rows: ``m_fc[i]`` is item i's input to context, ``m_cf[i]`` its retrieval cue weights.
Why this order: before list ``l``'s recall only units ``0 .. L + u - 1`` (``u`` items studied so
far) can be nonzero in context and in the rows of studied items when ``Afc = 0``, so every dot
product runs over that prefix (``width``); adding the zeros beyond it would change no bit.
Nothing is reset between lists: context, ``m_fc`` and ``m_cf`` carry over, so items of prior
lists compete at every recall (prior-list intrusions).

Each recall period: the candidates are the items studied so far in the session, not yet
reported in this period, whose context similarity ``c . c_in(i)`` is at least ``C_thresh``
(CMR2's post-retrieval check; a rejected retrieval leaves context as it was and retrieval runs
again, so the reported item follows the Luce choice restricted to the candidates). Scored
events, stop rule, support floor and choice rule are textbook CMR's (cymr's), shared with
:mod:`cmr.textbook._kernels`. No validation here; the public layer checks everything.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import JIT
from ..textbook._kernels import (
    ACF, AFC, B_ENC, B_REC, B_START, DCF, DFC, EVENT_FLOOR, LFC, SUPPORT_FLOOR, TEMP,
    primacy_rate, stop_probability,
)

B_DISTRACT, C_THRESH = 14, 15


@njit(**JIT)
def _integrate(c, c_in, beta, d):
    """c <- rho c + beta c_in over the first d units, rho keeping |c| = 1 (c_in unit length)."""
    cdot = 0.0
    for j in range(d):
        cdot += c[j] * c_in[j]
    rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
    for j in range(d):
        c[j] = rho * c[j] + beta * c_in[j]


@njit(**JIT)
def _row_norm(m_fc, unit, d):
    """|m_fc[unit]| over the first d units. A row whose squares underflow (entries below about
    1e-154) is scaled by its largest entry first, so a tiny but nonzero input keeps its direction."""
    norm = 0.0
    for j in range(d):
        norm += m_fc[unit, j] * m_fc[unit, j]
    if norm >= 1e-290:
        return math.sqrt(norm)
    scale = 0.0
    for j in range(d):
        scale = max(scale, abs(m_fc[unit, j]))
    if scale == 0.0:
        return 0.0
    norm = 0.0
    for j in range(d):
        norm += (m_fc[unit, j] / scale) * (m_fc[unit, j] / scale)
    return scale * math.sqrt(norm)


@njit(**JIT)
def _present_item(m_fc, fc_norm, unit, c, c_in, beta, d):
    """Integrate item ``unit``'s input m_fc[unit], normalised (``fc_norm`` holds the row norms),
    into context with ``beta``."""
    norm = fc_norm[unit]
    for j in range(d):
        c_in[j] = m_fc[unit, j] / norm if norm > 0 else 0.0
    _integrate(c, c_in, beta, d)


@njit(**JIT)
def _present_start(unit, c, c_in, beta, d):
    """Integrate the one-hot start-of-list (distractor) unit into context with ``beta``."""
    for j in range(d):
        c_in[j] = 0.0
    c_in[unit] = 1.0
    _integrate(c, c_in, beta, d)


@njit(**JIT)
def _new_session(params, n_units, offset, d, m_fc, m_cf, fc_norm, c, studied):
    """Pre-experimental weights A (all item units) + D (own unit); zero context; nothing studied."""
    for i in range(n_units):
        studied[i] = False
        for j in range(d):
            m_fc[i, j] = params[AFC] if j >= offset else 0.0
            m_cf[i, j] = params[ACF] if j >= offset else 0.0
        m_fc[i, offset + i] += params[DFC]
        m_cf[i, offset + i] += params[DCF]
        fc_norm[i] = _row_norm(m_fc, i, d)
    for j in range(d):
        c[j] = 0.0


@njit(**JIT)
def _study_list(params, offset, d, list_index, units, length, m_fc, m_cf, fc_norm, c, c_in, studied, n_active):
    """The list's start unit (B = 1 for the first list, else B_distract), then its items with
    B_enc, each followed by learning; finally start-of-list reinstatement with B_start.
    ``n_active`` is the number of items studied before; returns it after the list."""
    for pos in range(length):
        n_active = max(n_active, units[pos] + 1)
    width = d if params[AFC] > 0 else offset + n_active
    _present_start(list_index, c, c_in, 1.0 if list_index == 0 else params[B_DISTRACT], width)
    for pos in range(length):
        unit = units[pos]
        _present_item(m_fc, fc_norm, unit, c, c_in, params[B_ENC], width)
        rate = primacy_rate(params, pos)
        for j in range(width):
            m_fc[unit, j] += params[LFC] * c[j]
            m_cf[unit, j] += rate * c[j]
        fc_norm[unit] = _row_norm(m_fc, unit, width)  # the row is 0 beyond width (module docstring)
        studied[unit] = True
    _present_start(list_index, c, c_in, params[B_START], width)
    return n_active


@njit(**JIT)
def _candidates(params, n_active, width, m_fc, fc_norm, c, studied, reported, candidate):
    """Mark the items that can be reported now (studied, not reported, similarity >= C_thresh);
    return their number."""
    thresh = params[C_THRESH]
    count = 0
    for i in range(n_active):
        ok = studied[i] and not reported[i]
        if ok and thresh > 0.0:
            dot = 0.0
            for j in range(width):
                dot += m_fc[i, j] * c[j]
            ok = fc_norm[i] > 0 and dot / fc_norm[i] >= thresh
        candidate[i] = ok
        if ok:
            count += 1
    return count


@njit(**JIT)
def _choice(params, n_active, width, m_cf, c, candidate, prob):
    """Luce choice over the candidates: exp(2 a / T) of the floored support a = m_cf c
    (max-shifted, as textbook CMR); 0 for the others. Needs at least one candidate."""
    top = -np.inf
    for i in range(n_active):
        if not candidate[i]:
            prob[i] = 0.0
            continue
        a = 0.0
        for j in range(width):
            a += m_cf[i, j] * c[j]
        if a < SUPPORT_FLOOR:
            a = SUPPORT_FLOOR
        prob[i] = a
        if a > top:
            top = a
    total = 0.0
    for i in range(n_active):
        if candidate[i]:
            prob[i] = math.exp(2.0 * (prob[i] - top) / params[TEMP])
            total += prob[i]
    for i in range(n_active):
        prob[i] /= total


@njit(**JIT)
def _work(session_units, session_first):
    max_units = 1
    max_d = 1
    for s in range(session_units.shape[0]):
        d = session_units[s] + session_first[s + 1] - session_first[s]
        max_units = max(max_units, session_units[s])
        max_d = max(max_d, d)
    m_fc = np.zeros((max_units, max_d))
    m_cf = np.zeros((max_units, max_d))
    c = np.zeros(max_d)
    c_in = np.zeros(max_d)
    return m_fc, m_cf, np.zeros(max_units), c, c_in, np.zeros(max_units), np.zeros(max_units, dtype=np.bool_), \
        np.zeros(max_units, dtype=np.bool_), np.zeros(max_units, dtype=np.bool_)


@njit(**JIT)
def sessions_log_likelihood(param_table, session_param, session_first, session_units, study, list_length, scored,
                            n_scored, trial_logl, trial_n, event_p):
    """Floored log-likelihood of every list; raw event probabilities into ``event_p`` rows.

    Parameters
    ----------
    param_table : (K, 16) CMR2 parameter vectors; session s uses row ``session_param[s]``.
    session_first : (S + 1,) first trial of each session (trials of a session are consecutive).
    session_units : (S,) distinct items studied in each session.
    study : (T, Lmax) item unit of each serial position (-1 padding); list_length (T,).
    scored : (T, E) item unit of each scored recall in output order (-1 padding); n_scored (T,).
    Outputs: trial_logl (T,), trial_n (T,) events scored (recalls + the stop),
    event_p (T, E + 1) NaN-padded.
    """
    m_fc, m_cf, fc_norm, c, c_in, prob, studied, reported, candidate = _work(session_units, session_first)
    for s in range(session_units.shape[0]):
        params = param_table[session_param[s]]
        n_units = session_units[s]
        first = session_first[s]
        offset = session_first[s + 1] - first  # start units come first (module docstring)
        d = offset + n_units
        _new_session(params, n_units, offset, d, m_fc, m_cf, fc_norm, c, studied)
        n_active = 0
        for t in range(first, session_first[s + 1]):
            n_active = _study_list(params, offset, d, t - first, study[t], list_length[t], m_fc, m_cf, fc_norm, c,
                                   c_in, studied, n_active)
            width = d if params[AFC] > 0 else offset + n_active
            for i in range(n_units):
                reported[i] = False
            row = event_p[t]
            for k in range(row.shape[0]):
                row[k] = np.nan
            count = n_scored[t]
            logl = 0.0
            for e in range(count + 1):
                n_candidates = _candidates(params, n_active, width, m_fc, fc_norm, c, studied, reported, candidate)
                p_stop = stop_probability(params, e, n_candidates)
                if e == count:
                    p = p_stop
                else:
                    unit = scored[t, e]
                    p = 0.0
                    if candidate[unit]:
                        _choice(params, n_active, width, m_cf, c, candidate, prob)
                        p = prob[unit] * (1.0 - p_stop)
                    # the recall updates context whether or not the model could report it
                    _present_item(m_fc, fc_norm, unit, c, c_in, params[B_REC], width)
                    reported[unit] = True
                row[e] = p
                value = p
                if value < EVENT_FLOOR:
                    value = EVENT_FLOOR
                elif value > 1.0:
                    value = 1.0
                logl += math.log(value)  # NaN stays NaN: the public layer warns
            trial_logl[t] = logl
            trial_n[t] = count + 1


@njit(**JIT)
def simulate_sessions(param_table, session_param, session_first, session_units, study, list_length, rng, out):
    """Free recall of every list of every session into rows of ``out`` (item units, -1 padding).

    Before each output: stop with P(stop) (1 when no candidate is left); otherwise report one
    candidate drawn from the Luce choice and integrate it with B_rec. Randomness only from ``rng``.
    Arguments as :func:`sessions_log_likelihood`.
    """
    m_fc, m_cf, fc_norm, c, c_in, prob, studied, reported, candidate = _work(session_units, session_first)
    for s in range(session_units.shape[0]):
        params = param_table[session_param[s]]
        n_units = session_units[s]
        first = session_first[s]
        offset = session_first[s + 1] - first  # start units come first (module docstring)
        d = offset + n_units
        _new_session(params, n_units, offset, d, m_fc, m_cf, fc_norm, c, studied)
        n_active = 0
        for t in range(first, session_first[s + 1]):
            n_active = _study_list(params, offset, d, t - first, study[t], list_length[t], m_fc, m_cf, fc_norm, c,
                                   c_in, studied, n_active)
            width = d if params[AFC] > 0 else offset + n_active
            for i in range(n_units):
                reported[i] = False
            for k in range(out.shape[1]):
                out[t, k] = -1
            for k in range(out.shape[1]):
                n_candidates = _candidates(params, n_active, width, m_fc, fc_norm, c, studied, reported, candidate)
                if n_candidates == 0 or rng.random() < stop_probability(params, k, n_candidates):
                    break
                _choice(params, n_active, width, m_cf, c, candidate, prob)
                draw = rng.random()
                unit = -1
                last = -1
                cum = 0.0
                for i in range(n_active):
                    if not candidate[i]:
                        continue
                    last = i
                    cum += prob[i]
                    if draw < cum:
                        unit = i
                        break
                if unit < 0:  # rounding left the draw above the cumulative sum: take the last candidate
                    unit = last
                out[t, k] = unit
                reported[unit] = True
                _present_item(m_fc, fc_norm, unit, c, c_in, params[B_REC], width)
