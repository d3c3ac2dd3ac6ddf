"""The presentation map of lists with repeated study items, and the refusal of the analyses without a
convention for them (cmr.repetition re-exports both; docs/repetition.md)."""
from __future__ import annotations

import numpy as np
import xarray as xr

from .errors import RecallDataError

__all__ = ["presentation_items", "repeat_mask", "has_repeats", "refuse_repeats"]


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


def repeat_mask(events: xr.Dataset) -> np.ndarray | None:
    """(trial, study_position) True at each presentation after an item's first; None without the variable."""
    if "presentation_item" not in events.variables:
        return None
    items = presentation_items(events)
    return (items != np.arange(1, items.shape[1] + 1)[None, :]) & (items > 0)


def has_repeats(events: xr.Dataset) -> bool:
    """Whether any list of ``events`` studies an item more than once."""
    mask = repeat_mask(events)
    return mask is not None and bool(mask.any())


def refuse_repeats(events: xr.Dataset, analysis: str) -> None:
    """RecallDataError naming ``analysis`` and the first repeat when a list studies an item twice.

    For the analyses that have no convention for repeated study items; lists without repeats
    (and files without ``presentation_item``) pass at no cost.
    """
    mask = repeat_mask(events)
    if mask is None or not mask.any():
        return
    trial, column = (int(i[0]) for i in np.nonzero(mask))
    first = int(presentation_items(events)[trial, column])
    item = events["study_item"].transpose("trial", "study_position").values[trial, column]
    subject, label = (events[name].values[trial] for name in ("subject", "list"))
    subject, label = (v.item() if isinstance(v, np.generic) else v for v in (subject, label))
    raise RecallDataError(
        f"{analysis} does not handle repeated study items (subject {subject}, list {label} studies {item!r} at "
        f"positions {first} and {column + 1}); use cmr.repetition analyses or drop the repeats"
    )
