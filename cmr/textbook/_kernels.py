"""numba kernels of textbook localist CMR, unit by unit, arithmetic matched to cymr 0.14.

These step functions hold the context explicitly, one value per context unit, as cymr's
network does. The teacher-forced grids (``_teacher_forced``) run on them and property tests
check the model's invariants on them; the likelihood, the simulator and the recorder use the
list-coordinate kernels of ``_network``, which reuse the shared rules below (primacy, stop
probability, choice rule, floors).

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

from ..jit import JIT

# parameter vector indices (cmr.parameters.PARAMETER_NAMES order)
LFC, LCF, P1, P2, B_ENC, B_START, B_REC, TEMP, X1, X2, AFC, ACF, DFC, DCF = range(14)
SUPPORT_FLOOR = 1e-6  # cymr's amin: minimum support of a not-yet-recalled item
STOP_FLOOR = 1e-6  # cymr's pmin: p_stop clipped to [pmin, 1 - pmin]
EVENT_FLOOR = 1e-5  # cymr clips each event probability to [10e-6, 1] before the log


@njit(**JIT)
def integrate_context(c, c_in, beta, unit_weight):
    """c <- rho c + beta c_in with rho keeping |c| = 1 (c_in already unit length). In place."""
    cdot = 0.0
    for j in range(c.shape[0]):
        cdot += unit_weight[j] * c[j] * c_in[j]
    rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
    for j in range(c.shape[0]):
        c[j] = rho * c[j] + beta * c_in[j]


@njit(**JIT)
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


@njit(**JIT)
def primacy_rate(params, position):
    """Context-to-item learning rate at 0-based serial position: Lcf + P1 exp(-P2 i)."""
    return params[LCF] + params[P1] * math.exp(-params[P2] * position)


@njit(**JIT)
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


@njit(**JIT)
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


@njit(**JIT)
def reinstate_start(params, c, unit_weight):
    """Integrate the start-of-list unit into context with B_start (in place)."""
    n = c.shape[0] - 2
    c_in = np.zeros(n + 2)
    c_in[n] = 1.0
    integrate_context(c, c_in, params[B_START], unit_weight)


@njit(**JIT)
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


@njit(**JIT)
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


@njit(**JIT)
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


@njit(**JIT)
def recall_update(params, item, c, c_study, unit_weight, c_in):
    """Context update after recalling ``item``: integrate its M_fc input with B_rec."""
    n = c_study.shape[0]
    item_input(params, item, n, c_study, True, unit_weight, c_in)
    integrate_context(c, c_in, params[B_REC], unit_weight)
