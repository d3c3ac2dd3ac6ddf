"""The labelled ``recall_stat`` dataset every free-recall statistic returns (one builder)."""
from __future__ import annotations

import xarray as xr

from .events import unit_coordinates
from .schema import provenance_attrs, validate

__all__ = ["stat_dataset"]


def stat_dataset(events, by, labels, stat_kind, dims, coords, variables, **provenance) -> xr.Dataset:
    """A validated ``recall_stat`` dataset.

    Parameters
    ----------
    events : xarray.Dataset
        The events the statistic was computed on (for the unit coordinates).
    by, labels
        The grouping and its labels (``cmr.events.group_index``).
    stat_kind : str
        Also names the maker, ``cmr.<stat_kind>``, in the provenance.
    dims, coords
        Dims after the unit dim, and their coordinates.
    variables : dict of name -> (array with a leading group axis, attrs)
        With ``by=None`` the single group is dropped.
    **provenance
        Settings recorded in the provenance.
    """
    unit_dims, unit_coords = unit_coordinates(events, by, labels)
    ds = xr.Dataset(
        {name: (unit_dims + tuple(dims), value[0] if by is None else value, attrs)
         for name, (value, attrs) in variables.items()},
        coords={**unit_coords, **coords},
        attrs={
            **provenance_attrs("recall_stat", f"cmr.{stat_kind}", by="pooled" if by is None else by, **provenance),
            "stat_kind": stat_kind,
            "unit_kind": "pooled" if by is None else by,
        },
    )
    return validate(ds, "recall_stat")
