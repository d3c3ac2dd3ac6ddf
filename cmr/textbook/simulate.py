"""Seeded free-recall simulation of CMR, returned as a psifr-format table.

The simulated table goes through the same path as human data (``cmr.events.from_table``),
so every analysis (lag-CRP, SPC, PFR, likelihood, fitting) runs on model and data alike.
The recall process follows cymr's ``generate_recall``: before each output, stop with
probability ``P(stop)``; otherwise draw one not-yet-recalled item from the choice rule and
update context with ``B_rec``. Randomness comes only from the ``rng`` argument.

Three entry points: :func:`simulate_recalls` (a recall matrix of one parameter set),
:func:`simulate_free_recall` (new lists, one or many subjects) and
:func:`simulate_experiment` (the data's own study lists replayed ``n_rep`` times, with each
subject's own parameters, e.g. a fit: the simulation of a posterior predictive check).
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import pandas as pd

from ..checks import as_generator, integer, is_integer, shown
from ..errors import ParameterError, RecallDataError
from ..events import as_events, from_recall_matrix, to_table
from ..ordering import replica_labels
from . import _network
from ._trials import TrialArrays, first_positions, localist_arrays, trial_arrays
from .parameter_sets import parameter_table, parameters_by_subject
from .patterns import ItemPatterns

__all__ = ["simulate_recalls", "simulate_free_recall", "simulate_experiment"]


def _simulate(arrays: TrialArrays, table: np.ndarray, trial_param: np.ndarray, rng) -> np.ndarray:
    """Recall matrix (T, longest list) from the kernel, trials visited in a fixed order."""
    out = np.zeros((arrays.n_trials, int(arrays.list_length.max())), dtype=np.int64)
    _network.simulate_trials(table, trial_param, arrays.trial_group, arrays.order(trial_param),
                             *arrays.kernel_groups(), as_generator(rng), out)
    return out


def simulate_recalls(
    params,
    list_length: int,
    n_trials: int,
    *,
    rng=None,
    pool_size: int | None = None,
    presentation=None,
) -> np.ndarray:
    """Recall matrix of ``n_trials`` simulated lists of localist CMR.

    Parameters
    ----------
    params : mapping
        All 14 CMR parameters (cymr names).
    list_length, n_trials : int
    rng : numpy.random.Generator or int or None
        Source of randomness (an int is a seed; None draws fresh OS entropy).
    pool_size : int, optional
        cymr pool size for a pool-sized context (default: list-sized).
    presentation : array_like of int, shape (list_length,) or (n_trials, list_length), optional
        Lists that study an item more than once (docs/repetition.md): for each study position,
        the 1-based position of its item's first presentation (``[1, 2, 1]`` studies the first
        item again at position 3). Default: every item once.

    Returns
    -------
    numpy.ndarray of int64, shape (n_trials, list_length)
        1-based serial positions in output order, 0 padding; a repeated item is reported by the
        position of its first presentation.
    """
    table, _ = parameter_table(params, np.zeros(1), patterns=False)
    if table.shape[0] != 1 or parameters_by_subject(params) is not None:
        raise ParameterError("simulate_recalls takes one parameter set; use simulate_free_recall for several")
    n = integer(list_length, "list_length")
    trials = integer(n_trials, "n_trials")
    if pool_size is not None and integer(pool_size, "pool_size", error=RecallDataError) < n:
        raise RecallDataError(f"pool_size must be >= list_length ({n}); got {shown(pool_size)}")
    rng = as_generator(rng)
    lengths = np.full(trials, n, dtype=np.int64)
    items = None
    if presentation is not None:
        given = np.asarray(presentation)
        if given.dtype.kind not in "iu" or given.shape not in ((n,), (trials, n)):
            raise RecallDataError(f"presentation must be integers of shape ({n},) or ({trials}, {n}); "
                                  f"got {given.dtype} of shape {given.shape}")
        items = first_positions(np.broadcast_to(given, (trials, n)), lengths)
    arrays = localist_arrays(np.zeros((trials, 1), dtype=np.int64), lengths, pool_size, items)
    return _simulate(arrays, table, np.zeros(trials, dtype=np.int64), rng)


def simulate_free_recall(
    params,
    list_length: int,
    n_lists: int,
    *,
    subjects: int | Sequence | None = None,
    rng=None,
    pool_size: int | None = None,
) -> pd.DataFrame:
    """Simulate free recall of ``n_lists`` new lists for each subject; psifr long table.

    Parameters
    ----------
    params : mapping, mapping by subject, recall_fit dataset or DataFrame
        One parameter set shared by all subjects, or one per subject
        (:mod:`cmr.textbook.parameter_sets`); localist CMR (items have no patterns).
    list_length : int
        Items per list.
    n_lists : int
        Lists per subject.
    subjects : int or sequence, optional
        Number of subjects (labelled 1..k) or their labels. Default: the subjects of a
        per-subject ``params``, else 1.
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
    by_subject = parameters_by_subject(params)
    if subjects is None:
        labels = np.array(list(_subject_labels(params))) if by_subject is not None else np.arange(1, 2)
    elif is_integer(subjects):
        labels = np.arange(1, integer(subjects, "subjects") + 1)
    else:
        labels = np.asarray(subjects)
        if labels.ndim != 1 or labels.size == 0 or len(set(labels.tolist())) != labels.size:
            raise RecallDataError(f"subjects must be a count or distinct labels; got {subjects!r}")
    n = integer(list_length, "list_length")
    lists = integer(n_lists, "n_lists")
    subject_of_trial = np.repeat(labels, lists)
    table, trial_param = parameter_table(params, subject_of_trial, patterns=False)
    trials = subject_of_trial.size
    if pool_size is not None and integer(pool_size, "pool_size", error=RecallDataError) < n:
        raise RecallDataError(f"pool_size must be >= list_length ({n}); got {shown(pool_size)}")
    arrays = localist_arrays(np.zeros((trials, 1), dtype=np.int64), np.full(trials, n, dtype=np.int64), pool_size)
    recalls = _simulate(arrays, table, trial_param, rng)
    events = from_recall_matrix(recalls, n, subject=subject_of_trial, list=np.tile(np.arange(1, lists + 1), labels.size),
                                source="cmr.simulate_free_recall")
    return to_table(events)


def _subject_labels(params):
    """Subject labels of a per-subject ``params`` in their own type (not as text)."""
    import xarray as xr

    if isinstance(params, xr.Dataset):
        return params["subject"].values.tolist()
    if isinstance(params, pd.DataFrame):
        return params.index.tolist()
    return list(params.keys())


def simulate_experiment(
    events,
    params,
    *,
    n_rep: int = 1,
    rng=None,
    patterns: ItemPatterns | None = None,
    pool_size: int | None = None,
) -> pd.DataFrame:
    """Replay the data's own study lists through CMR ``n_rep`` times each; psifr long table.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
        The data whose subjects, lists and studied items are replayed (recalls are ignored).
    params : mapping, mapping by subject, recall_fit dataset or DataFrame
        One set for everyone or each subject's own (e.g. the fits of those subjects).
    n_rep : int
        Simulated recall periods per studied list.
    rng : numpy.random.Generator or int or None
        Source of randomness; the same seed gives the same table.
    patterns : ItemPatterns, optional
        Item pool and patterns of semantic / category CMR (must contain the studied items).
    pool_size : int, optional
        Localist CMR: cymr pool size (default list-sized).

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item, rep``: the data's subjects and
        studied items; repetition r (0-based) of list ``l`` is list ``l + r * (max_list - min_list + 1)``
        (:func:`cmr.ordering.replica_labels`: cymr's ``generate`` numbering for lists 1..N, and
        every simulated list has its own label whatever the first list's number); ``rep`` says
        which repetition a list is. Lists labelled by text get ``"<rep>:<list>"``.
        Data read with ``list_keys`` (list numbers that start again in each session): lists are
        numbered 1..N in the data's trial order within each subject, and each list key
        (``session``) is a column with the data's value, so the table reads back with
        :func:`cmr.from_table` as it is.
    """
    events = as_events(events)
    reps = integer(n_rep, "n_rep")
    table, trial_param = parameter_table(params, events["subject"].values, patterns=patterns is not None)
    arrays = trial_arrays(events, patterns, pool_size)
    rng = as_generator(rng)
    index = np.tile(np.arange(arrays.n_trials), reps)
    replay = arrays.subset(index)
    recalls = _simulate(replay, table, trial_param[index], rng)
    keys = json.loads(events.attrs.get("list_keys", "[]"))
    lists = events["list"].values
    if keys:  # list numbers restart in each session: number the lists 1..N within each subject instead
        subjects = pd.Series(events["subject"].values)
        lists = (subjects.groupby(subjects, sort=False).cumcount() + 1).to_numpy(dtype=np.int64)
    rep = np.repeat(np.arange(reps), arrays.n_trials)
    labels = replica_labels(np.tile(lists, reps), rep)
    study = events["study_item"].transpose("trial", "study_position").values
    simulated = from_recall_matrix(recalls, events["list_length"].values[index], subject=events["subject"].values[index],
                                   list=labels, study_items=study[index], source="cmr.simulate_experiment")
    out = to_table(simulated)
    where = pd.MultiIndex.from_frame(out[["subject", "list"]])
    trial_keys = pd.MultiIndex.from_arrays([events["subject"].values[index], labels])
    out["rep"] = pd.Series(rep, index=trial_keys).reindex(where).to_numpy()
    for key in keys:  # the data's session (or other list key) of every simulated list
        out[key] = pd.Series(events[key].values[index], index=trial_keys).reindex(where).to_numpy()
    return out
