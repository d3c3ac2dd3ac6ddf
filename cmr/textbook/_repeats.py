"""numba kernels of the repeated-item steps of ``_network`` (lists that study an item more than once),
and the context integration in list coordinates that both use.

A repeated item keeps the slot of its first presentation (``items[i]``: the 0-based first position
of presentation ``i``); ``xf``, ``uf`` hold per item the sum of its presentations' study contexts
and their duals ``G x`` (``_network``'s ``CO_XF``, ``CO_UF``).
"""
from __future__ import annotations

import math

from numba import njit

from ..jit import JIT
from ._kernels import LFC, primacy_rate


@njit(**JIT)
def integrate(x, u, n, cdot, beta):
    """Scale x and u = G x by rho, the first half of c <- rho c + beta c_in; return rho."""
    rho = math.sqrt(1.0 + beta * beta * (cdot * cdot - 1.0)) - beta * cdot
    for k in range(n + 1):
        x[k] *= rho
        u[k] *= rho
    return rho


@njit(**JIT)
def study_repeat(params, n, item, g, x, u, xf, uf, beta):
    """Integrate a repeated presentation of ``item`` into context (x, u = G x) with ``beta``.

    Its input is ``b_item + Lfc * XF[item]`` (XF: the sum of its earlier study contexts, dual
    ``UF = G XF``), normalised: cymr's ``c_in = M_fc[item]`` with what was learned so far.
    """
    lfc = params[LFC]
    cc = 0.0
    xdot = 0.0
    for q in range(n + 1):
        cc += xf[item, q] * uf[item, q]
        xdot += x[q] * uf[item, q]
    norm2 = g[item, item] + 2.0 * lfc * uf[item, 1 + item] + lfc * lfc * cc
    s = 1.0 / math.sqrt(norm2) if norm2 > 0 else 0.0
    integrate(x, u, n, (u[1 + item] + lfc * xdot) * s, beta)
    coef = beta * s
    for q in range(n + 1):
        x[q] += coef * lfc * xf[item, q]
        u[q] += coef * lfc * uf[item, q]
    x[1 + item] += coef
    for k in range(n):
        u[1 + k] += coef * g[k, item]


@njit(**JIT)
def add_repeat_row(params, n, i, items, h, us, rows):
    """Add presentation i's ``rate * context`` to the M_cf row of its item (a repeat; in place)."""
    item = items[i]
    rate = primacy_rate(params, i)
    rows[item, 0] += rate * us[i, 0]
    for k in range(n):
        rows[item, 1 + k] += rate * us[i, 1 + k]


@njit(**JIT)
def close_repeat_slots(n, list_items, recalled):
    """Mark the slots of later presentations as unavailable: only distinct items compete."""
    for i in range(n):
        if list_items[i] != i:
            recalled[i] = True


@njit(**JIT)
def distinct_items(n, list_items):
    """Number of distinct items of a list (presentations that are first presentations)."""
    count = 0
    for i in range(n):
        if list_items[i] == i:
            count += 1
    return count
