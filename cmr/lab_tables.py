"""Lab exports into psifr's raw long table: merged tables, other trial types, item spelling.

What :func:`cmr.from_table` does before it matches recalls to study items, kept apart so the
matching itself stays one path:

* a table scored by ``psifr.fr.merge_free_recall`` (one row per study/recall pair, columns
  ``input``, ``output``, ``study``, ``recall``) is turned back into raw study and recall rows
  (:func:`raw_from_merged`);
* rows of other trial types (distractor, math, ...) are dropped and counted
  (:func:`split_trial_types`);
* items are matched as psifr's merge matches them, by value: numbers as numbers (``1`` and
  ``1.0`` are one item), text as text (``'1'`` and ``'1.0'`` are two, and ``'1'`` is not ``1``)
  (:func:`read_items`); or, on request, also ignoring case and surrounding whitespace
  (:func:`loose_item_codes`, :func:`item_keys`); :func:`numeric_text_codes` reads numbers
  written as text as numbers, to count the recalls that reading would match;
* when most recalls match no studied item, :func:`intrusion_diagnosis` names the likely cause
  and the option that fixes it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from .deprecation import keyword_only
from .errors import RecallDataError

__all__ = [
    "MERGED_COLUMNS",
    "is_merged_table",
    "raw_from_merged",
    "split_trial_types",
    "item_keys",
    "texts_as_written",
    "Items",
    "read_items",
    "loose_item_codes",
    "numeric_text_codes",
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


@keyword_only
def texts_as_written(values: pd.Series, *, missing: str = "") -> tuple[np.ndarray, np.ndarray]:
    """The text of each value (``str``, as ``values.astype(str)`` gives it; missing values
    ``missing``) as ``texts[codes]``: int64 codes (>= 0) and an object array of Python str.

    Where equal values always have one text (text, integer, boolean and categorical columns)
    ``texts`` holds each distinct value's text once, so a caller can place codes and take the
    texts last; otherwise (a float column holds ``-0.0`` and ``0.0``, an object column ``1`` and
    ``1.0``: equal values, two texts) one text per row.
    """
    if not _one_text_per_value(values):
        texts = values.astype(object).where(values.notna(), missing).astype(str).to_numpy(dtype=object)
        return np.arange(texts.size, dtype=np.int64), texts
    codes, distinct = pd.factorize(values)  # missing values: code -1, the last text below
    return np.where(codes < 0, len(distinct), codes).astype(np.int64), np.append(_texts_of(distinct), missing)


def _one_text_per_value(values: pd.Series) -> bool:
    """Whether equal values of the column always have one text (text, integer, boolean, categorical)."""
    dtype = values.dtype
    if dtype == object:
        return pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty")
    return (isinstance(dtype, (pd.StringDtype, pd.CategoricalDtype)) or pd.api.types.is_integer_dtype(dtype)
            or pd.api.types.is_bool_dtype(dtype))


def _texts_of(distinct) -> np.ndarray:
    """``str`` of each distinct value, an object array."""
    texts = np.empty(len(distinct), dtype=object)
    texts[:] = [str(value) for value in np.asarray(distinct, dtype=object)]
    return texts


class Items(NamedTuple):
    """The item column of a table, read once (:func:`read_items`)."""

    text: np.ndarray                  # each row's item as written: Python str
    code: np.ndarray                  # each row's item code (int64): equal codes, one item for psifr
    text_of_code: np.ndarray | None   # the text of each code when every code has one text, else None


def read_items(values: pd.Series) -> Items:
    """Each item's text and code; codes are equal exactly where psifr's merge matches two items.

    ``psifr.fr.merge_free_recall`` joins study and recall rows with ``pandas.merge``, which
    compares the values of the item column as Python does: numbers by value (``1``, ``1.0``,
    ``True`` and ``numpy.int64(1)`` are one item; so are ``-0.0`` and ``0``), text by its
    characters (``'1'`` and ``'1.0'`` are two items, and the text ``'1'`` is not the number ``1``).
    ``pandas.factorize`` uses the same hash table as the merge. The column has no missing values.
    """
    codes, distinct = pd.factorize(values)
    codes = codes.astype(np.int64)
    if _one_text_per_value(values):
        text_of_code = _texts_of(distinct)
        return Items(text_of_code[codes], codes, text_of_code)
    return Items(values.astype(str).to_numpy(dtype=object), codes, None)


def _joined_codes(codes: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Codes of the classes joined from two partitions of the same items (equal in either: one class)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n_codes, n_other = int(codes.max()) + 1, int(other.max()) + 1
    graph = coo_matrix((np.ones(codes.size, dtype=np.int8), (codes, n_codes + other)),
                       shape=(n_codes + n_other, n_codes + n_other))
    return connected_components(graph, directed=False)[1][codes].astype(np.int64)


def _joined_reading(items: Items, read) -> np.ndarray:
    """Item codes joined with the classes of ``read(texts)`` (one key per text, from an object array
    of texts): two items share a code when they are equal as values or read alike.

    The texts are read once per code when every code has one text (the usual case), else once per
    distinct text.
    """
    if items.text_of_code is not None:  # one text per value: reading the texts refines nothing
        return pd.factorize(read(items.text_of_code))[0][items.code].astype(np.int64)
    text_code, distinct = pd.factorize(items.text)
    return _joined_codes(items.code, pd.factorize(read(np.asarray(distinct, dtype=object)))[0][text_code])


def loose_item_codes(items: Items) -> np.ndarray:
    """Item codes that also join items whose text is equal once stripped and case-folded: two
    items match when they are equal as values or their texts differ only in case and surrounding
    whitespace (``normalize_items``)."""
    return _joined_reading(items, lambda distinct: item_keys(distinct, True))


def _number_or_text(texts: np.ndarray) -> np.ndarray:
    """Each text as the finite number it reads as (float; ``-0.0`` read as ``0``), else the text
    itself; text with surrounding whitespace stays text (that is what ``normalize_items`` is for)."""
    column = pd.Series(texts, dtype=object)
    numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    is_number = np.isfinite(numbers) & (column.str.strip() == column).to_numpy(dtype=bool)
    keys = (numbers + 0.0).astype(object)
    keys[~is_number] = texts[~is_number]
    return keys


def numeric_text_codes(items: Items) -> np.ndarray:
    """Item codes that also join items whose texts read as the same number (``'1'``, ``'1.0'``
    and ``1`` one item): what comparing numbers written as text as numbers would match."""
    return _joined_reading(items, _number_or_text)


@keyword_only
def intrusion_diagnosis(n_intrusions: int, n_recalls: int, rescued: int | None, limit: float,
                        *, as_numbers: int = 0) -> str:
    """The message refusing a table whose recalls mostly match no studied item.

    ``rescued`` is how many of the intrusions would match when items are compared ignoring
    case and surrounding whitespace (None when that comparison is already on); ``as_numbers``
    how many would match when numbers written as text are compared as numbers.
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
    elif as_numbers:
        cause = (
            f"; {as_numbers} of them match a studied item when numbers written as text are compared as numbers "
            "('1' and '1.0'), which psifr does not do: convert the item column to numbers (pandas.to_numeric)"
        )
    else:
        cause = (
            "; check that recall rows carry the same subject and list labels as their study rows (lists "
            "numbered again in each session need list_keys=['session'], command line: --list-keys session) "
            "and that recalled words are spelled as studied"
        )
    return head + cause + "; to analyse the table as it is, give --max-intrusion-share 1 on the command line " \
        "or pass max_intrusion_share=1"


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
    """Serial position of each recall's item among its list's study items, -1 where none matches.

    Keys are integer item codes (:func:`read_items`), distinct within a studied list; the
    (trial, item) pairs are looked up in sorted order, without a Python loop.
    """
    if s_trial.size == 0 or r_trial.size == 0:
        return np.full(r_trial.size, -1, dtype=np.int64)
    n_keys = int(max(s_key.max(), r_key.max())) + 1
    study = s_trial.astype(np.int64) * n_keys + s_key
    order = np.argsort(study, kind="stable")
    study = study[order]
    wanted = r_trial.astype(np.int64) * n_keys + r_key
    at = np.minimum(np.searchsorted(study, wanted), study.size - 1)
    return np.where(study[at] == wanted, s_pos[order][at], -1).astype(np.int64)
