"""Free-recall events: psifr long tables and recall matrices <-> the events dataset.

The events dataset (kind ``"events"``, see docs/schema.md) holds one row per studied list
("trial"): the studied items by serial position, the recalled items by output position and
``recalls``, the serial position (1-based) of each recall, ``-1`` for an intrusion and ``0``
for padding. Recalls are matched to study items by item identity within (subject, list),
exactly as ``psifr.fr.merge_free_recall`` does, so repeats keep their serial position and
prior-list intrusions are intrusions.

Two outside formats convert both ways:

* the psifr long table (:func:`from_table`, :func:`to_table`): one row per study or recall
  event with columns ``subject, list, trial_type, position, item``; recall rows' ``position``
  is the output position. Extra columns are kept.
* recall matrices in the EMBAM / jaxcmr convention (:func:`from_recall_matrix`,
  :func:`to_recall_matrix`): ``(n_trials, n_outputs)`` integers, 1-based serial positions,
  ``0`` padding, ``-1`` intrusions.
"""
from __future__ import annotations

import json
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from .checks import parse_json, probability, recall_arrays
from .constants import INTRUSION_CHECK_MIN_RECALLS, MAX_INTRUSION_SHARE
from .errors import RecallDataError, RecallDataWarning
from .ordering import study_order
from .lab_tables import (intrusion_diagnosis, is_merged_table, list_key_columns, loose_item_codes, match_recalls,
                         numeric_text_codes, raw_from_merged, read_items, split_trial_types, texts_as_written)
from .schema import provenance_attrs, validate

__all__ = [
    "REQUIRED_COLUMNS",
    "from_table",
    "to_table",
    "from_recall_matrix",
    "to_recall_matrix",
    "as_events",
    "group_index",
    "unit_coordinates",
]

#: what ``by`` may be in every analysis: per subject, per trial (list) or pooled over everyone
UNITS = ("subject", "trial", None)

REQUIRED_COLUMNS = ("subject", "list", "trial_type", "position", "item")
_INTRUSION_ITEM = "<intrusion>"


# --- helpers ----------------------------------------------------------------------------


def _integer_column(values: pd.Series, what: str) -> np.ndarray:
    """Column as int64, or RecallDataError if any value is not a whole number."""
    if pd.api.types.is_bool_dtype(values.dtype) or not pd.api.types.is_numeric_dtype(values.dtype):
        raise RecallDataError(f"{what} must be integers; got values of type {values.dtype}")
    floats = values.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(floats) | (floats != np.round(floats))
    if bad.any():
        raise RecallDataError(
            f"{what} must be integers; got {floats[bad][0].item()!r} ({int(bad.sum())} non-integer value(s))"
        )
    huge = np.abs(floats) >= 2.0 ** 63  # beyond int64: the cast would give another number
    if huge.any():
        raise RecallDataError(
            f"{what} must be integers below 2**63 (9.2e18) in size; got {floats[huge][0].item()!r} "
            f"({int(huge.sum())} such value(s))"
        )
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.to_numpy(dtype=np.int64)  # exact: large integers do not pass through float
    return floats.astype(np.int64)


def _label_values(values: pd.Series, what: str) -> np.ndarray:
    """Subject or list labels as int64 when whole numbers, else as str."""
    if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
        return _integer_column(values, what)
    return values.astype(str).to_numpy(dtype=object)


def _label(value):
    """A label as a plain Python value, for messages (``1``, not ``np.int64(1)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _extra_values(values: pd.Series) -> tuple[np.ndarray, str, np.ndarray | None]:
    """An extra column as float64 with NaN, or as str with '' for missing values (codes into
    texts, the last text '' for padding); its kind; and the texts (None for numbers)."""
    dtype = values.dtype
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        kind = "int64" if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else "float64"
        return values.to_numpy(dtype=np.float64, na_value=np.nan), kind, None
    codes, texts = texts_as_written(values, missing="")
    return codes, "str", np.append(texts, "")


def _variable(dims, values: np.ndarray, attrs=None) -> xr.Variable:
    """A dataset variable of ``values`` as they are: an object array of Python str is already what
    xarray would make of it, so its round trip through pandas (most of from_table's time) is skipped."""
    return xr.Variable(dims, values, attrs, fastpath=values.dtype == object)


# --- long table -> events -----------------------------------------------------------------


def from_table(
    table: pd.DataFrame,
    *,
    source: str = "DataFrame",
    list_keys=None,
    normalize_items: bool = False,
    max_intrusion_share: float = MAX_INTRUSION_SHARE,
    columns=None,
    trial_types=None,
) -> xr.Dataset:
    """Events dataset from a psifr-format long table (raw or merged).

    Parameters
    ----------
    table : pandas.DataFrame
        One row per event; columns ``subject``, ``list``, ``trial_type`` (``"study"`` or
        ``"recall"``; rows of any other type, such as ``"distractor"``, are dropped and
        counted in ``attrs["ignored_trial_types"]``), ``position`` (serial position for study
        rows, output position for recall rows) and ``item``. A table scored by
        ``psifr.fr.merge_free_recall`` (columns ``input``, ``output``, ``study``,
        ``recall``) is read too. Study positions of each list must be exactly 1..n; an item
        studied again in its list is a repeat, recalled as its first (docs/repetition.md).
        Recall positions must be distinct whole numbers >= 1 within a list; they are
        renumbered 1..m in their order. Other columns are kept as ``study_<name>`` and
        ``recall_<name>`` variables. The table is not modified.
    source : str
        Where the table came from, recorded in the provenance.
    list_keys : str or sequence of str, optional
        Columns that, with ``subject`` and ``list``, identify a studied list (psifr's
        ``list_keys``): ``["session"]`` when list numbers start again in each session. They
        become coordinates along ``trial``.
    normalize_items : bool
        Match recalled to studied items also ignoring case and surrounding whitespace (default:
        by value, as psifr's merge matches them: ``1`` and ``1.0`` are one item, ``'1'`` and
        ``'1.0'`` two). Items are kept as written. A RecallDataWarning counts the recalls that
        another reading (ignoring case, or numbers written as text compared as numbers, or
        equal numbers written differently compared as text) would match otherwise.
    max_intrusion_share : float
        Refuse the table when more than this share of recalls match no studied item of their
        list (default 0.5): such tables nearly always mean recalls typed differently from the
        study list, or list labels that do not line up. ``1`` accepts any table; tables with
        fewer than 100 recalls are not checked.
    columns : mapping of str to str, optional
        A lab's own column names, as psifr's name -> the table's name, e.g.
        ``{"subject": "subject_id", "list": "list_num", "position": "serial_pos",
        "item": "word", "trial_type": "phase"}`` (command line: ``--columns
        subject=subject_id,...``). Applied first; psifr's names not given are read as they are.
    trial_types : mapping of str to str, optional
        A lab's own trial-type values, as psifr's type -> the table's value, e.g.
        ``{"study": "encoding", "recall": "retrieval"}`` (command line: ``--trial-types
        study=encoding,recall=retrieval``). Rows of other values are other trial types, as above.

    Returns
    -------
    xarray.Dataset
        Kind ``"events"``; dims ``trial`` (one per (subject, list), in study order: see
        :mod:`cmr.ordering`), ``study_position`` and ``output_position``.

    Raises
    ------
    RecallDataError
        For any malformed table (the message says what was expected and what came in), and
        for a table whose recalls are mostly intrusions (the message names the likely cause
        and the option that fixes it).
    """
    table = _lab_names(table, columns, trial_types)
    table, share_limit = _checked_table(table, max_intrusion_share)
    table, ignored = split_trial_types(table)
    list_keys = list_key_columns(table, list_keys, REQUIRED_COLUMNS)
    _check_no_missing_values(table, list_keys)
    is_study, is_recall = _trial_types(table, ignored)
    subject, list_label, position, items, match_keys = _event_columns(table, normalize_items)
    study_keys, trial = _list_trials(table, list_keys, subject, list_label, is_study, is_recall)
    study = _study_events(trial, position, items, match_keys, is_study, study_keys, list_keys, ignored)
    recall = _recall_events(trial, position, items, match_keys, is_recall, study, study_keys,
                            normalize_items, share_limit)
    ds = _events_dataset(table, study_keys, list_keys, study, recall, source)
    ds.attrs["ignored_trial_types"] = json.dumps(ignored)
    ds.attrs["normalize_items"] = int(bool(normalize_items))
    return validate(ds, "events")


# the steps of from_table, in its order: a table with several faults meets the first step's error


def _mapping(value, what: str, example: str) -> dict:
    """A ``columns`` / ``trial_types`` mapping as a dict of str -> str."""
    if not isinstance(value, dict) and not hasattr(value, "items"):
        raise RecallDataError(f"{what} must be a mapping like {example}; got {type(value).__name__}")
    pairs = dict(value.items())
    bad = [f"{k!r}: {v!r}" for k, v in pairs.items() if not isinstance(k, str) or not isinstance(v, str) or not v]
    if bad:
        raise RecallDataError(f"{what} must map names to non-empty text like {example}; got {', '.join(bad)}")
    return pairs


def _lab_names(table, columns, trial_types) -> pd.DataFrame:
    """The table with a lab's column names and trial-type values read as psifr's (a copy; the table is
    returned as it is when neither is given)."""
    if (columns is None and trial_types is None) or not isinstance(table, pd.DataFrame):
        return table
    if columns is not None:
        table = _renamed_columns(table, columns)
    if trial_types is not None:
        table = _renamed_trial_types(table, trial_types)
    return table


def _renamed_columns(table: pd.DataFrame, columns) -> pd.DataFrame:
    """The table with a lab's column names (psifr's name -> the table's) renamed to psifr's."""
    names = _mapping(columns, "columns", "{'subject': 'subject_id'}")
    unknown = [k for k in names if k not in REQUIRED_COLUMNS]
    if unknown:
        raise RecallDataError(f"columns maps psifr's column names ({', '.join(REQUIRED_COLUMNS)}) to the "
                              f"table's; got unknown psifr column(s): {', '.join(unknown)}")
    absent = [f"{k}={v}" for k, v in names.items() if v not in table.columns]
    if absent:
        raise RecallDataError(f"columns names table column(s) the table lacks: {', '.join(absent)} "
                              f"(table columns: {', '.join(map(str, table.columns))})")
    taken = [v for v in names.values() if list(names.values()).count(v) > 1]
    clash = [k for k, v in names.items() if k != v and k in table.columns and k not in names.values()]
    if taken or clash:
        raise RecallDataError(
            "columns must map each psifr column to its own table column, and a renamed column's psifr "
            f"name must not also be a column of the table; got {', '.join(map(str, sorted(set(taken)) or clash))}"
        )
    return table.rename(columns={v: k for k, v in names.items()})


def _renamed_trial_types(table: pd.DataFrame, trial_types) -> pd.DataFrame:
    """The table with a lab's trial-type values (psifr's type -> the table's) read as psifr's."""
    values = _mapping(trial_types, "trial_types", "{'study': 'encoding', 'recall': 'retrieval'}")
    unknown = [k for k in values if k not in ("study", "recall")]
    if unknown:
        raise RecallDataError(f"trial_types maps psifr's trial types (study, recall) to the table's values; "
                              f"got unknown trial type(s): {', '.join(unknown)}")
    if "trial_type" not in table.columns:
        raise RecallDataError("trial_types needs a trial_type column (name the table's with "
                              f"columns={{'trial_type': ...}}); got columns: {', '.join(map(str, table.columns))}")
    phase = table["trial_type"].astype(str)
    present = set(phase.unique().tolist())
    absent = [f"{k}={v}" for k, v in values.items() if v not in present]
    if absent:
        raise RecallDataError(f"trial_types names value(s) no row of trial_type has: {', '.join(absent)} "
                              f"(values: {', '.join(sorted(present)[:10])})")
    # a psifr name mapped to another value is, where written as such, another trial type
    moved = [k for k, v in values.items() if k != v]
    kept = phase.where(~phase.isin(moved), phase + " (as written)")
    return table.assign(trial_type=phase.map({v: k for k, v in values.items()}).fillna(kept).to_numpy(dtype=object))


def _checked_table(table, max_intrusion_share) -> tuple[pd.DataFrame, float]:
    """A raw psifr table (merged tables converted) with the required, distinct columns and a row;
    and the intrusion-share limit as a float."""
    if not isinstance(table, pd.DataFrame):
        raise RecallDataError(f"expected a pandas.DataFrame recall table; got {type(table).__name__}")
    share_limit = probability(max_intrusion_share, "max_intrusion_share")
    if is_merged_table(table):
        table = raw_from_merged(table)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise RecallDataError(
            f"recall table needs columns {', '.join(REQUIRED_COLUMNS)}; missing: {', '.join(missing)}"
            f" (got columns: {', '.join(map(str, table.columns))})"
        )
    if len(table) == 0:
        raise RecallDataError("recall table is empty; expected at least one study event")
    if table.columns.duplicated().any():
        dup = table.columns[table.columns.duplicated()].tolist()
        raise RecallDataError(f"recall table has duplicate column names: {dup}")
    return table, share_limit


def _check_no_missing_values(table: pd.DataFrame, list_keys) -> None:
    """RecallDataError if a required or list-key column has a NaN/None."""
    for column in REQUIRED_COLUMNS + tuple(list_keys):
        n_missing = int(table[column].isna().sum())
        if n_missing:
            raise RecallDataError(
                f"recall table column {column!r} must have no missing values; got {n_missing} NaN/None"
            )


def _trial_types(table: pd.DataFrame, ignored) -> tuple[np.ndarray, np.ndarray]:
    """Which rows are study and which recall events; RecallDataError without any study event."""
    phase = table["trial_type"]  # compared as a column: no text copy of every row
    is_study = (phase == "study").to_numpy(dtype=bool)
    is_recall = (phase == "recall").to_numpy(dtype=bool)
    if not is_study.any():
        found = f" (other trial types, ignored: {sorted(ignored)})" if ignored else ""
        raise RecallDataError(f"recall table has no study events; expected 'study' rows for every list{found}")
    return is_study, is_recall


def _event_columns(table: pd.DataFrame, normalize_items: bool):
    """Subject and list labels, positions (int64), items as written and as matched, per row."""
    subject = _label_values(table["subject"], "subject labels")
    list_label = _label_values(table["list"], "list labels")
    position = _integer_column(table["position"], "positions")
    items = read_items(table["item"])  # text as written (Python str, as netCDF stores it); codes as psifr matches
    return subject, list_label, position, items, loose_item_codes(items) if normalize_items else items.code


def _list_trials(table, list_keys, subject, list_label, is_study, is_recall) -> tuple[pd.DataFrame, np.ndarray]:
    """One trial per studied (subject, *list_keys, list), in study order (cmr.ordering): the trials' keys, and
    each row's trial (-1 for a row of no studied list; RecallDataError for such a recall)."""
    keys = {"subject": subject, **{k: _label_values(table[k], f"{k} labels") for k in list_keys}, "list": list_label}
    combined = np.zeros(len(table), dtype=np.int64)  # each row's rank of (subject, *list_keys, list)
    for name, labels in keys.items():
        code = study_order(labels, within=combined)  # numbers, "L1".."L12" by number; other text as in the file
        n_ranks = int(code.max(initial=0)) + 1
        if (int(combined.max()) + 1) * n_ranks >= 2 ** 62:  # ranks made dense again before they overflow
            combined = np.unique(combined, return_inverse=True)[1].reshape(-1)
        combined = combined * n_ranks + code
    studied, first_row = np.unique(combined[is_study], return_index=True)
    study_rows = np.nonzero(is_study)[0][first_row]
    study_keys = pd.DataFrame({name: labels[study_rows] for name, labels in keys.items()})
    at = np.minimum(np.searchsorted(studied, combined), studied.size - 1)
    trial = np.where(studied[at] == combined, at, -1)
    orphan = is_recall & (trial < 0)
    if orphan.any():
        first = np.argmax(orphan)
        first_orphan = pd.DataFrame({name: labels[[first]] for name, labels in keys.items()})
        raise RecallDataError(
            f"recall events for a list with no study events: {_list_name(first_orphan, 0)} "
            f"({int(orphan.sum())} recall row(s)); every list needs its study rows"
        )
    return study_keys, trial


class _StudyEvents(NamedTuple):
    """The study events of a table, in table order, and the studied lists they make."""

    rows: np.ndarray         # table row of each study event
    trial: np.ndarray        # its trial
    position: np.ndarray     # its serial position (1-based)
    list_length: np.ndarray  # (trial,)
    item: np.ndarray         # (trial, study_position) items as written, "" padding
    first: np.ndarray        # serial position of its item's first presentation in its list
    presentation: np.ndarray  # (trial, study_position) ``first`` by position, 0 padding


class _RecallEvents(NamedTuple):
    """The recall events of a table, by trial then output position, and the recall matrices."""

    rows: np.ndarray     # table row of each recall event
    trial: np.ndarray    # its trial
    output: np.ndarray   # its 0-based output index within the trial
    recalls: np.ndarray  # (trial, output_position) serial positions, -1 intrusion, 0 padding
    item: np.ndarray     # (trial, output_position) items as written, "" padding


def _study_events(trial, position, items, match_keys, is_study, study_keys, list_keys, ignored=None) -> _StudyEvents:
    """Checked study events (positions exactly 1..n per list) and the first presentation of each
    one's item: an item studied again in its list (matched as recalls are) is a repeat."""
    s_trial, s_pos, s_item = trial[is_study], position[is_study], items.text[is_study]
    list_length = _checked_list_lengths(s_trial, s_pos, study_keys, list_keys, ignored)
    study_item = np.full((len(study_keys), int(list_length.max())), "", dtype=object)
    study_item[s_trial, s_pos - 1] = s_item
    first = _first_positions(s_trial, s_pos, match_keys[is_study])
    presentation = np.zeros(study_item.shape, dtype=np.int64)
    presentation[s_trial, s_pos - 1] = first
    return _StudyEvents(np.nonzero(is_study)[0], s_trial, s_pos, list_length, study_item, first, presentation)


def _first_positions(s_trial, s_pos, s_keys) -> np.ndarray:
    """For each study event, the smallest serial position at which its (trial, item) pair is studied."""
    if s_trial.size == 0:
        return s_pos.astype(np.int64)
    key = np.unique(s_keys, return_inverse=True)[1].reshape(-1)
    pair = s_trial.astype(np.int64) * (int(key.max()) + 1) + key
    distinct, index = np.unique(pair, return_inverse=True)
    first = np.full(distinct.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, index.reshape(-1), s_pos.astype(np.int64))
    return first[index.reshape(-1)]


def _first_presentations(study: _StudyEvents) -> np.ndarray:
    """Which study events are their item's first presentation (the ones recalls are matched to)."""
    return study.first == study.position


def _checked_list_lengths(s_trial, s_pos, study_keys, list_keys, ignored=None) -> np.ndarray:
    """Length of each studied list; RecallDataError for positions < 1, repeated positions or gaps
    in a list's positions."""
    if (s_pos < 1).any():
        raise RecallDataError(f"study positions must be >= 1 (serial positions); got {s_pos.min()}")
    first = _first_repeat(s_trial, s_pos)
    if first >= 0:
        raise RecallDataError(
            _where("duplicate study position", study_keys, {"trial": s_trial[first], "pos": s_pos[first]})
            + ("" if list_keys else "; if list numbers start again in each session, name the column that tells "
               "sessions apart with list_keys (command line: --list-keys)")
        )
    n_trials = len(study_keys)
    counts = np.bincount(s_trial, minlength=n_trials)
    max_pos = np.zeros(n_trials, dtype=np.int64)
    np.maximum.at(max_pos, s_trial, s_pos)
    gaps = np.nonzero(max_pos != counts)[0]
    if gaps.size:
        t = gaps[0]
        raise RecallDataError(
            f"study positions of each list must be 1..n without gaps; {_list_name(study_keys, t)} has "
            f"{counts[t]} study events but positions up to {max_pos[t]}{_ignored_types(ignored)}"
        )
    return counts.astype(np.int64)


def _first_repeat(s_trial, key) -> int:
    """Index of the first row whose (trial, key) pair came earlier in the rows; -1 when all differ."""
    if int(key.max()) >= 2 ** 20:  # keys made dense, so trial * (n_keys + 1) + key cannot overflow
        key = np.unique(key, return_inverse=True)[1].reshape(-1)
    pair = s_trial.astype(np.int64) * (int(key.max()) + 1) + key
    order = np.argsort(pair, kind="stable")
    repeat = order[1:][pair[order[1:]] == pair[order[:-1]]]
    return int(repeat.min()) if repeat.size else -1


def _ignored_types(ignored) -> str:
    """What a gap message adds when rows of other trial types were left out (``'Study'`` is not ``'study'``)."""
    if not ignored:
        return ""
    found = ", ".join(f"{name!r} ({n} rows)" for name, n in ignored.items())
    return (f"; trial types are matched exactly: expected 'study' and 'recall', and these other values "
            f"were ignored: {found}")


def _recall_order(trial, position, is_recall, study_keys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Recall rows ordered by trial and output position, their trials and 0-based output indices
    (positions renumbered 1..m); RecallDataError for positions < 1 or repeated within a list."""
    r_rows = np.nonzero(is_recall)[0]
    r_trial, r_pos = trial[r_rows], position[r_rows]
    if (r_pos < 1).any():
        raise RecallDataError(f"recall (output) positions must be >= 1; got {r_pos.min()}")
    order = np.lexsort((r_pos, r_trial))
    r_rows, r_trial, r_pos = r_rows[order], r_trial[order], r_pos[order]
    same = (r_trial[1:] == r_trial[:-1]) & (r_pos[1:] == r_pos[:-1])
    if same.any():
        i = int(np.nonzero(same)[0][0]) + 1
        raise RecallDataError(
            f"duplicate recall (output) position {r_pos[i]} in {_list_name(study_keys, r_trial[i])}; "
            "each output position must occur once per list"
        )
    n_recalled = np.bincount(r_trial, minlength=len(study_keys))
    first = np.concatenate(([0], np.cumsum(n_recalled)[:-1]))
    return r_rows, r_trial, np.arange(r_trial.size) - first[r_trial]


def _matched_recalls(study: _StudyEvents, items, match_keys, r_rows, r_trial, normalize_items: bool,
                     share_limit: float) -> np.ndarray:
    """Serial position of each recall (-1: intrusion), matched by item within its list as psifr
    matches items (by value); RecallDataError (with the likely cause) when intrusions exceed
    ``share_limit``; a RecallDataWarning for each other reading of the items that would match
    some recalls differently."""
    first = _first_presentations(study)  # a recall of a repeated item is scored to its first presentation
    serial = match_recalls(study.trial[first], study.position[first], match_keys[study.rows[first]], r_trial,
                           match_keys[r_rows])
    n_intrusions = int((serial < 0).sum())
    as_numbers, number_pair = (_rescued(study, r_rows, r_trial, serial, numeric_text_codes(items), items.text)
                               if n_intrusions else (np.zeros(0, dtype=bool), None))
    rescued = None  # would ignoring case and surrounding spaces match some intrusions (other than those)?
    if n_intrusions and not normalize_items:
        rescued = int((_rescued(study, r_rows, r_trial, serial, loose_item_codes(items))[0] & ~as_numbers).sum())
    as_numbers = int(as_numbers.sum())
    if serial.size >= INTRUSION_CHECK_MIN_RECALLS and n_intrusions > share_limit * serial.size:
        raise RecallDataError(intrusion_diagnosis(n_intrusions, serial.size, rescued, share_limit, as_numbers=as_numbers))
    apart, apart_pair = 0, None  # equal values written differently? (not where every value has one text)
    if not normalize_items and items.text_of_code is None:
        apart, apart_pair = _written_apart(study, items.text, r_rows, r_trial, serial)
    notes = [
        (rescued, "match no studied item as written but match one when case and surrounding spaces are ignored; "
                  "they count as intrusions here: pass normalize_items=True (command line: --normalize-items) "
                  "to match them"),
        (as_numbers, f"match no studied item as written but match one when numbers written as text are compared "
                     f"as numbers (such as {number_pair}); they count as intrusions here, as psifr counts them: "
                     "convert the item column to numbers (pandas.to_numeric) to match them"),
        (apart, f"match a studied item that is equal as a value but written differently (such as {apart_pair}); "
                "they are matched here, as psifr matches them: convert the item column to text "
                "(table['item'].astype(str)) to compare items as written"),
    ]
    for count, note in notes:
        if count:
            warnings.warn(f"{count} of {serial.size} recalls ({count / serial.size:.1%}) {note}", RecallDataWarning,
                          stacklevel=4)
    return serial


def _rescued(study: _StudyEvents, r_rows, r_trial, serial, other_codes, items=None) -> tuple[np.ndarray, str | None]:
    """Which intrusions match a studied item of their list under ``other_codes`` (another reading
    of the items), and the first such recall and its studied item as text (with ``items``)."""
    intrusion = np.nonzero(serial < 0)[0]
    first = _first_presentations(study)
    other = match_recalls(study.trial[first], study.position[first], other_codes[study.rows[first]],
                          r_trial[intrusion], other_codes[r_rows[intrusion]])
    found = other > 0
    if not found.any() or items is None:
        return found, None
    i = int(np.argmax(found))
    return found, f"{items[r_rows[intrusion[i]]]!r} and {study.item[r_trial[intrusion[i]], other[i] - 1]!r}"


def _written_apart(study: _StudyEvents, items, r_rows, r_trial, serial) -> tuple[int, str | None]:
    """How many matched recalls are written differently from their studied item (equal values
    such as ``1`` and ``1.0``), and the first as text."""
    matched = np.nonzero(serial > 0)[0]
    recalled, studied = items[r_rows[matched]], study.item[r_trial[matched], serial[matched] - 1]
    apart = np.nonzero(recalled != studied)[0]
    if not apart.size:
        return 0, None
    return int(apart.size), f"{recalled[apart[0]]!r} and {studied[apart[0]]!r}"


def _recall_events(trial, position, items, match_keys, is_recall, study: _StudyEvents, study_keys,
                   normalize_items: bool, share_limit: float) -> _RecallEvents:
    """Checked, matched recall events and their (trial, output_position) matrices."""
    r_rows, r_trial, r_out = _recall_order(trial, position, is_recall, study_keys)
    serial = _matched_recalls(study, items, match_keys, r_rows, r_trial, normalize_items, share_limit)
    n_out = max(int(np.bincount(r_trial).max()) if r_trial.size else 0, 1)
    recalls = np.zeros((len(study_keys), n_out), dtype=np.int64)
    recalls[r_trial, r_out] = serial
    recall_item = np.full((len(study_keys), n_out), "", dtype=object)
    recall_item[r_trial, r_out] = items.text[r_rows]
    return _RecallEvents(r_rows, r_trial, r_out, recalls, recall_item)


def _extra_variables(table: pd.DataFrame, list_keys, study: _StudyEvents, recall: _RecallEvents) -> dict:
    """``study_<name>`` and ``recall_<name>`` variables of the table's other columns."""
    data_vars = {}
    extras = [c for c in table.columns if c not in REQUIRED_COLUMNS and c not in list_keys]
    for column in extras:
        values, kind, texts = _extra_values(table[column])  # converted once for both phases
        for prefix, rows, t_idx, col_idx, shape in (
            ("study", study.rows, study.trial, study.position - 1, study.item.shape),
            ("recall", recall.rows, recall.trial, recall.output, recall.recalls.shape),
        ):
            matrix = np.full(shape, np.nan if texts is None else texts.size - 1, dtype=values.dtype)
            matrix[t_idx, col_idx] = values[rows]
            if texts is not None:  # text placed as codes, taken last: no object array is filled twice
                matrix = texts[matrix]
            dims = ("trial", "study_position" if prefix == "study" else "output_position")
            attrs = {"table_column": str(column), "table_dtype": kind}
            data_vars[f"{prefix}_{column}"] = _variable(dims, matrix, attrs)
    return data_vars


def _events_dataset(table: pd.DataFrame, study_keys: pd.DataFrame, list_keys, study: _StudyEvents,
                    recall: _RecallEvents, source) -> xr.Dataset:
    """The events dataset (not yet validated) of checked study and recall events."""
    data_vars = {
        "list_length": ("trial", study.list_length),
        "study_item": _variable(("trial", "study_position"), study.item),
        "recall_item": _variable(("trial", "output_position"), recall.item),
        "recalls": (("trial", "output_position"), recall.recalls),
        **_extra_variables(table, list_keys, study, recall),
    }
    repeated = bool((study.first != study.position).any())
    if repeated:  # the map of repeat-free lists is 1..list_length, read as such where absent
        data_vars["presentation_item"] = (("trial", "study_position"), study.presentation)
    ds = xr.Dataset(
        data_vars,
        coords={
            "trial": np.arange(len(study_keys), dtype=np.int64),
            "subject": ("trial", study_keys["subject"].to_numpy()),
            **{k: ("trial", study_keys[k].to_numpy()) for k in list_keys},
            "list": ("trial", study_keys["list"].to_numpy()),
            "study_position": np.arange(1, study.item.shape[1] + 1, dtype=np.int64),
            "output_position": np.arange(1, recall.recalls.shape[1] + 1, dtype=np.int64),
        },
        attrs=provenance_attrs("events", "cmr.events.from_table", source=str(source)),
    )
    item_kind = "int64" if pd.api.types.is_integer_dtype(table["item"].dtype) else "str"
    ds["study_item"].attrs["item_dtype"] = item_kind
    ds.attrs["table_columns"] = json.dumps([str(c) for c in table.columns])
    ds.attrs["list_keys"] = json.dumps(list(list_keys))
    ds.attrs["repeated_items"] = int(repeated)
    return ds


def _list_name(study_keys: pd.DataFrame, t) -> str:
    """``subject 1, list 2`` (or one more name per list key, e.g. ``subject 1, phase 3, list 2``), for messages."""
    return ", ".join(f"{name} {_label(study_keys[name][int(t)])!r}" for name in study_keys.columns)


def _where(what: str, study_keys: pd.DataFrame, row) -> str:
    value = _label(row["pos"]) if what.endswith("position") else row["item"]
    return f"{what} {value!r} in {_list_name(study_keys, row['trial'])}"


# --- events -> long table -----------------------------------------------------------------


def to_table(events: xr.Dataset) -> pd.DataFrame:
    """psifr-format long table from an events dataset (inverse of :func:`from_table`).

    The conversion of events only. For a table of any result (the ``.csv`` and ``.parquet``
    outputs) use :func:`cmr.to_dataframe`, which gives this table for events.

    Rows are ordered by trial, then study events by serial position, then recall events by
    output position. ``study_<name>``/``recall_<name>`` variables become column ``<name>``;
    empty strings in text columns come back as missing values.

    Parameters
    ----------
    events : xarray.Dataset
        Kind ``"events"``.

    Returns
    -------
    pandas.DataFrame
        Columns ``subject, list, trial_type, position, item`` and any extra columns.
    """
    validate(events, "events")
    length = events["list_length"].values.astype(np.int64)
    study_item = events["study_item"].transpose("trial", "study_position").values
    recalls = events["recalls"].transpose("trial", "output_position").values
    recall_item = events["recall_item"].transpose("trial", "output_position").values
    n_trials, n_study = study_item.shape
    s_trial, s_col = np.nonzero(np.arange(n_study)[None, :] < length[:, None])
    r_trial, r_col = np.nonzero(recalls != 0)
    n_s, n_r = s_trial.size, r_trial.size
    trial = np.concatenate([s_trial, r_trial])
    phase = np.concatenate([np.zeros(n_s, np.int64), np.ones(n_r, np.int64)])
    pos = np.concatenate([s_col, r_col]) + 1
    order = np.lexsort((pos, phase, trial))
    items = np.concatenate([study_item[s_trial, s_col], recall_item[r_trial, r_col]])
    table = {
        "subject": events["subject"].values[trial],
        **{key: events[key].values[trial]
           for key in parse_json(events.attrs.get("list_keys", "[]"), "events attribute list_keys", RecallDataError)},
        "list": events["list"].values[trial],
        "trial_type": np.where(phase == 0, "study", "recall"),
        "position": pos.astype(np.int64),
        "item": items,
    }
    if events["study_item"].attrs.get("item_dtype") == "int64":
        table["item"] = items.astype(np.int64)
    for name in events.data_vars:
        if not name.startswith("study_") or name == "study_item":
            continue
        column = events[name].attrs.get("table_column", name[len("study_"):])
        recall_name = f"recall_{name[len('study_'):]}"
        s_vals = events[name].transpose("trial", "study_position").values[s_trial, s_col]
        if recall_name in events:
            r_vals = events[recall_name].transpose("trial", "output_position").values[r_trial, r_col]
        else:
            r_vals = np.full(n_r, np.nan if s_vals.dtype.kind == "f" else "", dtype=s_vals.dtype)
        table[column] = _restore_column(np.concatenate([s_vals, r_vals]), events[name].attrs.get("table_dtype"))
    frame = pd.DataFrame(table).iloc[order].reset_index(drop=True)
    columns = parse_json(events.attrs.get("table_columns", "[]"), "events attribute table_columns", RecallDataError)
    if sorted(columns) == sorted(frame.columns):
        frame = frame[columns]  # the column order of the original table
    return frame


def _restore_column(values: np.ndarray, kind):
    if values.dtype.kind == "f":
        if kind == "int64" and not np.isnan(values).any():
            return values.astype(np.int64)
        return values
    return pd.Series(values, dtype=object).where(values != "", np.nan).to_numpy()


# --- recall matrices ----------------------------------------------------------------------


def from_recall_matrix(
    recalls,
    list_length,
    subject=None,
    list=None,  # noqa: A002 - the psifr column name
    study_items=None,
    *,
    source: str = "recall matrix",
) -> xr.Dataset:
    """Events dataset from a recall matrix (EMBAM / jaxcmr convention).

    Parameters
    ----------
    recalls : array_like of int, shape (n_trials, n_outputs)
        Serial positions 1..list_length in output order, ``-1`` for an intrusion, ``0`` for
        padding after the last recall. Repeats are the same serial position again.
    list_length : int or array_like of int, shape (n_trials,)
    subject : array_like, shape (n_trials,), optional
        Subject label of each trial (default: all 1).
    list : array_like of int, shape (n_trials,), optional
        List label of each trial (default: 1..n within each subject).
    study_items : array_like of str, shape (n_trials, max list_length), optional
        Item names; default: the serial position as text (``"1"``, ``"2"``, ...).
    """
    matrix = np.asarray(recalls)
    if matrix.ndim != 2:
        raise RecallDataError(f"recall matrix must be 2-d (trials x outputs); got shape {matrix.shape}")
    if matrix.shape[0] == 0:
        raise RecallDataError("recall matrix has no trials (shape[0] == 0)")
    if matrix.dtype.kind == "f":
        if not np.isfinite(matrix).all():
            raise RecallDataError("recall matrix must be integers; got NaN or infinite values")
        if (matrix != np.round(matrix)).any():
            raise RecallDataError(
                f"recall matrix must be integers; got {matrix[matrix != np.round(matrix)][0].item()!r}"
            )
    elif matrix.dtype.kind not in "iu":
        raise RecallDataError(f"recall matrix must be integers; got dtype {matrix.dtype}")
    n_trials = matrix.shape[0]
    matrix, lengths = recall_arrays(matrix.astype(np.int64), list_length)
    n_study = int(lengths.max())
    if study_items is None:
        names = np.char.mod("%d", np.arange(1, n_study + 1)).astype(str)
        items = np.where(np.arange(n_study)[None, :] < lengths[:, None], names[None, :], "")
    else:
        items = np.asarray(study_items).astype(str)
        if items.shape != (n_trials, n_study):
            raise RecallDataError(
                f"study_items must have shape (n_trials, max list_length) = {(n_trials, n_study)}; got {items.shape}"
            )
    subjects = np.ones(n_trials, np.int64) if subject is None else np.asarray(subject)
    if subjects.shape != (n_trials,):
        raise RecallDataError(f"subject needs one label per trial ({n_trials}); got shape {subjects.shape}")
    if list is None:
        lists = pd.Series(subjects).groupby(subjects, sort=False).cumcount().to_numpy() + 1
    else:
        lists = np.asarray(list)
    if lists.shape != (n_trials,):
        raise RecallDataError(f"list needs one label per trial ({n_trials}); got shape {lists.shape}")

    # build the long table and go through the one validated path
    s_trial, s_col = np.nonzero(np.arange(n_study)[None, :] < lengths[:, None])
    r_trial, r_col = np.nonzero(matrix != 0)
    r_serial = matrix[r_trial, r_col]
    r_item = np.where(r_serial > 0, items[r_trial, np.maximum(r_serial, 1) - 1], _INTRUSION_ITEM)
    table = pd.DataFrame(
        {
            "subject": np.concatenate([subjects[s_trial], subjects[r_trial]]),
            "list": np.concatenate([lists[s_trial], lists[r_trial]]),
            "trial_type": np.repeat(["study", "recall"], [s_trial.size, r_trial.size]),
            "position": np.concatenate([s_col, r_col]) + 1,
            "item": np.concatenate([items[s_trial, s_col], r_item]),
        }
    )
    return from_table(table, source=source, max_intrusion_share=1.0)


def to_recall_matrix(events: xr.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Recall matrix and list lengths of an events dataset.

    Returns
    -------
    recalls : numpy.ndarray of int64, shape (n_trials, n_outputs)
        1-based serial positions, ``-1`` intrusions, ``0`` padding.
    list_length : numpy.ndarray of int64, shape (n_trials,)
    """
    validate(events, "events")
    recalls = np.ascontiguousarray(events["recalls"].transpose("trial", "output_position").values, dtype=np.int64)
    return recalls, np.ascontiguousarray(events["list_length"].values, dtype=np.int64)


# --- what every analysis does first ---------------------------------------------------------


def as_events(events, analysis: str | None = None) -> xr.Dataset:
    """A validated events dataset; a psifr long table (pandas DataFrame) is converted first.

    With ``analysis`` (its name), lists with repeated study items are refused by that name
    (:func:`cmr.repetition.refuse_repeats`): for analyses with no convention for them.
    """
    events = from_table(events) if isinstance(events, pd.DataFrame) else validate(events, "events")
    if analysis is not None:
        from ._presentations import refuse_repeats

        refuse_repeats(events, analysis)
    return events


def group_index(events: xr.Dataset, by) -> tuple[np.ndarray, np.ndarray | None]:
    """Group index (0..G-1) of each trial and the group labels, for ``by`` in (subject, trial, None)."""
    if by not in UNITS:
        raise RecallDataError(f"by must be 'subject', 'trial' or None (pooled); got {by!r}")
    n_trials = events.sizes["trial"]
    if by is None:
        return np.zeros(n_trials, dtype=np.int64), None
    if by == "trial":
        return np.arange(n_trials, dtype=np.int64), None
    labels, index = np.unique(events.variables["subject"].values, return_inverse=True)
    return index.astype(np.int64).reshape(-1), labels


def unit_coordinates(events: xr.Dataset, by, labels) -> tuple[tuple[str, ...], dict]:
    """Unit dims and coords of a result grouped ``by`` (see :func:`group_index`)."""
    if by is None:
        return (), {}
    if by == "subject":
        return ("subject",), {"subject": labels}
    return ("trial",), {name: events[name] for name in ("trial", "subject", "list")}
