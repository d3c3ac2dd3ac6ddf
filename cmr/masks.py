"""Which items and transitions an analysis includes: psifr's ``item_query`` and ``test_key``/``test``.

psifr restricts its transition analyses in two ways (``psifr.maskers``), and every analysis
here takes the same two arguments with the same meaning:

* ``item_query``: a pandas query string evaluated on the studied items (psifr's merged study
  rows: columns ``subject``, ``list``, ``item``, ``input``, ``output``, ``study``, ``recall``,
  ``repeat``, ``intrusion`` and the table's other columns by name). Items that fail it leave
  the pool: recalling one counts as an invalid recall (like an intrusion) and they are never
  possible.
* ``test_key`` and ``test``: a column of the studied items and a function ``test(prev, curr)``
  returning True for transitions to include. A transition whose values fail the test is
  skipped (its "from" item still leaves the pool), and only items with ``test(prev, item)``
  true are possible.

The kernels cannot call Python, so the test is tabulated once over the column's distinct
values (``allowed[i, j] = test(value_i, value_j)``, called as psifr calls it for possible
items: a value and an array of values). This equals psifr for any test that compares the two
values elementwise, which is what its argument means.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from .deprecation import keyword_only
from .errors import ParameterError

__all__ = ["TransitionMask", "transition_mask", "item_mask", "study_values", "study_frame"]


class TransitionMask(NamedTuple):
    """Masks in the form the kernels take.

    Attributes
    ----------
    in_pool : bool (n_trials, n_study)
        Studied items that may be recalled and may be possible (False beyond a list's length).
    code : int64 (n_trials, n_study)
        Code of each studied item's test value.
    allowed : bool (n_codes, n_codes)
        ``allowed[code_prev, code_curr]``: whether the test includes the transition.
    """

    in_pool: np.ndarray
    code: np.ndarray
    allowed: np.ndarray


def _restored(values: np.ndarray, attrs) -> np.ndarray:
    if values.dtype.kind == "f" and attrs.get("table_dtype") == "int64" and not np.isnan(values).any():
        return values.astype(np.int64)
    return values


def study_values(events: xr.Dataset, key: str) -> np.ndarray:
    """Values of column ``key`` for each studied item: shape (n_trials, n_study).

    ``"input"`` (or ``"position"``) is the serial position, ``"item"`` the studied item,
    ``"subject"``, ``"list"`` and list keys the list's label; any other name is a column of
    the recall table kept on the study rows.
    """
    n_trials, n_study = events.sizes["trial"], events.sizes["study_position"]
    if key in ("input", "position"):
        return np.broadcast_to(np.arange(1, n_study + 1, dtype=np.int64), (n_trials, n_study)).copy()
    if key == "item":
        return events["study_item"].transpose("trial", "study_position").values
    if key in events.coords and events[key].dims == ("trial",):
        return np.repeat(events[key].values[:, None], n_study, axis=1)
    name = f"study_{key}"
    if name not in events:
        columns = ["input", "item"] + [v[len("study_"):] for v in events.data_vars if v.startswith("study_")
                                       and v != "study_item"]
        raise ParameterError(f"no column {key!r} on the studied items; available: {', '.join(columns)}")
    variable = events[name].transpose("trial", "study_position")
    return _restored(variable.values, variable.attrs)


def study_frame(events: xr.Dataset) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The studied items as psifr's merged study rows, and their (trial, position index).

    Columns ``subject``, list keys, ``list``, ``item``, ``input``, ``output`` (output position
    of the first recall, NaN if never recalled), ``study``, ``recall``, ``repeat``,
    ``intrusion`` and every other study column by its name.
    """
    length = events["list_length"].values
    n_study = events.sizes["study_position"]
    trial, col = np.nonzero(np.arange(n_study)[None, :] < length[:, None])
    recalls = events["recalls"].transpose("trial", "output_position").values
    first_output = np.full((recalls.shape[0], n_study + 1), np.inf)
    rows, outs = np.nonzero(recalls > 0)
    np.minimum.at(first_output, (rows, recalls[rows, outs]), outs + 1.0)  # the first recall of each item
    first_output[np.isinf(first_output)] = np.nan
    output = first_output[trial, col + 1]
    columns = {name: events[name].values[trial] for name in events.coords
               if events[name].dims == ("trial",) and name != "trial"}
    columns.update(item=study_values(events, "item")[trial, col], input=col + 1, output=output, study=True,
                   recall=~np.isnan(output), repeat=0, intrusion=False)
    for name in events.data_vars:
        if name.startswith("study_") and name != "study_item":
            columns[name[len("study_"):]] = study_values(events, name[len("study_"):])[trial, col]
    return pd.DataFrame(columns), trial, col


@keyword_only
def transition_mask(events: xr.Dataset, *, item_query=None, test_key=None, test=None) -> TransitionMask:
    """The :class:`TransitionMask` of psifr's ``item_query`` and ``test_key``/``test``."""
    length = events["list_length"].values
    n_trials, n_study = events.sizes["trial"], events.sizes["study_position"]
    in_pool = np.arange(n_study)[None, :] < length[:, None]
    if item_query is not None:
        if not isinstance(item_query, str):
            raise ParameterError(f"item_query must be a pandas query string; got {type(item_query).__name__}")
        frame, trial, col = study_frame(events)
        try:
            keep = np.asarray(frame.eval(item_query), dtype=bool)
        except Exception as exc:  # pandas raises many types for a bad query
            raise ParameterError(
                f"item_query {item_query!r} cannot be evaluated on the studied items (columns: "
                f"{', '.join(map(str, frame.columns))}): {type(exc).__name__}: {exc}"
            ) from exc
        if keep.shape != (len(frame),):
            raise ParameterError(f"item_query {item_query!r} must give one True/False per studied item")
        in_pool[trial[~keep], col[~keep]] = False
    if (test_key is None) != (test is None):
        raise ParameterError("test_key and test go together: give both (a column and a function) or neither")
    if test is None:
        return TransitionMask(in_pool, np.zeros((n_trials, n_study), np.int64), np.ones((1, 1), bool))
    if not callable(test):
        raise ParameterError(f"test must be a function test(prev, curr) -> bool; got {type(test).__name__}")
    values = study_values(events, test_key)
    studied = np.arange(n_study)[None, :] < length[:, None]
    codes, uniques = pd.factorize(pd.Series(values[studied].tolist(), dtype=object), use_na_sentinel=False)
    uniques = np.asarray(uniques, dtype=object)
    try:
        typed = np.asarray(uniques.tolist())  # numbers compare as numbers, text as text
        allowed = np.array([np.broadcast_to(np.asarray(test(value, typed), dtype=bool), typed.shape)
                            for value in typed.tolist()], dtype=bool).reshape(typed.size, typed.size)
    except Exception as exc:
        raise ParameterError(f"test(prev, curr) failed on values of {test_key!r}: {type(exc).__name__}: {exc}") from exc
    code = np.zeros((n_trials, n_study), np.int64)
    code[studied] = codes
    return TransitionMask(in_pool, np.ascontiguousarray(code), np.ascontiguousarray(allowed))


@keyword_only
def item_mask(events: xr.Dataset, *, item_query=None, test_key=None, test=None):
    """Pool, codes and ``passes[code]`` for a test of single items, ``test(value) -> bool`` (psifr's pnr).

    Returns
    -------
    in_pool : bool (n_trials, n_study)
    code : int64 (n_trials, n_study)
    passes : bool (n_codes,)
    """
    pool = transition_mask(events, item_query=item_query)
    if (test_key is None) != (test is None):
        raise ParameterError("test_key and test go together: give both (a column and a function) or neither")
    if test is None:
        return pool.in_pool, pool.code, np.ones(1, dtype=bool)
    if not callable(test):
        raise ParameterError(f"test must be a function test(value) -> bool; got {type(test).__name__}")
    length = events["list_length"].values
    values = study_values(events, test_key)
    studied = np.arange(values.shape[1])[None, :] < length[:, None]
    codes, uniques = pd.factorize(pd.Series(values[studied].tolist(), dtype=object), use_na_sentinel=False)
    typed = np.asarray(np.asarray(uniques, dtype=object).tolist())
    try:
        passes = np.broadcast_to(np.asarray(test(typed), dtype=bool), typed.shape).copy()
    except Exception as exc:
        raise ParameterError(f"test(value) failed on values of {test_key!r}: {type(exc).__name__}: {exc}") from exc
    code = np.zeros(values.shape, np.int64)
    code[studied] = codes
    return pool.in_pool, np.ascontiguousarray(code), passes
