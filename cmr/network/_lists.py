"""A psifr recall table as lists: studied items, scored recalls and data columns, one row per list.

The rules are cymr's ``fit.prepare_lists(clean=True)``: a recall is matched to the studied item
with the same ``item`` label; intrusions and repeats are removed; ``input`` is the 0-based serial
position. Lists are ordered by subject (first appearance), then list label in study order
(:func:`cmr.ordering.study_order`: ``L2`` before ``L10``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ..checks import shown
from ..errors import RecallDataError
from ..ordering import study_order

__all__ = ["Lists", "recall_lists", "lists_of"]

_REQUIRED = ("subject", "list", "trial_type", "position", "item", "item_index")


@dataclass(frozen=True)
class Lists:
    """Lists of one length ``n``; recall arrays are padded to the most scored recalls ``R``."""

    subject: np.ndarray  # (L,) subject of each list
    list_number: np.ndarray  # (L,)
    study_index: np.ndarray  # (L, n) int64 pool row of each studied item
    recall_input: np.ndarray  # (L, R) int64 serial position (0-based) of each scored recall, -1 padding
    recall_index: np.ndarray  # (L, R) int64 pool row of each scored recall, -1 padding
    n_recall: np.ndarray  # (L,) int64
    study_columns: dict  # name -> (L, n) float64
    recall_columns: dict  # name -> (L, R) float64, NaN padding
    study_table: pd.DataFrame  # the study rows, in list order

    @property
    def n_lists(self) -> int:
        return int(self.study_index.shape[0])

    @property
    def length(self) -> int:
        return int(self.study_index.shape[1])


def _table(data) -> pd.DataFrame:
    if isinstance(data, xr.Dataset):
        from ..events import to_table

        data = to_table(data)
    if not isinstance(data, pd.DataFrame):
        raise RecallDataError(f"data must be a psifr recall table (pandas DataFrame) or an events dataset; "
                              f"got {type(data).__name__}")
    missing = [c for c in _REQUIRED if c not in data.columns]
    if missing:
        raise RecallDataError(f"recall table needs columns {', '.join(_REQUIRED)}; missing: {', '.join(missing)}")
    return data


def _numeric(values: pd.Series, what: str) -> np.ndarray:
    try:
        return pd.to_numeric(values, errors="raise").to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(v for v in values if not _is_number(v))
        raise RecallDataError(f"column {what} must hold numbers; got {shown(bad)}") from None


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def recall_lists(data, columns=(), *, pool_size: int) -> Lists:
    """The lists of a recall table, with the data ``columns`` that dynamic parameters use."""
    table = _table(data)
    for name in columns:
        if name not in table.columns:
            raise RecallDataError(f"dynamic parameters use column {name!r}; the recall table has "
                                  f"{', '.join(map(str, table.columns))}")
    kind = table["trial_type"]
    study = table[kind == "study"]
    recall = table[kind == "recall"]
    if study.empty:
        raise RecallDataError("recall table needs study rows (trial_type 'study'); got none")
    order = {s: i for i, s in enumerate(pd.unique(table["subject"]))}
    study = study.assign(_subject_rank=study["subject"].map(order).to_numpy())
    study = study.assign(_list_rank=study_order(study["list"], within=study["_subject_rank"]))
    study = study.sort_values(["_subject_rank", "_list_rank", "position"], kind="stable")
    lists = study.groupby(["_subject_rank", "_list_rank", "list"], sort=True)
    lengths = lists.size().to_numpy()
    if np.unique(lengths).size > 1:
        raise RecallDataError(f"lists must all have one length; got lengths {', '.join(map(str, np.unique(lengths)))}")
    n = int(lengths[0])
    n_lists = lengths.size
    positions = study["position"].to_numpy()
    want = np.tile(np.arange(1, n + 1), n_lists)
    if not np.array_equal(np.asarray(positions, dtype=np.float64), want.astype(np.float64)):
        raise RecallDataError(f"study positions of each list must be 1..{n}; got another order or gaps")
    item_index = _numeric(study["item_index"], "item_index")
    if np.any(~np.isfinite(item_index)) or np.any(item_index != np.round(item_index)) \
            or np.any(item_index < 0) or np.any(item_index >= pool_size):
        bad = item_index[~(np.isfinite(item_index) & (item_index == np.round(item_index)) & (item_index >= 0)
                           & (item_index < pool_size))][0]
        raise RecallDataError(f"study item_index must be integers 0..{pool_size - 1} (rows of the patterns); "
                              f"got {shown(float(bad))}")
    study_index = item_index.astype(np.int64).reshape(n_lists, n)
    list_keys = lists.size().index.droplevel("_list_rank")  # (subject rank, list) in study order
    subjects = list(order)
    subject_of = np.array([subjects[r] for r, _ in list_keys], dtype=object)
    list_number = np.array([lst for _, lst in list_keys])

    # scored recalls: matched to a studied item, first recall of it, in output order
    list_id = pd.Series(np.arange(n_lists), index=pd.MultiIndex.from_tuples(list(list_keys)))
    rec = recall.assign(_subject_rank=recall["subject"].map(order).to_numpy())
    rec = rec.sort_values(["_subject_rank", "list", "position"], kind="stable")
    studied = pd.DataFrame({"_subject_rank": study["_subject_rank"].to_numpy(), "list": study["list"].to_numpy(),
                            "item": study["item"].to_numpy(), "_input": np.tile(np.arange(n), n_lists)})
    studied = studied.drop_duplicates(["_subject_rank", "list", "item"])
    rec = rec.merge(studied, on=["_subject_rank", "list", "item"], how="left", sort=False)
    rec = rec[rec["_input"].notna()]
    rec = rec[~rec.duplicated(["_subject_rank", "list", "_input"])]
    ids = list_id.reindex(pd.MultiIndex.from_arrays([rec["_subject_rank"], rec["list"]])).to_numpy()
    keep = ~np.isnan(ids.astype(np.float64))
    rec = rec[keep]
    ids = ids[keep].astype(np.int64)
    out = pd.Series(ids).groupby(ids).cumcount().to_numpy()
    n_recall = np.bincount(ids, minlength=n_lists).astype(np.int64)
    width = max(int(n_recall.max()) if n_lists else 0, 1)
    recall_input = np.full((n_lists, width), -1, dtype=np.int64)
    recall_input[ids, out] = rec["_input"].to_numpy().astype(np.int64)
    recall_index = np.full((n_lists, width), -1, dtype=np.int64)
    recall_index[ids, out] = np.take_along_axis(study_index, np.maximum(recall_input, 0), 1)[ids, out]

    study_columns, recall_columns = {}, {}
    for name in columns:
        study_columns[name] = _numeric(study[name], name).reshape(n_lists, n)
        values = np.full((n_lists, width), np.nan)
        values[ids, out] = _numeric(rec[name], name)
        recall_columns[name] = values
    return Lists(subject_of, list_number, study_index, recall_input, recall_index, n_recall, study_columns,
                 recall_columns, study.drop(columns=["_subject_rank", "_list_rank"]))


def lists_of(lists: Lists, rows) -> Lists:
    """The lists ``rows`` (a boolean mask or indices) only."""
    rows = np.flatnonzero(np.asarray(rows)) if np.asarray(rows).dtype == bool else np.asarray(rows, dtype=np.int64)
    table = lists.study_table
    keep = pd.MultiIndex.from_arrays([table["subject"], table["list"]]).isin(
        list(zip(lists.subject[rows], lists.list_number[rows])))
    return Lists(lists.subject[rows], lists.list_number[rows], lists.study_index[rows], lists.recall_input[rows],
                 lists.recall_index[rows], lists.n_recall[rows], {k: v[rows] for k, v in lists.study_columns.items()},
                 {k: v[rows] for k, v in lists.recall_columns.items()}, table[keep])
