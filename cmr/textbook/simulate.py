"""Seeded free-recall simulation of textbook CMR, returned as a psifr-format table.

The simulated table goes through the same path as human data (``cmr.events.from_table``),
so every analysis (lag-CRP, SPC, PFR, likelihood, fitting) runs on model and data alike.
The recall process follows cymr's ``generate_recall``: before each output, stop with
probability ``P(stop)``; otherwise draw one not-yet-recalled item from the choice rule and
update context with ``B_rec``. Randomness comes only from the ``rng`` argument.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .._checks import as_generator, integer
from ..errors import RecallDataError
from ..events import from_recall_matrix, to_table
from . import _kernels
from .parameters import parameter_vector

__all__ = ["simulate_recalls", "simulate_free_recall"]


def simulate_recalls(
    params: Mapping[str, float],
    list_length: int,
    n_trials: int,
    *,
    rng=None,
    pool_size: int | None = None,
) -> np.ndarray:
    """Recall matrix of ``n_trials`` simulated lists.

    Parameters
    ----------
    params : mapping
        All 14 CMR parameters (cymr names).
    list_length, n_trials : int
    rng : numpy.random.Generator or int or None
        Source of randomness (an int is a seed; None draws fresh OS entropy).
    pool_size : int, optional
        cymr pool size for a pool-sized context (default: list-sized).

    Returns
    -------
    numpy.ndarray of int64, shape (n_trials, list_length)
        1-based serial positions in output order, 0 padding.
    """
    vector = parameter_vector(params)
    n = integer(list_length, "list_length")
    trials = integer(n_trials, "n_trials")
    n_other = 0 if pool_size is None else integer(pool_size, "pool_size") - n
    if n_other < 0:
        raise RecallDataError(f"pool_size must be >= list_length ({n}); got {pool_size!r}")
    lengths = np.full(trials, n, dtype=np.int64)
    out = np.zeros((trials, n), dtype=np.int64)
    _kernels.simulate_trials(vector, lengths, np.full(trials, n_other, dtype=np.int64), as_generator(rng), out)
    return out


def simulate_free_recall(
    params: Mapping[str, float],
    list_length: int,
    n_lists: int,
    *,
    subjects: int | Sequence = 1,
    rng=None,
    pool_size: int | None = None,
) -> pd.DataFrame:
    """Simulate free recall of ``n_lists`` lists for each subject; psifr long table.

    Parameters
    ----------
    params : mapping
        All 14 CMR parameters (cymr names), shared by all subjects.
    list_length : int
        Items per list.
    n_lists : int
        Lists per subject.
    subjects : int or sequence
        Number of subjects (labelled 1..k) or their labels.
    rng : numpy.random.Generator or int or None
        Source of randomness; the same seed gives the same table.
    pool_size : int, optional
        cymr pool size for a pool-sized context (default: list-sized).

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item``; items are named by serial
        position (``"1"``, ``"2"``, ...); lists are numbered 1..n_lists per subject.
    """
    if isinstance(subjects, (int, np.integer)) and not isinstance(subjects, bool):
        labels = np.arange(1, integer(subjects, "subjects") + 1)
    else:
        labels = np.asarray(subjects)
        if labels.ndim != 1 or labels.size == 0 or len(set(labels.tolist())) != labels.size:
            raise RecallDataError(f"subjects must be a count or distinct labels; got {subjects!r}")
    lists = integer(n_lists, "n_lists")
    recalls = simulate_recalls(params, list_length, lists * labels.size, rng=rng, pool_size=pool_size)
    events = from_recall_matrix(
        recalls,
        int(list_length),
        subject=np.repeat(labels, lists),
        list=np.tile(np.arange(1, lists + 1), labels.size),
        source="cmr.simulate_free_recall",
    )
    return to_table(events)
