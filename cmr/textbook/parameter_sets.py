"""One parameter set, one per subject, or a fit: what the likelihood and the simulator accept.

Every CMR function that scores or simulates data takes ``params`` in any of these forms:

* one mapping of parameter name to value (all subjects share it);
* a mapping of subject label to such a mapping (every subject of the data needs an entry);
* a ``recall_fit`` dataset (:func:`cmr.fit_recall`): per subject, or one set for a group fit;
* a pandas DataFrame indexed by subject with one column per parameter (cymr's fit results;
  other columns such as ``logl``, ``n``, ``k`` are ignored), or with a ``subject`` column. A
  table with several rows per subject, such as cymr's ``fit_indiv`` output indexed by
  (subject, rep), is read as cymr's ``get_best_results`` reads it: the row with the highest
  ``logl`` of each subject (the first of equal ones).

Subject labels are matched by their text, so ``1`` and ``"1"`` name the same subject.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import ParameterError
from ..schema import validate
from .parameters import MODEL_PARAMETER_NAMES, SEMANTIC_PARAMETER_NAMES, parameter_vector

__all__ = ["parameter_table", "parameters_by_subject"]


def _is_parameter_set(value) -> bool:
    return isinstance(value, Mapping) and all(isinstance(k, str) and k in MODEL_PARAMETER_NAMES for k in value)


def parameters_by_subject(params) -> dict | None:
    """``{str(subject): parameter dict}``, or None when ``params`` is one set for everyone."""
    if isinstance(params, xr.Dataset):
        validate(params, "recall_fit")
        value = params["value"]
        names = [str(p) for p in params["parameter"].values]
        if value.dims == ("parameter",):
            return None
        if set(value.dims) != {"subject", "parameter"}:
            raise ParameterError(f"a recall_fit used as parameters needs dims (subject, parameter); got {value.dims}")
        table = value.transpose("subject", "parameter").values
        return {str(s): dict(zip(names, map(float, row))) for s, row in zip(params["subject"].values, table)}
    if isinstance(params, pd.DataFrame):
        params = _one_row_per_subject(params)
        columns = [c for c in params.columns if c in MODEL_PARAMETER_NAMES]
        if not columns:
            raise ParameterError(
                f"a DataFrame of parameters needs columns named as CMR parameters; got {list(params.columns)}"
            )
        return {str(s): {c: float(row[c]) for c in columns} for s, row in params.iterrows()}
    if not isinstance(params, Mapping) or not params:
        raise ParameterError(
            "params must be a mapping of parameter name to value, a mapping of subject to such mappings, "
            f"a recall_fit dataset or a DataFrame indexed by subject; got {type(params).__name__}"
        )
    if _is_parameter_set(params):
        return None
    if all(isinstance(v, Mapping) for v in params.values()):
        by_subject = {}
        for subject, values in params.items():
            key = str(subject)
            if key in by_subject:
                raise ParameterError(f"subject {subject!r} appears twice in the parameter mapping (as text)")
            by_subject[key] = dict(values)
        return by_subject
    unknown = sorted(str(k) for k in params if not (isinstance(k, str) and k in MODEL_PARAMETER_NAMES))
    raise ParameterError(
        f"unknown CMR parameter(s) {', '.join(map(repr, unknown[:5]))}; known: {', '.join(MODEL_PARAMETER_NAMES)} "
        "(or give a mapping of subject -> parameters)"
    )


def _one_row_per_subject(table: pd.DataFrame) -> pd.DataFrame:
    """A parameter table indexed by subject alone: from a ``subject`` column or index level, keeping
    the best-``logl`` row of a subject with several (cymr's ``fit_indiv`` reps)."""
    levels = [name for name in table.index.names if name is not None]
    if "subject" not in levels and "subject" in table.columns:
        table = table.set_index("subject", append=bool(levels))
        levels = [*levels, "subject"]
    if isinstance(table.index, pd.MultiIndex):
        if "subject" not in levels:
            raise ParameterError(
                f"a parameter table with a multi-level index needs a level named 'subject'; got levels {levels}"
            )
        subjects = table.index.get_level_values("subject")
    else:
        subjects = table.index
    if not subjects.duplicated().any():
        return table.set_axis(subjects, axis=0)
    if "logl" not in table.columns:
        repeated = sorted({str(s) for s in subjects[subjects.duplicated()]})
        raise ParameterError(
            f"the parameter table has several rows for subject(s) {', '.join(map(repr, repeated[:5]))} and no "
            "'logl' column to pick the best of them (cymr's fit_indiv keeps one; or give one row per subject)"
        )
    logl = pd.to_numeric(table["logl"], errors="coerce").to_numpy(dtype=np.float64)
    order = pd.Series(logl).groupby(np.asarray(subjects.astype(str)), sort=False)
    best = [int(rows.idxmax()) if rows.notna().any() else int(rows.index[0]) for _, rows in order]
    picked = table.iloc[best]
    return picked.set_axis(subjects[best], axis=0)


def parameter_table(params, subjects, *, patterns: bool) -> tuple[np.ndarray, np.ndarray]:
    """Parameter vectors and the row each trial uses.

    Parameters
    ----------
    params : see the module docstring
    subjects : (T,) subject label of each trial
    patterns : bool
        Whether the model has item patterns; without them the pattern weights must be 0.

    Returns
    -------
    table : (K, 19) float64, C-contiguous
    trial_param : (T,) int64 row of ``table`` for each trial
    """
    labels = np.asarray(subjects)
    by_subject = parameters_by_subject(params)
    if by_subject is None:
        table = parameter_vector(params if not isinstance(params, xr.Dataset) else _group_set(params))[None, :]
        trial_param = np.zeros(labels.size, dtype=np.int64)
    else:
        keys = np.array([str(s) for s in labels], dtype=object)
        wanted = list(dict.fromkeys(keys.tolist()))
        missing = [s for s in wanted if s not in by_subject]
        if missing:
            raise ParameterError(
                f"no parameters for {len(missing)} subject(s) of the data, e.g. {', '.join(map(repr, missing[:5]))}; "
                "a mapping by subject (or a fit) must cover every subject"
            )
        rows = {}
        vectors = []
        for s in wanted:
            try:
                vectors.append(parameter_vector(by_subject[s]))
            except ParameterError as exc:
                raise ParameterError(f"subject {s!r}: {exc}") from None
            rows[s] = len(vectors) - 1
        table = np.array(vectors)
        trial_param = np.array([rows[k] for k in keys.tolist()], dtype=np.int64)
    if not patterns:
        weights = table[:, len(MODEL_PARAMETER_NAMES) - len(SEMANTIC_PARAMETER_NAMES):]
        if (weights != 0).any():
            used = [n for n, w in zip(SEMANTIC_PARAMETER_NAMES, weights.T) if (w != 0).any()]
            raise ParameterError(
                f"pattern weight(s) {', '.join(used)} are not 0, but no item patterns were given "
                "(pass patterns=cmr.item_patterns(...) for semantic or category CMR)"
            )
    return np.ascontiguousarray(table), trial_param


def _group_set(fit: xr.Dataset) -> dict:
    names = [str(p) for p in fit["parameter"].values]
    return dict(zip(names, map(float, fit["value"].values)))
