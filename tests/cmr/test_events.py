"""Events datasets: psifr tables and recall matrices both ways, matching psifr's merge."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings

from cmr.events import from_recall_matrix, from_table, to_recall_matrix, to_table
from cmr.schema import validate
from cmr.testing import recall_tables
from tests.conftest import require


def _table(subjects, study, recall, **extra):
    """A psifr long table from lists of study and recall items (as psifr.fr.table_from_lists)."""
    rows = []
    for n, (subject, s_items, r_items) in enumerate(zip(subjects, study, recall)):
        rows += [(subject, n + 1, "study", i + 1, item) for i, item in enumerate(s_items)]
        rows += [(subject, n + 1, "recall", i + 1, item) for i, item in enumerate(r_items)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"]).assign(**extra)


def _sorted_like_ours(df):
    phase = (df["trial_type"] == "recall").astype(int)
    return df.assign(_phase=phase).sort_values(["subject", "list", "_phase", "position"], kind="stable").drop(
        columns="_phase"
    ).reset_index(drop=True)


def test_hand_worked_matching_intrusions_repeats_and_prior_list_intrusions():
    table = _table(
        [1, 1],
        [["absence", "hollow", "pupil"], ["fountain", "piano", "pillow"]],
        [["pupil", "absence", "pupil", "cat"], ["hollow", "piano"]],
    )
    events = from_table(table)
    assert events.sizes == {"trial": 2, "study_position": 3, "output_position": 4}
    # repeat keeps its serial position; extra-list and prior-list intrusions are -1
    assert events["recalls"].values.tolist() == [[3, 1, 3, -1], [-1, 2, 0, 0]]
    assert events["recall_item"].values[1].tolist() == ["hollow", "piano", "", ""]
    assert events["list_length"].values.tolist() == [3, 3]
    assert events["subject"].values.tolist() == [1, 1] and events["list"].values.tolist() == [1, 2]
    assert json.loads(events.attrs["provenance"])["source"] == "DataFrame"


def test_recall_positions_are_ordered_and_renumbered():
    table = _table([7], [["a", "b", "c"]], [["c", "a"]])
    table.loc[table["trial_type"] == "recall", "position"] = [10, 4]  # out of order, with a gap
    events = from_table(table.iloc[::-1])  # row order does not matter either
    assert events["recalls"].values.tolist() == [[1, 3]]


def test_lists_without_recalls_and_unequal_lengths():
    table = _table(["s2", "s1"], [["a", "b"], ["c", "d", "e"]], [[], ["e"]])
    events = from_table(table)
    # trials sorted by subject then list
    assert events["subject"].values.tolist() == ["s1", "s2"]
    assert events["list_length"].values.tolist() == [3, 2]
    assert events["recalls"].values.tolist() == [[3], [0]]
    assert events["study_item"].values.tolist() == [["c", "d", "e"], ["a", "b", ""]]


def test_input_table_is_not_mutated():
    table = _table([1], [["a", "b"]], [["b", "x"]], onset=[np.nan, np.nan, 1.5, 2.5])
    before = table.copy(deep=True)
    from_table(table)
    pd.testing.assert_frame_equal(table, before)


def test_table_round_trip_keeps_extra_columns():
    table = _table(
        [1, 1], [["a", "b"], ["c", "d"]], [["b", "zz"], ["c"]],
        onset=[np.nan, np.nan, 1.5, 2.5, np.nan, np.nan, 0.7],
        category=["x", "y", "y", None, "x", "x", "x"],
        number=[1, 2, 2, 9, 3, 4, 3],
    )
    events = from_table(table)
    assert events["study_number"].values.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(events["recall_onset"].values, [[1.5, 2.5], [0.7, np.nan]])
    assert events["recall_category"].values.tolist() == [["y", ""], ["x", ""]]
    back = to_table(events)
    assert list(back.columns) == list(table.columns)
    pd.testing.assert_frame_equal(back, _sorted_like_ours(table), check_dtype=False)
    assert back["number"].dtype == np.int64


@pytest.mark.parametrize("name", ["Morton2013", "peers_notask"])
def test_bundled_tables_round_trip_and_match_psifr_merge(name):
    fr = require("psifr.fr")
    table = fr.sample_data(name)
    events = from_table(table)
    pd.testing.assert_frame_equal(to_table(events), _sorted_like_ours(table))
    merged = fr.merge_free_recall(table)
    # psifr's merge duplicates an intrusion row once per list the item was studied in (its
    # prior-list lookup merges on subject and item); one row per output position is the event
    recall = merged[merged["recall"]].drop_duplicates(["subject", "list", "output"])
    recall = recall.sort_values(["subject", "list", "output"])
    expected = recall["input"].fillna(-1).astype(np.int64).to_numpy()
    recalls = events["recalls"].values
    assert np.array_equal(recalls[recalls != 0], expected)


def test_integer_items_round_trip():
    table = _table([1], [[10, 20, 30]], [[30, 99]])
    events = from_table(table)
    assert events["recalls"].values.tolist() == [[3, -1]]
    back = to_table(events)
    assert back["item"].dtype == np.int64
    pd.testing.assert_frame_equal(back, _sorted_like_ours(table))


def test_recall_matrix_round_trip():
    recalls = np.array([[3, 1, -1, 3, 0], [2, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    events = from_recall_matrix(recalls, [3, 4, 2], subject=[5, 5, 6])
    validate(events, "events")
    assert events["list"].values.tolist() == [1, 2, 1]
    assert events["study_item"].values[0].tolist() == ["1", "2", "3", ""]
    got, lengths = to_recall_matrix(events)
    assert lengths.tolist() == [3, 4, 2]
    assert np.array_equal(got, recalls[:, :4])  # trailing all-padding column dropped
    assert got.dtype == np.int64


def test_recall_matrix_with_named_items_goes_through_the_table():
    events = from_recall_matrix([[2, 1]], 2, study_items=[["cat", "dog"]])
    table = to_table(events)
    assert table["item"].tolist() == ["cat", "dog", "dog", "cat"]
    assert table["trial_type"].tolist() == ["study", "study", "recall", "recall"]


#: tables of up to 3 subjects with uneven lists (numbered with gaps), intrusions and repeats
EVENT_TABLES = recall_tables(subjects=(1, 3), lists=(1, 2), list_length=(1, 6), max_recalls=8,
                             prior_list_intrusions=False, list_gaps=True, n_words=12)


@settings(max_examples=20, deadline=None)
@given(EVENT_TABLES)
def test_events_round_trips(tmp_path_factory, table):
    from cmr.io import load_dataset, save_dataset

    events = from_table(table)
    # table -> events -> table -> events is identical
    again = from_table(to_table(events))
    xr.testing.assert_identical(again.drop_attrs(), events.drop_attrs())
    # netCDF round trip is identical
    path = tmp_path_factory.mktemp("events") / "events.nc"
    save_dataset(events, path)
    xr.testing.assert_identical(load_dataset(path, "events"), events)
    # recall matrix round trip keeps recalls
    recalls, lengths = to_recall_matrix(events)
    from_matrix = from_recall_matrix(recalls, lengths, subject=events["subject"].values, list=events["list"].values)
    assert np.array_equal(to_recall_matrix(from_matrix)[0], recalls)
