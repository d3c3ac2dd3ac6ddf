"""Plain numpy references of CMR profiles, written as the equations read (no numba, no shortcuts).

They are the oracle the compiled kernels are tested against and the "reference" side of the
benchmarks, so both compare against the same transcription.
"""
from __future__ import annotations

import numpy as np

from ..deprecation import keyword_only

__all__ = ["teacher_forced_reference"]


@keyword_only
def teacher_forced_reference(beta_enc, beta_rec, gamma, *, list_length: int = 100, max_lag: int = 8) -> np.ndarray:
    """Teacher-forced lag profile of the paper's CMR variant at one parameter point.

    A straight transcription with explicit matrices, computed as the study computed them:
    ``M = (I - (1 - beta_enc) S)^-1 S`` over ``list_length + 1`` context states (``S`` the
    shift by one state), so ``M[i, j] = (1 - beta_enc)^(j - i - 1)`` for ``j > i``. Context
    ``t`` starts at state 0; at each output step ``k > 0`` the input ``(1 - gamma) e_k +
    gamma M e_k``, normalised, is blended in with ``beta_rec`` and ``t`` normalised again
    (teacher forcing: the list is recalled in order). The step's recall probabilities are the
    support ``(M^T t)[:list_length]`` over its sum, read at item ``k + lag``; a step with no
    support is skipped.

    Parameters
    ----------
    beta_enc, beta_rec, gamma : float
        The paper's parameters (``beta_enc`` in (0, 1], the others in [0, 1]).
    list_length : int
        Items in the list (``N``).
    max_lag : int
        The profile covers lags ``-max_lag..max_lag``.

    Returns
    -------
    numpy.ndarray, shape (2 * max_lag + 1,)
        Per lag, the recall probability at that lag averaged over the steps that can reach it
        (those ``k`` with ``0 <= k + lag < list_length``); NaN at a lag no step reaches.
    """
    n = int(list_length)
    states = n + 1
    shift = np.eye(states, k=1)
    m = np.linalg.inv(np.identity(states) - (1 - beta_enc) * shift) @ shift
    eye = np.identity(states)
    t = eye[0].copy()
    sums = np.zeros(2 * max_lag + 1)
    counts = np.zeros(2 * max_lag + 1)
    for k in range(n):
        if k > 0:
            t_in = (1 - gamma) * eye[k] + gamma * (m @ eye[k])
            t_in /= np.linalg.norm(t_in)
            t = (1 - beta_rec) * t + beta_rec * t_in
            t /= np.linalg.norm(t)
        support = (m.T @ t)[:n]
        total = support.sum()
        if total <= 0:
            continue
        p = support / total
        for i, lag in enumerate(range(-max_lag, max_lag + 1)):
            if 0 <= k + lag < n:
                sums[i] += p[k + lag]
                counts[i] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts
