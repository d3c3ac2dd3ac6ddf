"""The top heads by a score: one ranking for every head set the study chooses (numpy only).

Ablation sets, induction controls, the composition test's targets, the top-N table of the
published profiles and the command-line summaries all rank heads with :func:`rank_heads`, so
they agree on direction, on heads without a score and on ties.
"""
from __future__ import annotations

import numpy as np

from cmr.checks import integer

__all__ = ["rank_heads"]


def rank_heads(scores, n: int | None = None, *, largest: bool = True) -> np.ndarray:
    """Flat indices of the ``n`` best heads of ``scores``, best first.

    Parameters
    ----------
    scores : array_like of float
        One score per head, any shape: a (layer, head) grid, or heads pooled along one axis.
    n : int, optional
        How many heads to return; all ranked heads when omitted. Fewer than ``n`` come back
        when fewer heads have a finite score: a caller that needs exactly ``n`` checks the length.
    largest : bool
        True ranks the highest score first (e.g. induction score), False the lowest (e.g. CMR
        distance).

    Returns
    -------
    numpy.ndarray of int64
        Indices into ``scores`` flattened in C order; for a (layer, head) grid,
        ``np.unravel_index(order, scores.shape)`` gives the layer and head indices.

    Notes
    -----
    Heads whose score is not finite (NaN, e.g. an unfitted head, or +-inf, e.g. a head
    excluded on purpose) are never ranked. Equal scores keep C order, i.e. (layer, head)
    order on a grid: the sort is stable.
    """
    if n is not None:
        n = integer(n, "n", minimum=0)  # None: all heads
    values = np.asarray(scores, dtype=np.float64).ravel()
    finite = np.flatnonzero(np.isfinite(values))
    key = -values[finite] if largest else values[finite]
    order = finite[np.argsort(key, kind="stable")].astype(np.int64)
    return order if n is None else order[: int(n)]
