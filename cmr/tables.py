"""Tidy pandas tables from any result: one row per unit, or one row per unit and lag.

:func:`unit_table` is the call for "one row per head (or subject) with its numbers":
per-unit scalars of one or several results side by side (for heads: layer, head, induction
and copying scores from ``icl-cmr heads``, CMR distance, fitted parameters and Gaussian
distance from ``icl-cmr fit``). :func:`to_dataframe` is what ``.csv`` and ``.parquet``
outputs hold: the per-unit table for fits, the long (unit x lag) table for profiles and
statistics, psifr's long format for events.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from .errors import SchemaError
from .events import to_table
from .schema import KIND_ATTR, validate

__all__ = ["unit_table", "to_dataframe", "unit_dims", "LAYOUTS"]

#: dims that index values *within* a unit (a profile over lags, a parameter vector, ...)
WITHIN_UNIT_DIMS = (
    "lag", "previous_lag", "serial_position", "output_position", "study_position", "position",
    "parameter", "gaussian_parameter", "bound", "event", "field", "curve",
)
#: what :func:`to_dataframe` can produce
LAYOUTS = ("auto", "units", "long")
# a dim that becomes columns in the unit table must be small
_MAX_EXPANDED = 64


def unit_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The unit dims of a result (``subject``; ``model, checkpoint, layer, head``; ...), in order.

    Every dim of the dataset except those that index values within a unit (lag, parameter,
    serial position, ...), in the order of the dataset's main variable.
    """
    anchor = next((ds[name] for name in ("profile", "value", "logl", "prob", "rank") if name in ds), None)
    dims = anchor.dims if anchor is not None else tuple(ds.dims)
    return tuple(d for d in dims if d not in WITHIN_UNIT_DIMS)


def _column_name(variable: str, label) -> str:
    """Column of one entry of a per-unit vector: ``parameters`` -> ``beta_enc``, ``gaussian_parameters`` -> ``gaussian_a``."""
    label = str(label)
    if variable in ("parameters", "value"):
        return label
    if variable.endswith("_parameters"):
        return f"{variable[: -len('parameters')]}{label}"
    return f"{variable}_{label}"


def _unit_columns(ds: xr.Dataset, units: tuple[str, ...]) -> pd.DataFrame:
    """Per-unit scalars (and small per-unit vectors, one column per entry) indexed by ``units``."""
    columns = {}
    index = pd.MultiIndex.from_product([ds[d].values for d in units], names=list(units)) if units else None
    template = xr.DataArray(np.zeros([ds.sizes[d] for d in units]), dims=units, coords={d: ds[d] for d in units})
    names = [n for n in ds.coords if n not in ds.dims] + list(ds.data_vars)
    for name in names:
        var = ds[name]
        extra = [d for d in var.dims if d not in units]
        if not set(var.dims) & set(units) and units:
            continue  # dataset-wide values (e.g. a lag coordinate) are not per unit
        if len(extra) > 2 or any(d not in WITHIN_UNIT_DIMS or d == "lag" for d in extra):
            continue
        if any(ds.sizes[d] > _MAX_EXPANDED for d in extra) or var.dtype.kind not in "biufUSO":
            continue
        broadcast = var.broadcast_like(template).transpose(*units, *extra)
        if not extra:
            columns[str(name)] = np.asarray(broadcast.values).reshape(-1)
            continue
        labels = [ds[d].values if d in ds.coords else np.arange(ds.sizes[d]) for d in extra]
        flat = np.asarray(broadcast.values).reshape(-1, *[len(lab) for lab in labels])
        for position in np.ndindex(*[len(lab) for lab in labels]):
            label = "_".join(str(lab[i]) for lab, i in zip(labels, position))
            columns[_column_name(str(name), label)] = flat[(slice(None),) + position]
    return pd.DataFrame(columns, index=index)


def unit_table(*results: xr.Dataset, **named: xr.Dataset) -> pd.DataFrame:
    """One row per unit (head, subject, ...) with every per-unit number of the results.

    Parameters
    ----------
    *results : xarray.Dataset
        Results whose units agree (e.g. ``heads`` from ``icl-cmr heads`` and ``fits`` from
        ``icl-cmr fit``); their columns must not collide.
    **named : xarray.Dataset
        Results whose columns get the keyword as a prefix (``lsq=fits_lsq`` gives
        ``lsq_distance``, ``lsq_beta_enc``, ...), for two fits of the same units.

    Returns
    -------
    pandas.DataFrame
        The unit dims as the first columns (one row per combination present in the first
        result), then each result's per-unit scalars; a per-unit vector along a small dim
        becomes one column per entry (``parameters`` -> ``beta_enc, beta_rec, gamma``;
        ``gaussian_parameters`` -> ``gaussian_a, ...``). Profiles over lags are left out
        (:func:`to_dataframe` gives them).

    Raises
    ------
    SchemaError
        A result is not an icl-cmr dataset, the results' unit dims differ, or two results
        give the same column (use keywords to prefix them).
    """
    parts = [(None, ds) for ds in results] + list(named.items())
    if not parts:
        raise SchemaError("unit_table needs at least one result dataset")
    table = None
    units = None
    for prefix, ds in parts:
        if not isinstance(ds, xr.Dataset):
            raise SchemaError(f"unit_table takes xarray Datasets; got {type(ds).__name__}")
        validate(ds)
        these = unit_dims(ds)
        if units is None:
            units = these
        elif set(these) != set(units):
            raise SchemaError(
                f"results of unit_table must have the same units; got {list(units)} and {list(these)} "
                f"({ds.attrs.get(KIND_ATTR)!r} dataset)"
            )
        part = _unit_columns(ds, units)
        if prefix is not None:
            part = part.add_prefix(f"{prefix}_")
        if table is None:
            table = part
            continue
        clash = sorted(set(table.columns) & set(part.columns))
        if clash:
            raise SchemaError(
                f"unit_table: column(s) {', '.join(clash)} come from two results; pass one of them as a "
                "keyword (e.g. unit_table(heads, lsq=fits)) to prefix its columns"
            )
        table = table.join(part, how="left")
    return table.reset_index() if units else table


def _long_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per unit and per within-unit coordinate of the main variable (e.g. subject x lag)."""
    anchor = next((ds[name] for name in ("profile", "prob", "icl_score", "value") if name in ds), None)
    if anchor is None:
        anchor = max(ds.data_vars.values(), key=lambda v: v.ndim)
    dims = anchor.dims
    same = [n for n, v in ds.data_vars.items() if v.dims == dims]
    frame = ds[same].to_dataframe().reset_index()
    units = [d for d in dims if d not in WITHIN_UNIT_DIMS]
    scalars = _unit_columns(ds.drop_vars(same), tuple(units)) if units else pd.DataFrame()
    scalars = scalars.drop(columns=[c for c in scalars.columns if c in frame.columns], errors="ignore")
    if units and not scalars.empty:
        frame = frame.merge(scalars.reset_index(), on=units, how="left")
    return frame


def to_dataframe(ds: xr.Dataset, layout: str = "auto") -> pd.DataFrame:
    """A tidy table of a result, as ``.csv``/``.parquet`` outputs hold it.

    Parameters
    ----------
    ds : xarray.Dataset
        Any icl-cmr result.
    layout : {"auto", "units", "long"}
        ``units``: :func:`unit_table` (one row per unit). ``long``: one row per unit and per
        value of the main variable's other dims (e.g. subject x lag), per-unit scalars
        repeated. ``auto``: events as psifr's long table (:func:`cmr.to_table`), fits per
        unit, everything else long.
    """
    if layout not in LAYOUTS:
        raise SchemaError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    kind = validate(ds).attrs.get(KIND_ATTR)
    if kind == "events" and layout in ("auto", "long"):
        return to_table(ds)
    if layout == "units" or (layout == "auto" and kind in ("profile_fit", "recall_fit")):
        return unit_table(ds)
    return _long_table(ds)
