"""Lists that study an item more than once: the presentation map and the repetition analyses.

An events dataset may hold lists in which an item is studied more than once (docs/repetition.md).
Its variable ``presentation_item`` (trial, study_position) gives, for each presentation, the serial
position (1-based) of that item's first presentation in its list, ``0`` for padding beyond
``list_length``; ``recalls`` score a recall of a repeated item to that first position. Files without
the variable are repeat-free, and their map is ``1..list_length``. Everything reads the map through
:func:`presentation_items`.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["presentation_items", "has_repeats"]


def presentation_items(events: xr.Dataset) -> np.ndarray:
    """The first-presentation position of each presentation, (trial, study_position) int64.

    Parameters
    ----------
    events : xarray.Dataset
        Kind ``"events"``.

    Returns
    -------
    numpy.ndarray of int64, shape (n_trials, n_study_positions)
        ``presentation_item`` when the dataset has it, else its repeat-free default: serial
        positions ``1..list_length`` and ``0`` beyond each list's length.
    """
    if "presentation_item" in events.variables:
        values = events["presentation_item"].transpose("trial", "study_position").values
        return np.ascontiguousarray(values, dtype=np.int64)
    length = np.asarray(events["list_length"].values, dtype=np.int64)
    positions = np.arange(1, events.sizes["study_position"] + 1, dtype=np.int64)
    return np.where(positions[None, :] <= length[:, None], positions[None, :], 0)


def has_repeats(events: xr.Dataset) -> bool:
    """Whether any list of ``events`` studies an item more than once."""
    if "presentation_item" not in events.variables:
        return False
    items = presentation_items(events)
    positions = np.arange(1, items.shape[1] + 1, dtype=np.int64)
    return bool(((items != positions[None, :]) & (items > 0)).any())
