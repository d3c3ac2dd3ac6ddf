"""Tidy pandas tables from any result: one row per unit, or one row per unit and lag.

:func:`unit_table` is the call for "one row per head (or subject) with its numbers": the
per-unit scalars of one or several results of the same units side by side (for heads:
layer, head, induction and copying scores from ``icl-cmr heads``; CMR distance, gain,
fitted parameters, Gaussian baseline and AIC/BIC from ``icl-cmr fit``). :func:`to_dataframe`
is what ``.csv`` and ``.parquet`` outputs hold: the table of one result, the per-unit table
for fits, the long table (unit x lag, unit x serial position, ...) for profiles and recall
statistics, psifr's long format for events (:func:`cmr.to_table`, the inverse of
:func:`cmr.from_table`, which only converts events).

Column rules (also in docs/schema.md, "Tables"):

1. Units first: the unit dims in the order of the result's main variable (``subject``;
   ``trial`` followed by its ``subject`` and ``list`` labels; ``model, checkpoint, layer,
   head``; the parameters of a CMR grid) and the coordinates that label units (also a scalar
   one such as ``model`` after ``.sel(model=...)``), then in the long layout the dims within
   a unit (``lag``; ``output_position, serial_position``).
2. Then one column per variable, named as the variable, in the dataset's order.
3. A per-unit vector along ``parameter``, ``gaussian_parameter``, ``bound`` or
   ``comparison`` gives one column per entry: ``parameters`` and ``value`` give the entry's name (``beta_enc``,
   ``B_rec``); ``<x>_parameters`` and ``<x>_value`` give ``<x>_<entry>`` (``grid_beta_enc``,
   ``gaussian_mu``, ``true_B_rec``); ``parameters_<y>`` gives ``<entry>_<y>``
   (``beta_enc_ci``); any other variable gives ``<variable>_<entry>`` (``distance_ci_lower``);
   a second such dim appends ``_<entry>`` (``beta_enc_ci_lower``).
4. Left out: values that are the same for every unit (the search bounds of a fit) and curves
   over other dims (a model's loss by token position); the netCDF file keeps them, and
   :func:`left_out` names them with the layout (a variable's own table) that holds them.
5. :func:`unit_table` keywords prefix their result's columns: ``lsq=fits`` gives
   ``lsq_distance``, ``lsq_beta_enc``, ...

Types: integers stay int64, booleans become int64 0/1, floats are float64 with NaN for
missing values, text stays text as written (a subject labelled ``01`` stays ``01``); no
column holds mixed Python objects.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

from .deprecation import keyword_only
from .errors import SchemaError
from .events import to_table
from .schema import KIND_ATTR, validate

__all__ = [
    "unit_table", "to_dataframe", "unit_dims", "layouts", "table_variables", "left_out", "left_out_line",
    "LAYOUTS", "WITHIN_UNIT_DIMS", "EXPANDED_DIMS",
]

#: dims that index values *within* a unit (a profile over lags, a parameter vector, ...)
WITHIN_UNIT_DIMS = (
    "lag", "previous_lag", "serial_position", "output_position", "study_position", "position",
    "parameter", "gaussian_parameter", "bound", "comparison", "event", "field", "curve",
)
#: within-unit dims whose entries become columns of the per-unit table (rule 3)
EXPANDED_DIMS = ("parameter", "gaussian_parameter", "bound", "comparison")
#: the named layouts of :func:`to_dataframe`; the name of a data variable is a layout too (its table)
LAYOUTS = ("auto", "units", "long")
# the variable whose dims define a result's units, first one present wins
_MAIN_VARIABLES = ("profile", "prob", "value", "logl", "icl_score", "rank")
# stems of per-unit vectors named after their entries (rule 3)
_VECTOR_STEMS = ("parameters", "value")


def _main_variable(ds: xr.Dataset) -> xr.DataArray | None:
    return next((ds[name] for name in _MAIN_VARIABLES if name in ds.data_vars), None)


def unit_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The unit dims of a result, in order.

    ``("subject",)`` for recall statistics and recall fits, ``("trial",)`` per list,
    ``("model", "checkpoint", "layer", "head")`` for attention heads, the parameter dims of a
    CMR grid, ``()`` for a pooled result: every dim of the result's main variable (``profile``,
    ``prob``, ``value``, ...) except those within a unit (:data:`WITHIN_UNIT_DIMS`).
    """
    anchor = _main_variable(ds)
    dims = anchor.dims if anchor is not None else tuple(ds.dims)
    return tuple(d for d in dims if d not in WITHIN_UNIT_DIMS)


def _labels(ds: xr.Dataset, dim: str) -> np.ndarray:
    return ds[dim].values if dim in ds.coords else np.arange(ds.sizes[dim])


def _column_name(variable: str, labels) -> str:
    """Rule 3: the column of one entry of a per-unit vector (``parameters`` -> ``beta_enc``)."""
    first, rest = str(labels[0]), [str(label) for label in labels[1:]]
    for stem in _VECTOR_STEMS:
        if variable == stem:
            name = first
            break
        if variable.endswith(f"_{stem}"):
            name = f"{variable[: -len(stem) - 1]}_{first}"
            break
        if variable.startswith(f"{stem}_"):
            name = f"{first}_{variable[len(stem) + 1:]}"
            break
    else:
        name = f"{variable}_{first}"
    return "_".join([name, *rest])


def _tidy(values: np.ndarray) -> np.ndarray:
    """One column's values with spreadsheet-safe types: bool -> int64, bytes -> str, objects resolved."""
    values = np.asarray(values)
    if values.dtype.kind == "b":
        return values.astype(np.int64)
    if values.dtype.kind == "S":
        return np.array([v.decode("utf-8") for v in values], dtype=object)
    if values.dtype.kind != "O":
        return values
    inferred = pd.api.types.infer_dtype(values, skipna=True)
    if inferred == "integer":
        return values.astype(np.int64)
    if inferred == "boolean" and not pd.isna(values).any():
        return values.astype(np.int64)
    if inferred in ("floating", "mixed-integer-float", "integer-na", "decimal"):
        return values.astype(np.float64)
    if inferred == "bytes":
        return np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in values], dtype=object)
    if inferred in ("string", "empty"):
        return values
    # anything else (mixed types) is written as its text, never as a Python object
    return np.array(["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in values],
                    dtype=object)


class _Columns(dict):
    """Ordered columns of one table; a second column of the same name is a SchemaError."""

    def __init__(self, where: str):
        super().__init__()
        self.where = where

    def add(self, name: str, values) -> None:
        if name in self:
            raise SchemaError(f"{self.where} two variables give the column {name!r}")
        self[name] = _tidy(values)

    def frame(self, n_rows: int) -> pd.DataFrame:
        return pd.DataFrame(dict(self), index=pd.RangeIndex(n_rows))


def _describe(ds: xr.Dataset) -> str:
    return f"{ds.attrs.get(KIND_ATTR, 'unknown')!r} dataset"


def _unit_labels(ds: xr.Dataset, units) -> dict:
    """Unit dim -> its label on every row of the product of ``units`` (C order)."""
    if not units:
        return {}
    index = np.meshgrid(*[np.arange(ds.sizes[d]) for d in units], indexing="ij")
    return {d: _labels(ds, d)[i.ravel()] for d, i in zip(units, index)}


def _per_unit(ds: xr.Dataset, units, names, columns: _Columns, repeat: int = 1) -> None:
    """Add the per-unit columns of ``names`` (rules 2-4), each value repeated ``repeat`` times.

    A scalar coordinate (``model`` after ``.sel(model=...)``) labels every unit: it is kept.
    """
    n_units = math.prod(ds.sizes[d] for d in units)
    for name in names:
        var = ds[name]
        extra = [d for d in var.dims if d not in units]
        if not _is_per_unit(ds, units, name):
            continue  # rule 4: the same for every unit, or a curve over another dim
        missing = {d: ds.sizes[d] for d in units if d not in var.dims}
        values = var.expand_dims(missing).transpose(*units, *extra).values.reshape(n_units, -1)
        if not extra:
            columns.add(str(name), np.repeat(values[:, 0], repeat))
            continue
        labels = [_labels(ds, d) for d in extra]
        for flat, position in enumerate(np.ndindex(*[len(lab) for lab in labels])):
            entry = [lab[i] for lab, i in zip(labels, position)]
            columns.add(_column_name(str(name), entry), np.repeat(values[:, flat], repeat))


def _is_per_unit(ds: xr.Dataset, units, name) -> bool:
    """Rules 2-4: whether ``name`` gives per-unit columns of a table whose units are ``units``."""
    var = ds[name]
    label = name in ds.coords and not var.dims
    if units and not label and not set(var.dims) & set(units):
        return False  # the same for every unit
    return all(d in EXPANDED_DIMS for d in var.dims if d not in units)


def _unit_columns(ds: xr.Dataset, units, where: str) -> _Columns:
    """Rules 1-4 for one result: unit labels, unit coordinates, per-unit variables."""
    columns = _Columns(where)
    for dim, labels in _unit_labels(ds, units).items():
        columns.add(dim, labels)
    _per_unit(ds, units, [c for c in ds.coords if c not in ds.dims], columns)
    _per_unit(ds, units, list(ds.data_vars), columns)
    return columns


def _unit_index(columns: _Columns, units) -> pd.MultiIndex:
    return pd.MultiIndex.from_arrays([columns[d] for d in units], names=list(units))


def _unit_text(index: pd.MultiIndex, positions) -> str:
    shown = [", ".join(f"{n}={v}" for n, v in zip(index.names, np.atleast_1d(index[i]))) for i in positions[:3]]
    more = f" and {len(positions) - 3} more" if len(positions) > 3 else ""
    return "; ".join(f"({s})" for s in shown) + more


def _aligned(base: pd.MultiIndex, part: pd.MultiIndex, where: str) -> np.ndarray:
    """Rows of ``part`` in the order of ``base``; SchemaError unless both hold the same units."""
    for index, which in ((base, "the first result"), (part, where)):
        if not index.is_unique:
            raise SchemaError(f"unit_table: {which} has repeated unit labels")
    order = part.get_indexer(base)
    missing = np.flatnonzero(order < 0)
    extra = np.setdiff1d(np.arange(len(part)), order[order >= 0])
    if missing.size or extra.size:
        lines = []
        if missing.size:
            lines.append(f"{missing.size} unit(s) of the first result are not in it, e.g. {_unit_text(base, missing)}")
        if extra.size:
            lines.append(f"it has {extra.size} unit(s) the first result lacks, e.g. {_unit_text(part, extra)}")
        raise SchemaError(f"unit_table: {where} does not hold the same units as the first result: {'; '.join(lines)}")
    return order


def unit_table(*results: xr.Dataset, **named: xr.Dataset) -> pd.DataFrame:
    """One row per unit (head, subject, trial, grid point) with every per-unit number of the results.

    Parameters
    ----------
    *results : xarray.Dataset
        Results of the same units, e.g. ``heads`` (``icl-cmr heads``) and ``fits``
        (``icl-cmr fit``), or a ``recall_fit`` dataset alone; their columns must not collide.
    **named : xarray.Dataset
        Results whose columns get the keyword as a prefix (``lsq=fits_lsq`` gives
        ``lsq_distance``, ``lsq_beta_enc``, ...), e.g. two fits of the same units.

    Returns
    -------
    pandas.DataFrame
        One row per unit, in the first result's order, with a plain 0..n-1 index. Columns:
        the unit dims (``model, checkpoint, layer, head``; ``subject``; ``trial, subject,
        list``), then each result's per-unit values in the dataset's order; for heads and a
        profile fit: ``induction_score, ..., copying_score, distance, gain, offset,
        grid_distance, ..., beta_enc, beta_rec, gamma, grid_beta_enc, ..., aic, bic,
        gaussian_a, gaussian_b, gaussian_mu, gaussian_sigma, gaussian_distance, ...``; for a
        ``recall_fit``: ``subject``, one column per CMR parameter, ``logl, n, nfev, nit,
        success, n_nan, seconds, message``. Naming rules: the module docstring. Profiles over
        lags are left out (:func:`to_dataframe` gives them); a pooled result gives one row.

    Raises
    ------
    SchemaError
        A result is not a valid icl-cmr dataset; the results' units differ (other unit
        dims, or other labels: a unit present in one and not the other); or two results, or
        two variables of one result, give the same column (the message names it; pass one
        result as a keyword to prefix its columns).

    See docs/schema.md ("Tables") for an example.
    """
    parts = [(None, ds) for ds in results] + list(named.items())
    if not parts:
        raise SchemaError("unit_table needs at least one result dataset")
    columns = base = units = None
    for number, (prefix, ds) in enumerate(parts, start=1):
        where = f"result {number}" + ("" if prefix is None else f" ({prefix}=)")
        if not isinstance(ds, xr.Dataset):
            raise SchemaError(f"unit_table takes xarray Datasets; {where} is a {type(ds).__name__}")
        validate(ds)
        where = f"{where}, a {_describe(ds)},"
        these = unit_dims(ds)
        if units is None:
            units = these
        elif set(these) != set(units):
            raise SchemaError(
                f"unit_table: {where} has units ({', '.join(these) or 'pooled'}) but the first result has "
                f"({', '.join(units) or 'pooled'}); tables of different units cannot be joined"
            )
        part = _unit_columns(ds, units, where)
        labels = (*units, *_unit_coordinates(ds, units))  # never prefixed
        if prefix is not None:
            part = _prefixed(part, prefix, keep=labels, where=where)
        if columns is None:
            columns, base = part, (_unit_index(part, units) if units else None)
            continue
        order = _aligned(base, _unit_index(part, units), where) if units else np.zeros(1, dtype=np.int64)
        for name in labels:
            if name in units or _same(columns.get(name), part[name][order]):
                del part[name]  # unit labels both results carry (e.g. subject and list of trials)
        clash = [name for name in part if name in columns]
        if clash:
            shown = ", ".join(repr(c) for c in clash[:5]) + (f" and {len(clash) - 5} more" if len(clash) > 5 else "")
            raise SchemaError(
                f"unit_table: {where} gives column(s) {shown} already in the table; give it a prefix "
                "(unit_table(heads, lsq=fits); on the command line --with FILE.nc:lsq)"
            )
        for name, values in part.items():
            columns.add(name, values[order])
    n_rows = len(base) if units else 1
    return columns.frame(n_rows)


def _same(a, b: np.ndarray) -> bool:
    return a is not None and a.dtype == b.dtype and bool(pd.Series(a).equals(pd.Series(b)))


def _unit_coordinates(ds: xr.Dataset, units) -> list[str]:
    """Non-dim coordinates labelling units (``subject`` and ``list`` of a per-list result)."""
    return [str(c) for c in ds.coords if c not in ds.dims and set(ds[c].dims) <= set(units)]


def _prefixed(columns: _Columns, prefix: str, keep, where: str) -> _Columns:
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise SchemaError(f"unit_table: a prefix must be a name such as lsq; got {prefix!r}")
    out = _Columns(where)
    for name, values in columns.items():
        out.add(name if name in keep else f"{prefix}_{name}", values)
    return out


def _long_anchor(ds: xr.Dataset) -> xr.DataArray:
    """The variable whose dims give the rows of the long layout: the main one, else the one of most dims."""
    anchor = _main_variable(ds)
    return anchor if anchor is not None else max(ds.data_vars.values(), key=lambda v: v.ndim)


def _long_plan(ds: xr.Dataset, anchor: xr.DataArray):
    """Units, within-unit dims and the variables over them of the long table anchored at ``anchor``."""
    units = tuple(d for d in anchor.dims if d not in WITHIN_UNIT_DIMS)
    within = tuple(d for d in anchor.dims if d in WITHIN_UNIT_DIMS)
    long_names = [
        name for name in [*[c for c in ds.coords if c not in ds.dims], *ds.data_vars]
        if set(ds[name].dims) & set(within) and set(ds[name].dims) <= set(units + within)
    ]
    return units, within, long_names


def _long_table(ds: xr.Dataset, anchor: xr.DataArray | None = None) -> pd.DataFrame:
    """One row per unit and per value of the anchor's other dims (e.g. subject x lag); default anchor: the main variable."""
    units, within, long_names = _long_plan(ds, _long_anchor(ds) if anchor is None else anchor)
    dims = units + within
    n_units = math.prod(ds.sizes[d] for d in units)
    n_within = math.prod(ds.sizes[d] for d in within)
    columns = _Columns(f"the {_describe(ds)}:")
    for dim, labels in _unit_labels(ds, units).items():
        columns.add(dim, np.repeat(labels, n_within))
    unit_coords = [c for c in ds.coords if c not in ds.dims and c not in long_names]
    _per_unit(ds, units, unit_coords, columns, repeat=n_within)
    for dim, labels in _unit_labels(ds, within).items():
        columns.add(dim, np.tile(labels, n_units))
    for name in long_names:
        var = ds[name]
        missing = {d: ds.sizes[d] for d in dims if d not in var.dims}
        columns.add(str(name), var.expand_dims(missing).transpose(*dims).values.reshape(-1))
    rest = [name for name in ds.data_vars if name not in long_names]
    _per_unit(ds, units, rest, columns, repeat=n_within)
    return columns.frame(n_units * n_within)


def _check_layout(ds: xr.Dataset, layout) -> str:
    """The kind of ``ds`` after validating it; SchemaError unless ``layout`` is one of :func:`layouts`."""
    if not isinstance(ds, xr.Dataset):
        raise SchemaError(f"to_dataframe takes an xarray Dataset; got {type(ds).__name__}")
    kind = validate(ds).attrs.get(KIND_ATTR)
    if not isinstance(layout, str) or (layout not in LAYOUTS and layout not in ds.data_vars):
        raise SchemaError(
            f"layout must be one of {', '.join(LAYOUTS)} or a data variable of this {_describe(ds)} "
            f"({', '.join(map(str, ds.data_vars))}); got {layout!r}"
        )
    return kind


def layouts(ds: xr.Dataset) -> tuple[str, ...]:
    """Every layout :func:`to_dataframe` takes for ``ds``: ``auto``, ``units``, ``long`` and each data variable."""
    _check_layout(ds, "auto")
    return (*LAYOUTS, *map(str, ds.data_vars))


def _events_table_variables(ds: xr.Dataset) -> list[str]:
    """The variables psifr's long table (:func:`cmr.to_table`) writes: items, positions, ``study_<x>`` fields."""
    kept = {"list_length", "study_item", "recall_item", "recalls"}
    for name in map(str, ds.data_vars):
        stem = name[len("study_"):] if name.startswith("study_") else None
        if stem is not None:
            kept.update({name, f"recall_{stem}"})
    return [name for name in map(str, ds.data_vars) if name in kept]


def _planned(ds: xr.Dataset, kind, layout: str) -> list[str]:
    if kind == "events" and layout in ("auto", "long"):
        return _events_table_variables(ds)
    if layout == "units" or (layout == "auto" and kind in ("profile_fit", "recall_fit")):
        units = unit_dims(ds)
        return [name for name in map(str, ds.data_vars) if _is_per_unit(ds, units, name)]
    units, within, long_names = _long_plan(ds, ds[layout] if layout in ds.data_vars else _long_anchor(ds))
    return [name for name in map(str, ds.data_vars) if name in long_names or _is_per_unit(ds, units, name)]


@keyword_only
def table_variables(ds: xr.Dataset, *, layout: str = "auto") -> tuple[str, ...]:
    """The data variables of ``ds`` that are columns of ``to_dataframe(ds, layout=layout)``, in the dataset's order."""
    return tuple(_planned(ds, _check_layout(ds, layout), layout))


@keyword_only
def left_out(ds: xr.Dataset, *, layout: str = "auto") -> dict[str, str]:
    """The data variables ``to_dataframe(ds, layout=layout)`` leaves out, each with a layout that holds it.

    The layouts are chosen greedily, the one holding most of the variables still left out
    first (``long``, then the variables' own tables), so a few tables give
    everything. An empty dict: the table keeps every data variable.
    """
    kind = _check_layout(ds, layout)
    missing = [name for name in map(str, ds.data_vars) if name not in _planned(ds, kind, layout)]
    candidates = ("long", *map(str, ds.data_vars))  # not units: a result without a main variable crosses all dims
    holds = {candidate: set(_planned(ds, kind, candidate)) for candidate in candidates}
    where: dict[str, str] = {}
    while len(where) < len(missing):
        rest = [name for name in missing if name not in where]
        best = max(holds, key=lambda candidate: len(holds[candidate].intersection(rest)))
        for name in rest:
            if name in holds[best]:
                where[name] = best
    return {name: where[name] for name in missing}


@keyword_only
def left_out_line(ds: xr.Dataset, *, layout: str = "auto", option: str = "layout=") -> str:
    """One line naming what ``to_dataframe(ds, layout=layout)`` leaves out and how to get it; ``""`` if nothing.

    ``"left out: spc, spc_group, spc_group_sem (use layout=spc); pfr, ... (use layout=pfr)"``;
    ``option`` is the text before the layout (the command line passes ``"--layout "``).
    """
    groups: dict[str, list[str]] = {}
    for name, holder in left_out(ds, layout=layout).items():
        groups.setdefault(holder, []).append(name)
    if not groups:
        return ""
    return "left out: " + "; ".join(f"{', '.join(names)} (use {option}{holder})" for holder, names in groups.items())


def to_dataframe(ds: xr.Dataset, *, layout: str = "auto") -> pd.DataFrame:
    """A tidy table of one result of any kind, as the ``.csv`` and ``.parquet`` outputs hold it.

    For the per-unit values of several results side by side use :func:`unit_table`; to turn
    events into psifr's table and back, :func:`cmr.to_table` and :func:`cmr.from_table`.

    Parameters
    ----------
    ds : xarray.Dataset
        Any icl-cmr result (kind ``events``, ``lag_profile``, ``recall_stat``,
        ``profile_fit``, ``recall_fit``, ...).
    layout : {"auto", "units", "long"} or the name of a data variable
        ``"units"``: :func:`unit_table` (one row per unit). ``"long"``: one row per unit and
        per value of the main variable's other dims, per-unit values repeated on each row:
        a lag profile or lag-CRP is unit x lag (``subject, lag, profile, sem, actual,
        possible``; per list ``trial, subject, list, lag, ...``; heads ``model, checkpoint, layer,
        head, lag, profile, ..., induction_score, ...``; a grid ``beta_enc, beta_rec, gamma,
        lag, profile, ...``), an SPC or PFR unit x ``serial_position``, a PNR unit x
        ``output_position`` x ``serial_position``, a profile fit unit x lag (``profile,
        fitted, gaussian_fitted`` and the fit's per-unit values). Events are psifr's long
        table (:func:`cmr.to_table`). ``"auto"``: per unit for ``profile_fit`` and
        ``recall_fit``, psifr's table for events, long for everything else. The name of a
        data variable: the long table of that variable's dims, with every variable whose dims
        fit in them (``layout="spc"`` of a predictive check: source x subject x serial position
        with ``spc, spc_group, spc_group_sem``). :func:`left_out` names the variables a layout
        leaves out and the layout that holds each; :func:`layouts` lists them all.

    Returns
    -------
    pandas.DataFrame
        Plain 0..n-1 index; columns and types as in the module docstring.

    Raises
    ------
    SchemaError
        An unknown layout, an invalid dataset, or ``layout="units"`` for a result with
        nothing per unit (a pooled lag-CRP: use ``"long"``).
    """
    if not isinstance(layout, str) or (layout not in LAYOUTS and not isinstance(ds, xr.Dataset)):
        raise SchemaError(f"layout must be one of {', '.join(LAYOUTS)} or a data variable; got {layout!r}")
    kind = _check_layout(ds, layout)
    if kind == "events" and layout in ("auto", "long"):
        return to_table(ds)
    if layout in ds.data_vars:
        return _long_table(ds, ds[layout])
    if layout == "long" or (layout == "auto" and kind not in ("profile_fit", "recall_fit")):
        return _long_table(ds)
    table = unit_table(ds)
    if table.shape[1] == 0:
        raise SchemaError(f"this {_describe(ds)} has no per-unit values (it is pooled); use the long layout")
    return table
