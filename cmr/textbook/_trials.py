"""Array layer of the CMR kernels: an events dataset as the arrays ``_network`` reads.

Trials are gathered into *pattern groups*: lists that share their length, pool size, pattern
terms and presentation items share one study phase per parameter set. Localist CMR groups lists
by length (and, for lists that study an item more than once, by which presentations repeat which
item); with item patterns every list is its own group (its items have their own similarities).

Repeated items (docs/repetition.md): ``group_items[g, i]`` is the item of presentation ``i`` as
the 0-based position of its first presentation (``i`` itself in a list without repeats), read
from the events through :func:`cmr.repetition.presentation_items`. A list-sized context then has
one item unit per distinct item.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..checks import integer, shown
from ..errors import RecallDataError
from ..events import to_recall_matrix
from ..repetition import presentation_items
from .patterns import ItemPatterns

__all__ = ["TrialArrays", "trial_arrays", "localist_arrays"]


@dataclass(frozen=True)
class TrialArrays:
    """Kernel-ready arrays of a set of trials (C-contiguous, one dtype each)."""

    recalls: np.ndarray  # (T, outputs) int64
    list_length: np.ndarray  # (T,) int64
    trial_group: np.ndarray  # (T,) int64
    group_length: np.ndarray  # (G,) int64
    group_pool: np.ndarray  # (G,) float64: units of the item segment
    group_sim: np.ndarray  # (G, L, L)
    group_sim_gram: np.ndarray  # (G, L, L)
    group_row_sum: np.ndarray  # (G, L)
    group_feature_gram: np.ndarray  # (G, L, L)
    n_blocks: int
    pool_rows: np.ndarray  # (T, L) int64: pool row of each studied item (-1 without patterns)
    group_items: np.ndarray  # (G, L) int64: item of each presentation, 0-based first position

    @property
    def n_trials(self) -> int:
        return int(self.recalls.shape[0])

    @cached_property
    def has_repeats(self) -> bool:
        """Whether any list studies an item more than once."""
        return bool((self.group_items != np.arange(self.group_items.shape[1])[None, :]).any())

    def kernel_groups(self):
        """The group arguments of the ``_network`` kernels, in their order."""
        return (self.group_length, self.group_pool, self.group_sim, self.group_sim_gram, self.group_row_sum,
                self.group_feature_gram, self.n_blocks, self.group_items)

    def order(self, trial_param: np.ndarray) -> np.ndarray:
        """Visiting order: trials sharing (parameter row, group) are consecutive."""
        return np.lexsort((np.arange(self.n_trials), self.trial_group, trial_param)).astype(np.int64)

    def subset(self, rows) -> "TrialArrays":
        """The arrays of trials ``rows`` only (groups renumbered)."""
        rows = np.asarray(rows, dtype=np.int64)
        used, group = np.unique(self.trial_group[rows], return_inverse=True)
        take = lambda a: np.ascontiguousarray(a[used])  # noqa: E731 - local shorthand
        return TrialArrays(
            np.ascontiguousarray(self.recalls[rows]), np.ascontiguousarray(self.list_length[rows]),
            np.ascontiguousarray(group.reshape(-1), dtype=np.int64), take(self.group_length), take(self.group_pool),
            take(self.group_sim), take(self.group_sim_gram), take(self.group_row_sum),
            take(self.group_feature_gram), self.n_blocks, np.ascontiguousarray(self.pool_rows[rows]),
            take(self.group_items),
        )


def trial_arrays(events, patterns: ItemPatterns | None = None, pool_size: int | None = None, *,
                 reuse: bool = False) -> TrialArrays:
    """Kernel arrays of an events dataset.

    Parameters
    ----------
    events : xarray.Dataset
        Kind ``events`` (already validated).
    patterns : ItemPatterns, optional
        Item pool and patterns; every studied item must be in the pool. The item segment of
        context then has one unit per pool item (cymr's pool-sized context).
    pool_size : int, optional
        Localist CMR only: cymr's pool size (default: list-sized context, n items).
    reuse : bool
        For a caller that validated ``events`` and only reads the arrays (one likelihood):
        the events are not checked again, and the pattern terms of study lists seen in a
        recent call are the arrays made then (:meth:`ItemPatterns.study_terms`).
    """
    if reuse:  # validated by the caller: read directly
        recalls = events.variables["recalls"]
        if recalls.dims != ("trial", "output_position"):
            recalls = recalls.transpose("trial", "output_position")
        recalls = np.ascontiguousarray(recalls.values, dtype=np.int64)
        list_length = np.ascontiguousarray(events.variables["list_length"].values, dtype=np.int64)
    else:
        recalls, list_length = to_recall_matrix(events)
    if recalls.shape[1] == 0:
        recalls = np.zeros((recalls.shape[0], 1), dtype=np.int64)
    n_trials = recalls.shape[0]
    longest = int(list_length.max())
    items = first_positions(presentation_items(events)[:, :longest], list_length)
    recalls = _recalls_to_first(recalls, items)
    if patterns is not None:
        if pool_size is not None and int(pool_size) != patterns.size:
            raise RecallDataError(
                f"pool_size ({pool_size!r}) must be left out or equal the item pool's size ({patterns.size})"
            )
        study = events.variables["study_item"]
        if study.dims != ("trial", "study_position"):
            study = study.transpose("trial", "study_position")
        if reuse:
            rows, sim, gram, row_sum, feats = patterns.study_terms(study.values, list_length)
        else:
            rows = patterns.index_of(study.values)
            sim, gram, row_sum, feats = patterns.lists_arrays(rows, list_length)
        return TrialArrays(
            np.ascontiguousarray(recalls), list_length, np.arange(n_trials, dtype=np.int64),
            list_length.copy(), np.full(n_trials, float(patterns.size)), sim, gram, row_sum, feats,
            patterns.n_blocks, np.ascontiguousarray(rows[:, :longest], dtype=np.int64), items,
        )
    return localist_arrays(recalls, list_length, pool_size, items)


def first_positions(presentation: np.ndarray, list_length: np.ndarray) -> np.ndarray:
    """0-based item of each presentation (T, L) from 1-based first positions (0 padding).

    Padding beyond a list's length reads as its own position (no item). Raises
    :class:`~cmr.errors.RecallDataError` where a presentation names a position that is not the
    first presentation of an item.
    """
    presentation = np.asarray(presentation, dtype=np.int64)
    n_trials, longest = presentation.shape
    positions = np.arange(longest, dtype=np.int64)
    inside = positions[None, :] < np.asarray(list_length)[:, None]
    items = np.where(inside, presentation - 1, positions[None, :])
    bad = inside & ((items < 0) | (items > positions[None, :]))
    named = np.take_along_axis(items, np.clip(items, 0, longest - 1), axis=1)
    bad |= inside & (named != items)  # a first presentation names itself
    if bad.any():
        t, i = np.argwhere(bad)[0]
        raise RecallDataError(
            f"presentation_item must give each presentation the position (1-based) of its item's first "
            f"presentation; got {int(presentation[t, i])} at study position {int(i) + 1} of trial {int(t)}"
        )
    return np.ascontiguousarray(items)


def _recalls_to_first(recalls: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Recalls of a later presentation's position scored to the item's first position."""
    if (items == np.arange(items.shape[1])[None, :]).all():
        return recalls
    rows, cols = np.nonzero(recalls > 0)
    out = recalls.copy()
    out[rows, cols] = items[rows, recalls[rows, cols] - 1] + 1
    return np.ascontiguousarray(out)


def localist_arrays(recalls: np.ndarray, list_length: np.ndarray, pool_size: int | None = None,
                    items: np.ndarray | None = None) -> TrialArrays:
    """Kernel arrays of localist CMR for a recall matrix (grouped by list length and repeats).

    ``items`` (T, L): the item of each presentation as the 0-based position of its first
    presentation (:func:`first_positions`); default: no repeats.
    """
    n_trials = recalls.shape[0]
    longest = int(list_length.max())
    plain = np.arange(longest, dtype=np.int64)
    if items is None or (items == plain[None, :]).all():
        lengths, group = np.unique(list_length, return_inverse=True)
        group_items = np.tile(plain, (lengths.size, 1))
        distinct = lengths
    else:
        keys = np.column_stack([list_length, items])
        unique_keys, group = np.unique(keys, axis=0, return_inverse=True)
        lengths, group_items = unique_keys[:, 0], unique_keys[:, 1:]
        distinct = np.array([int((row[:n] == plain[:n]).sum()) for row, n in zip(group_items, lengths)])
    if pool_size is None:
        pool = distinct.astype(np.float64)
    else:
        size = integer(pool_size, "pool_size", error=RecallDataError)
        if size < int(distinct.max()):
            what = (f"the longest list ({longest})" if distinct is lengths
                    else f"the most distinct items of a list ({int(distinct.max())})")
            raise RecallDataError(f"pool_size must be an integer >= {what}; got {shown(pool_size)}")
        pool = np.full(lengths.size, float(size))
    zeros = np.zeros((lengths.size, longest, longest))
    return TrialArrays(
        np.ascontiguousarray(recalls, dtype=np.int64), np.ascontiguousarray(list_length, dtype=np.int64),
        np.ascontiguousarray(group.reshape(-1), dtype=np.int64), lengths.astype(np.int64), pool, zeros,
        zeros.copy(), np.zeros((lengths.size, longest)), zeros.copy(), 1,
        np.full((n_trials, longest), -1, dtype=np.int64), np.ascontiguousarray(group_items, dtype=np.int64),
    )
