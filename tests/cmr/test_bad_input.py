"""Malformed inputs get a typed error that says what was expected and what came in."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cmr import errors
from cmr.events import from_recall_matrix, from_table
from cmr.crp import lag_counts, lag_crp


def _good():
    return pd.DataFrame(
        {
            "subject": [1, 1, 1, 1, 1],
            "list": [1, 1, 1, 1, 1],
            "trial_type": ["study", "study", "study", "recall", "recall"],
            "position": [1, 2, 3, 1, 2],
            "item": ["a", "b", "c", "c", "a"],
        }
    )


def _many_lists(recalled, n_lists=40):
    """``n_lists`` lists of a, b, c, each followed by the recalls ``recalled``."""
    one = pd.DataFrame({"trial_type": ["study"] * 3 + ["recall"] * len(recalled), "position": [1, 2, 3, 1, 2, 3][: 3 + len(recalled)],
                        "item": ["a", "b", "c", *recalled]})
    return pd.concat([one.assign(subject=1, list=n) for n in range(1, n_lists + 1)], ignore_index=True)


def _with(column, values):
    table = _good()
    table[column] = values
    return table


def _csv(tmp_path, text: bytes, name="data.csv"):
    path = tmp_path / name
    path.write_bytes(text)
    return path


def _load(source):
    from icl_cmr.adapters.recall_data import load_recall_data

    return load_recall_data(source)


def _load_nc(path, kind=None):
    from cmr.io import load_dataset

    return load_dataset(path, kind)


def _truncated_nc(tmp_path):
    """A real netCDF file cut in half, as an interrupted non-atomic write would leave it."""
    from cmr.io import save_dataset

    path = save_dataset(_events(), tmp_path / "events.nc")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _events():
    return from_recall_matrix(np.array([[2, 1]]), 2)


# (id, callable(tmp_path), error type, regex that must match the message)
CASES = [
    ("missing column", lambda p: from_table(_good().drop(columns="position")),
     errors.RecallDataError, r"needs columns subject, list, trial_type, position, item; missing: position"),
    ("two missing columns", lambda p: from_table(_good()[["subject", "item"]]),
     errors.RecallDataError, r"missing: list, trial_type, position"),
    ("non-integer position", lambda p: from_table(_with("position", [1, 2, 2.5, 1, 2])),
     errors.RecallDataError, r"positions must be integers; got 2\.5"),
    ("text position", lambda p: from_table(_with("position", ["1", "2", "3", "1", "2"])),
     errors.RecallDataError, r"positions must be integers; got values of type"),
    ("boolean position", lambda p: from_table(_with("position", [True] * 5)),
     errors.RecallDataError, r"positions must be integers; got values of type bool"),
    ("duplicate study position", lambda p: from_table(_with("position", [1, 2, 2, 1, 2])),
     errors.RecallDataError, r"duplicate study position 2 in subject 1, list 1"),
    ("gap in study positions", lambda p: from_table(_with("position", [1, 2, 4, 1, 2])),
     errors.RecallDataError, r"1\.\.n without gaps.*3 study events but positions up to 4"),
    ("zero study position", lambda p: from_table(_with("position", [0, 1, 2, 1, 2])),
     errors.RecallDataError, r"study positions must be >= 1.*got 0"),
    ("duplicate recall position", lambda p: from_table(_with("position", [1, 2, 3, 1, 1])),
     errors.RecallDataError, r"duplicate recall \(output\) position 1 in subject 1, list 1"),
    ("NaN item", lambda p: from_table(_with("item", ["a", "b", None, "c", "a"])),
     errors.RecallDataError, r"column 'item' must have no missing values; got 1 NaN"),
    ("NaN subject", lambda p: from_table(_with("subject", [1, 1, np.nan, 1, 1])),
     errors.RecallDataError, r"column 'subject' must have no missing values; got 1 NaN"),
    ("empty table", lambda p: from_table(_good().iloc[:0]),
     errors.RecallDataError, r"recall table is empty; expected at least one study event"),
    ("trial types in capitals", lambda p: from_table(_with("trial_type", ["Study"] * 3 + ["Recall"] * 2)),
     errors.RecallDataError, r"no study events.*other trial types, ignored: \['Recall', 'Study'\]"),
    ("missing trial type", lambda p: from_table(_with("trial_type", ["study"] * 3 + [None, "recall"])),
     errors.RecallDataError, r"column 'trial_type' must have no missing values; got 1 NaN"),
    ("recalls typed in another case", lambda p: from_table(_many_lists(["A ", "b", "C"])),
     errors.RecallDataError, r"80 of 120 recalls \(67%\) match no item.*80 of them match.*normalize_items=True"),
    ("recalls of another list", lambda p: from_table(_many_lists(["x", "y", "a"])),
     errors.RecallDataError, r"80 of 120 recalls \(67%\) match no item.*list_keys=\['session'\]"),
    ("unknown list key", lambda p: from_table(_good(), list_keys=["session"]),
     errors.RecallDataError, r"list_keys must name distinct columns.*\['session'\]"),
    ("recalls without study rows", lambda p: from_table(pd.concat([_good(), _good().iloc[3:].assign(list=2)])),
     errors.RecallDataError, r"recall events for a list with no study events: subject 1, list 2"),
    ("only recall rows", lambda p: from_table(_good().iloc[3:]),
     errors.RecallDataError, r"no study events"),
    ("not a DataFrame", lambda p: from_table({"subject": [1]}),
     errors.RecallDataError, r"expected a pandas\.DataFrame recall table; got dict"),
    ("recall beyond list length", lambda p: from_recall_matrix([[1, 5]], 4),
     errors.RecallDataError, r"serial positions 1\.\.list_length \(4\).*got 5 at trial 0, output 2"),
    ("recall code -2", lambda p: from_recall_matrix([[-2]], 4),
     errors.RecallDataError, r"or -1 \(intrusion\); got -2"),
    ("NaN in recall matrix", lambda p: from_recall_matrix([[1.0, np.nan]], 4),
     errors.RecallDataError, r"recall matrix must be integers; got NaN"),
    ("recall after padding", lambda p: from_recall_matrix([[1, 0, 2]], 4),
     errors.RecallDataError, r"padding \(0\) must come after the last recall; got 2 after a 0"),
    ("1-d recall matrix", lambda p: from_recall_matrix([1, 2], 4),
     errors.RecallDataError, r"must be 2-d \(trials x outputs\); got shape \(2,\)"),
    ("list lengths per trial", lambda p: from_recall_matrix([[1], [2]], [3, 3, 3]),
     errors.RecallDataError, r"list_length must be an integer or one integer per trial \(2\); got shape \(3,\)"),
    ("unknown bundled name", lambda p: _load("psifr:Morton2014"),
     errors.DataSourceError, r"unknown bundled recall data set 'psifr:Morton2014'; known: psifr:Morton2013"),
    ("missing file", lambda p: _load(p / "nothere.csv"),
     errors.DataSourceError, r"no such recall-data file: .*nothere\.csv"),
    ("directory instead of file", lambda p: _load(p),
     errors.DataSourceError, r"expected a CSV file; got a directory"),
    ("unreadable (binary) file", lambda p: _load(_csv(p, b"\xff\xfe\x00\x81\x92binary\x00")),
     errors.FileFormatError, r"is not a readable CSV recall table \(expected a psifr long table"),
    ("empty file", lambda p: _load(_csv(p, b"")),
     errors.FileFormatError, r"is not a readable CSV recall table.*EmptyDataError"),
    ("CSV without the columns", lambda p: _load(_csv(p, b"a,b\n1,2\n")),
     errors.RecallDataError, r"missing: subject, list, trial_type, position, item \(got columns: a, b\)"),
    ("source of the wrong type", lambda p: _load(42),
     errors.DataSourceError, r"bundled name, a CSV path or a pandas DataFrame; got int"),
    ("truncated netCDF", lambda p: _load_nc(_truncated_nc(p)),
     errors.FileFormatError, r"is not a readable netCDF file"),
    ("garbage netCDF", lambda p: _load_nc(_csv(p, b"not a netCDF file at all" * 8, "x.nc")),
     errors.FileFormatError, r"is not a readable netCDF file"),
    ("missing netCDF", lambda p: _load_nc(p / "nothere.nc"),
     errors.DataSourceError, r"no such file: .*nothere\.nc"),
    ("not a dataset", lambda p: lag_crp(np.zeros(3)),
     errors.SchemaError, r"expected an xarray\.Dataset; got ndarray"),
    ("dataset not made by icl-cmr", lambda p: lag_crp(xr.Dataset({"x": ("t", [1])})),
     errors.SchemaError, r"has no 'icl_cmr_kind' attribute"),
    ("dataset of the wrong kind", lambda p: lag_crp(lag_crp(_events())),
     errors.SchemaError, r"expected a 'events' dataset; got 'lag_profile'"),
    ("events with recalls out of range", lambda p: lag_crp(_events().assign(list_length=("trial", [1]))),
     errors.SchemaError, r"recalls must be serial positions 1\.\.list_length"),
    ("bad lag window", lambda p: lag_crp(_events(), lags="5"),
     errors.ProfileError, r"lags must be None \(every lag\), an integer K .* got '5'"),
    ("negative lag window", lambda p: lag_crp(_events(), lags=-1),
     errors.ProfileError, r"needs K >= 0; got -1"),
    ("lag window not increasing", lambda p: lag_crp(_events(), lags=[2, -2]),
     errors.ProfileError, r"strictly increasing; got \[2, -2\]"),
    ("lag_counts out of range", lambda p: lag_counts([[1, 4]], 3),
     errors.RecallDataError, r"serial positions 1\.\.list_length \(3\).*got 4 at trial 0, output 2"),
    ("lag_counts float recalls", lambda p: lag_counts([[1.0, 2.0]], 3),
     errors.RecallDataError, r"2-d integer array .* got 2-d float64"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_input_raises_typed_error(tmp_path, case):
    _, call, error, pattern = case
    with pytest.raises(error, match=pattern) as info:
        call(tmp_path)
    assert isinstance(info.value, errors.ICLCMRError)
    assert not isinstance(info.value, AssertionError)


def test_at_least_fifteen_cases():
    assert len(CASES) >= 15


def test_wrong_kind_file_is_a_schema_error(tmp_path):
    from cmr.io import load_dataset, save_dataset

    path = save_dataset(lag_crp(_events(), by=None), tmp_path / "crp.nc")
    with pytest.raises(errors.SchemaError, match=r"expected a 'events' dataset; got kind 'lag_profile'"):
        load_dataset(path, "events")
