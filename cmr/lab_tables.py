"""Lab exports into psifr's raw long table: merged tables, other trial types, item spelling.

What :func:`cmr.from_table` does before it matches recalls to study items, kept apart so the
matching itself stays one path:

* a table scored by ``psifr.fr.merge_free_recall`` (one row per study/recall pair, columns
  ``input``, ``output``, ``study``, ``recall``) is turned back into raw study and recall rows
  (:func:`raw_from_merged`);
* rows of other trial types (distractor, math, ...) are dropped and counted
  (:func:`split_trial_types`);
* items are matched exactly, or ignoring case and surrounding whitespace
  (:func:`item_keys`);
* when most recalls match no studied item, :func:`intrusion_diagnosis` names the likely cause
  and the option that fixes it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import RecallDataError

__all__ = [
    "MERGED_COLUMNS",
    "is_merged_table",
    "raw_from_merged",
    "split_trial_types",
    "item_keys",
    "intrusion_diagnosis",
    "list_key_columns",
    "match_recalls",
]

#: columns of a table scored by psifr's merge_free_recall that a raw table does not have
MERGED_COLUMNS = ("input", "output", "study", "recall")
#: scoring columns of a merged table, dropped when it is turned back into raw rows
_SCORING_COLUMNS = ("input", "output", "study", "recall", "repeat", "intrusion", "prior_list", "prior_input")


def is_merged_table(table: pd.DataFrame) -> bool:
    """Whether ``table`` is psifr's merged (scored) format rather than its raw format."""
    return "trial_type" not in table.columns and all(c in table.columns for c in MERGED_COLUMNS)


def raw_from_merged(table: pd.DataFrame) -> pd.DataFrame:
    """psifr's raw long table from its merged one (``fr.merge_free_recall`` output).

    Study rows are the rows with ``study`` true (``position`` = ``input``); recall rows those
    with ``recall`` true (``position`` = ``output``), once per output position (psifr writes
    a prior-list intrusion once per earlier list that had the item). Other columns are kept.
    """
    for flag in ("study", "recall"):
        if not pd.api.types.is_bool_dtype(table[flag].dtype):
            raise RecallDataError(
                f"a merged (scored) psifr table needs a boolean {flag!r} column; got {table[flag].dtype}"
            )
    keep = [c for c in table.columns if c not in _SCORING_COLUMNS]
    study = table.loc[table["study"].to_numpy(), keep].assign(trial_type="study", position=table.loc[table["study"], "input"])
    recall = table.loc[table["recall"].to_numpy(), keep].assign(
        trial_type="recall", position=table.loc[table["recall"], "output"]
    )
    # psifr repeats an intrusion's row once per earlier list that studied the item
    recall = recall.drop_duplicates(["subject", "list", "position"])
    return pd.concat([study, recall], ignore_index=True)


def split_trial_types(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The study and recall rows of ``table``, and how many rows of each other trial type were dropped."""
    if table["trial_type"].isna().any():
        raise RecallDataError(
            f"recall table column 'trial_type' must have no missing values; got {int(table['trial_type'].isna().sum())} NaN/None"
        )
    phase = table["trial_type"].astype(str)
    kept = phase.isin(("study", "recall")).to_numpy()
    if kept.all():
        return table, {}
    counts = phase[~kept].value_counts(sort=False)
    ignored = {str(name): int(n) for name, n in sorted(counts.items())}
    return table.loc[kept], ignored


def item_keys(items: np.ndarray, normalize: bool) -> np.ndarray:
    """What recalls are matched on: the item text as written, or lower-cased and stripped."""
    if not normalize:
        return items
    return pd.Series(items, dtype=object).str.strip().str.casefold().to_numpy(dtype=object)


def intrusion_diagnosis(n_intrusions: int, n_recalls: int, rescued: int | None, limit: float) -> str:
    """The message refusing a table whose recalls mostly match no studied item.

    ``rescued`` is how many of the intrusions would match when items are compared ignoring
    case and surrounding whitespace (None when that comparison is already on).
    """
    share = n_intrusions / n_recalls
    head = (
        f"{n_intrusions} of {n_recalls} recalls ({share:.0%}) match no item studied in their list "
        f"(more than {limit:.0%}): an analysis of these data would count almost only intrusions"
    )
    if rescued:
        cause = (
            f"; {rescued} of them match a studied item when case and surrounding spaces are ignored, so "
            "recalled words were typed differently from the study list: pass normalize_items=True "
            "(command line: --normalize-items)"
        )
    else:
        cause = (
            "; check that recall rows carry the same subject and list labels as their study rows (lists "
            "numbered again in each session need list_keys=['session'], command line: --list-keys session) "
            "and that recalled words are spelled as studied"
        )
    return head + cause + "; to analyse the table as it is, pass max_intrusion_share=1"


def list_key_columns(table: pd.DataFrame, list_keys, reserved_columns) -> tuple[str, ...]:
    """``list_keys`` as a tuple of column names of ``table`` (psifr's list_keys)."""
    if list_keys is None:
        return ()
    names = (list_keys,) if isinstance(list_keys, str) else tuple(list_keys)
    reserved = [k for k in names if k in reserved_columns or not isinstance(k, str)]
    missing = [k for k in names if k not in table.columns]
    if reserved or missing or len(set(names)) != len(names):
        raise RecallDataError(
            f"list_keys must name distinct columns of the table other than {', '.join(reserved_columns)}; got "
            f"{list(names)} (table columns: {', '.join(map(str, table.columns))})"
        )
    return names


def match_recalls(s_trial, s_pos, s_key, r_trial, r_key) -> np.ndarray:
    """Serial position of each recall's item among its list's study items, -1 where none matches."""
    lookup = pd.Series(s_pos, index=pd.MultiIndex.from_arrays([s_trial, s_key], names=["trial", "item"]))
    matched = lookup.reindex(pd.MultiIndex.from_arrays([r_trial, r_key])).to_numpy()
    return np.where(np.isnan(matched), -1, matched).astype(np.int64)
