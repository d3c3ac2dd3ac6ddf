"""Several free-recall analyses of one data set at once, into one dataset or one tidy table.

:func:`run_analyses` runs a chosen set of the toolkit's analyses (by their names, psifr's
where psifr has them) with shared options and returns one dataset: each analysis's
variables, dims and coordinates prefixed by its name (``category_crp_prob``,
``lag_crp_lag``), the unit dims (``subject``, or ``trial`` with its labels) shared.
:func:`analyses_table` is the same as one long table with an ``analysis`` column.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import xarray as xr

from .category import category_clustering, category_crp
from .crp import input_crp, lag_crp
from .deprecation import keyword_only
from .distance import (distance_crp, distance_rank, distance_rank_shifted, distance_rank_window,
                       distance_rank_window_asym)
from .checks import parse_json
from .errors import ParameterError, RecallDataError
from .events import as_events
from .intrusions import intrusion_rates, pli_list_lag
from .recall_stats import lag_rank, pfr, pnr, spc
from .repetition import first_presentation_bias, has_repeats, neighbor_crp, rep_crp, spacing_recall
from .schema import provenance_attrs, validate
from .tables import to_dataframe
from .timing import irt, lag_crl, stop_probability

__all__ = ["ANALYSES", "run_analyses", "analyses_table", "split_analyses", "available_analyses", "analysis_of"]

#: name -> (function, what it needs beyond the events: "category", "distances", "time", "repeats" or "")
ANALYSES = {
    "lag_crp": (lag_crp, ""),
    "lag_rank": (lag_rank, ""),
    "spc": (spc, ""),
    "pfr": (pfr, ""),
    "pnr": (pnr, ""),
    "input_crp": (input_crp, ""),
    "intrusion_rates": (intrusion_rates, ""),
    "pli_list_lag": (pli_list_lag, ""),
    "stop_probability": (stop_probability, ""),
    "irt": (irt, "time"),
    "lag_crl": (lag_crl, "time"),
    "category_crp": (category_crp, "category"),
    "category_clustering": (category_clustering, "category"),
    "distance_crp": (distance_crp, "distances"),
    "distance_rank": (distance_rank, "distances"),
    "distance_rank_shifted": (distance_rank_shifted, "distances"),
    "distance_rank_window": (distance_rank_window, "distances"),
    "distance_rank_window_asym": (distance_rank_window_asym, "distances"),
    "rep_crp": (rep_crp, "repeats"),
    "neighbor_crp": (neighbor_crp, "repeats"),
    "spacing_recall": (spacing_recall, "repeats"),
    "first_presentation_bias": (first_presentation_bias, "repeats"),
}

#: the analyses that refuse lists with repeated study items (docs/repetition.md); "all" leaves them out there
REFUSE_REPEATS = ("lag_crp", "lag_rank", "input_crp", "lag_crl", "category_crp", "category_clustering",
                  "distance_crp", "distance_rank", "distance_rank_shifted", "distance_rank_window",
                  "distance_rank_window_asym")


def _percentile_edges(distances, n_bins):
    """psifr's bins: percentiles 1..99 of the distinct item pairs' distances, ``n_bins`` bins."""
    matrix = np.asarray(distances, dtype=np.float64)
    upper = matrix[np.triu_indices_from(matrix, 1)]
    return np.percentile(upper[np.isfinite(upper)], np.linspace(1, 99, n_bins + 1))


def _one(name, events, by, lags, category_key, distances, index_key, edges, max_lag, max_shift, window_lags,
         time_key):
    function, _ = ANALYSES[name]
    if name in ("irt", "lag_crl"):
        return function(events, time_key=time_key, by=by)
    if name == "lag_crp":
        return function(events, by=by, lags=lags)
    if name == "pli_list_lag":
        return function(events, max_lag, by="subject" if by == "trial" else by)
    if name.startswith("category_"):
        return function(events, category_key=category_key, by=by)
    if name == "distance_crp":
        return function(events, index_key, distances, edges, by=by)
    if name == "distance_rank_shifted":
        return function(events, index_key, distances, max_shift, by=by)
    if name == "distance_rank_window":
        return function(events, index_key, distances, window_lags, by=by)
    if name.startswith("distance_"):
        return function(events, index_key, distances, by=by)
    if name == "first_presentation_bias":
        if by != "subject":
            raise ParameterError(f"first_presentation_bias is a per-subject statistic; got by={by!r} (use by='subject')")
        return function(events)
    if name == "neighbor_crp" and by == "trial":
        return function(events, by=by, control=False)  # the control is compared per subject or pooled
    return function(events, by=by)


def _has_time(events, time_key):
    return f"recall_{time_key}" in events and events[f"recall_{time_key}"].dtype.kind == "f"


@keyword_only
def available_analyses(events, *, category_key="category", distances=None, time_key="rt", by="subject") -> list[str]:
    """The analyses the data support: category ones need the column, distance ones a matrix,
    latency ones a recall-time column, repetition ones lists with repeated items (where the
    analyses without a convention for them are left out)."""
    repeats = has_repeats(events)
    has = {"": True, "category": f"study_{category_key}" in events, "distances": distances is not None,
           "time": _has_time(events, time_key), "repeats": repeats}
    return [name for name, (_, needs) in ANALYSES.items() if has[needs]
            and not (repeats and name in REFUSE_REPEATS) and not (name == "first_presentation_bias" and by != "subject")]


def split_analyses(events, analyses, *, category_key="category", distances=None, time_key="rt",
                   by="subject") -> list[str]:
    """The analysis names of ``analyses`` (a list, a comma string or ``"all"``), checked."""
    if isinstance(analyses, str):
        if analyses == "all":
            return available_analyses(events, category_key=category_key, distances=distances, time_key=time_key, by=by)
        analyses = [part.strip() for part in analyses.split(",") if part.strip()]
    names = list(analyses)
    unknown = [n for n in names if n not in ANALYSES]
    if unknown or not names:
        raise ParameterError(f"unknown analysis {unknown or names!r}; known: {', '.join(ANALYSES)} (or 'all')")
    for name in names:
        needs = ANALYSES[name][1]
        if needs == "category" and f"study_{category_key}" not in events:
            raise ParameterError(f"{name} needs a category column {category_key!r} on the study rows")
        if needs == "distances" and distances is None:
            raise ParameterError(f"{name} needs an item distance matrix (distances=...)")
        if needs == "time" and not _has_time(events, time_key):
            raise ParameterError(f"{name} needs a numeric recall-time column {time_key!r} on the recall rows")
        if needs == "repeats" and not has_repeats(events):
            raise ParameterError(f"{name} needs lists with repeated study items; these events have none")
    return names


def _results(events, analyses, by, lags, category_key, distances, index_key, edges, max_lag, max_shift,
             window_lags, time_key):
    events = as_events(events)
    names = split_analyses(events, analyses, category_key=category_key, distances=distances, time_key=time_key, by=by)
    if distances is not None and (edges is None or np.ndim(edges) == 0):
        edges = _percentile_edges(distances, 10 if edges is None else int(edges))
    return events, {name: _one(name, events, by, lags, category_key, distances, index_key, edges, max_lag,
                               max_shift, window_lags, time_key) for name in names}


def run_analyses(events, *, analyses="all", by="subject", lags=None, category_key="category", distances=None,
                 index_key=None, edges=None, max_lag=3, max_shift=3, window_lags=(-1, 0, 1),
                 time_key="rt") -> xr.Dataset:
    """Run several analyses of one data set into one dataset.

    Parameters
    ----------
    events : xarray.Dataset or pandas.DataFrame
    analyses : "all", str or sequence of str
        Names from :data:`ANALYSES` (a comma-separated string works too); ``"all"``: every
        analysis the data support.
    by : {"subject", "trial", None}
        Units of every analysis (``pli_list_lag`` runs per subject when ``by="trial"``).
    lags : lag window of ``lag_crp`` (as :func:`cmr.lag_crp`).
    category_key : column of the category analyses.
    distances, index_key, edges
        The distance analyses' matrix and index column (as :func:`cmr.distance_crp`); edges
        as an array, or a number of bins between the 1st and 99th percentile of the item
        pairs' distances (default 10, as psifr's documentation does).
    max_lag, max_shift, window_lags
        Of ``pli_list_lag``, ``distance_rank_shifted`` and ``distance_rank_window``.
    time_key : recall-time column of ``irt`` and ``lag_crl``.

    Returns
    -------
    xarray.Dataset
        Kind ``"recall_stat"``, ``stat_kind="analysis_set"``; each analysis's variables,
        dims and coordinates prefixed with its name; ``attrs["analyses"]`` lists them.
    """
    events, results = _results(events, analyses, by, lags, category_key, distances, index_key, edges, max_lag,
                               max_shift, window_lags, time_key)
    parts = []
    unit_dims = {"subject", "trial"}
    for name, result in results.items():
        renamed = {v: f"{name}_{v}" for v in result.data_vars}
        renamed.update({d: f"{name}_{d}" for d in result.dims if d not in unit_dims})
        renamed.update({c: f"{name}_{c}" for c in result.coords
                        if c not in result.dims and not set(result[c].dims) <= unit_dims})
        part = result.rename(renamed)
        part.attrs = {}
        parts.append(part)
    combined = xr.merge(parts, compat="identical", combine_attrs="drop")
    combined.attrs = {
        **provenance_attrs("recall_stat", "cmr.run_analyses", by="pooled" if by is None else by,
                           analyses=list(results), events_provenance=parse_json(events.attrs.get("provenance", "{}"),
                                                                   "events attribute provenance", RecallDataError)),
        "stat_kind": "analysis_set",
        "unit_kind": "pooled" if by is None else by,
        "analyses": json.dumps(list(results)),
    }
    for name, result in results.items():
        combined.attrs[f"{name}_provenance"] = result.attrs.get("provenance", "{}")
        combined.attrs[f"{name}_attrs"] = json.dumps({k: v.item() if isinstance(v, np.generic) else v
                                                      for k, v in result.attrs.items() if k != "provenance"})
    return validate(combined, "recall_stat")


def analysis_of(result: xr.Dataset, name: str) -> xr.Dataset:
    """The dataset of one analysis of a set made by :func:`run_analyses`, as the analysis itself
    returns it (names without the prefix, its own kind and attrs), e.g. for its figure.

    Parameters
    ----------
    result : xarray.Dataset
        A ``recall_stat`` dataset of ``stat_kind="analysis_set"``.
    name : str
        One of its ``attrs["analyses"]``.

    Raises
    ------
    ParameterError
        ``name`` is not an analysis of the set, or the set was written without the analyses'
        attributes (run :func:`run_analyses` again).
    """
    if not isinstance(result, xr.Dataset) or result.attrs.get("stat_kind") != "analysis_set":
        raise ParameterError("analysis_of takes a dataset of cmr.run_analyses (stat_kind 'analysis_set'); got "
                             + (f"stat_kind {result.attrs.get('stat_kind')!r}" if isinstance(result, xr.Dataset)
                                else type(result).__name__))
    names = parse_json(result.attrs.get("analyses", "[]"), "attribute analyses", ParameterError)
    if name not in names:
        raise ParameterError(f"the analysis set holds {', '.join(map(str, names))}; got {name!r}")
    if f"{name}_attrs" not in result.attrs:
        raise ParameterError(f"the analysis set was written without the attributes of {name}; run "
                             f"cmr.run_analyses (icl-cmr recall-analyses) again")
    prefix = f"{name}_"
    own = [v for v in result.data_vars if v.startswith(prefix)]
    part = result[own]
    part = part.drop_vars([c for c in part.coords if c not in part.dims
                           and not any(c in result[v].coords for v in own)])
    renamed = {n: n[len(prefix):] for n in list(part.variables) if n.startswith(prefix)}
    renamed.update({d: d[len(prefix):] for d in part.dims if d.startswith(prefix) and d not in renamed})
    part = part.rename(renamed)
    part.attrs = {**parse_json(result.attrs[f"{name}_attrs"], f"attribute {name}_attrs", ParameterError),
                  "provenance": result.attrs.get(f"{name}_provenance", "{}")}
    return part


def analyses_table(events, *, analyses="all", by="subject", lags=None, category_key="category", distances=None,
                   index_key=None, edges=None, max_lag=3, max_shift=3, window_lags=(-1, 0, 1),
                   time_key="rt") -> pd.DataFrame:
    """:func:`run_analyses` as one long table: column ``analysis``, then each analysis's own table.

    Same options as :func:`run_analyses`. Each analysis contributes :func:`cmr.to_dataframe`
    of its result; columns one analysis lacks are empty.
    """
    _, results = _results(events, analyses, by, lags, category_key, distances, index_key, edges, max_lag,
                          max_shift, window_lags, time_key)
    tables = [to_dataframe(result, layout="long").assign(analysis=name) for name, result in results.items()]
    integers = {c for t in tables for c in t.columns if pd.api.types.is_integer_dtype(t[c].dtype)}
    integers -= {c for t in tables for c in t.columns if not pd.api.types.is_integer_dtype(t[c].dtype)}
    table = pd.concat(tables, ignore_index=True)
    for column in integers:  # counts and labels stay integers where an analysis lacks them
        table[column] = table[column].astype("Int64")
    return table[["analysis"] + [c for c in table.columns if c != "analysis"]]
