"""Recalls are matched to studied items as psifr's merge matches them (by value: numbers as
numbers, text as text), psifr itself the oracle; where reading the items otherwise (as text, or
numbers written as text as numbers) would match some recalls differently, one warning counts them."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import cmr
from cmr.errors import RecallDataError, RecallDataWarning
from tests.conftest import require


def _table(study, recalled, n_lists=1):
    """``n_lists`` lists of subject 1, each studying ``study`` and recalling ``recalled`` (object column)."""
    rows = []
    for lst in range(1, n_lists + 1):
        rows += [(1, lst, "study", i + 1, item) for i, item in enumerate(study)]
        rows += [(1, lst, "recall", i + 1, item) for i, item in enumerate(recalled)]
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])
    table["item"] = pd.Series([row[4] for row in rows], dtype=object)  # the values as given, not inferred
    return table


def _psifr_serials(table):
    """psifr's serial position of each recall (-1 intrusion), by list then output position."""
    fr = require("psifr.fr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = fr.merge_free_recall(table)
    recall = merged[merged["recall"]].drop_duplicates(["subject", "list", "output"])
    recall = recall.sort_values(["subject", "list", "output"])
    return recall["input"].fillna(-1).astype(np.int64).to_numpy()


def _our_serials(events):
    recalls = events["recalls"].values
    return recalls[recalls != 0]


def _from_table(table, **options):
    """from_table, and the messages of the RecallDataWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = cmr.from_table(table, **options)
    assert all(issubclass(w.category, RecallDataWarning) for w in caught), [str(w.message) for w in caught]
    return events, [str(w.message) for w in caught]


CASES = {
    # name: (study items, recalled items, psifr's serial positions, what the warning says, or None)
    "int study, float recall (one float column)": (
        pd.Series([1, 2, 3]).astype(float).tolist(), [1.0, 3.0], [1, 3], None),
    "int study, float recall (object column)": (
        [1, 2, 3], [1.0, 3, 2.0], [1, 3, 2], r"^2 of 3 recalls \(66\.7%\) match a studied item that is equal as a "
                                             r"value but written differently \(such as '1\.0' and '1'\)"),
    "numbers written as text, '1.0' and '1'": (
        ["1.0", "2", "x"], ["1", "2.0", "x"], [-1, -1, 3],
        r"^2 of 3 recalls \(66\.7%\) match no studied item as written but match one when numbers written as "
        r"text are compared as numbers \(such as '1' and '1\.0'\); they count as intrusions here, as psifr"),
    "text '1' and the number 1": (
        ["1", "2"], [1, "2"], [-1, 2], r"^1 of 2 recalls .* numbers written as text are compared as numbers "
                                       r"\(such as '1' and '1'\)"),
    "-0.0 and 0.0": ([-0.0, 5.0], [0.0, 5.0], [1, 2], r"^1 of 2 recalls .* written differently \(such as '0\.0' "
                                                       r"and '-0\.0'\)"),
    "True and 1": ([True, "b"], [1, "b"], [1, 2], r"^1 of 2 recalls .* written differently \(such as '1' and "
                                                   r"'True'\)"),
    "spaces around a number": ([" 1", "2"], ["1", "2"], [-1, 2], r"^1 of 2 recalls .* when case and surrounding "
                                                                  r"spaces are ignored; .*normalize_items=True"),
    "plain words": (["ant", "bee", "cat"], ["cat", "dog", "ant"], [3, -1, 1], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_recalls_match_as_psifr_matches_them_and_a_warning_counts_other_readings(name):
    study, recalled, expected, warning = CASES[name]
    table = _table(study, recalled)
    if name.startswith("int study, float recall (one"):
        table["item"] = table["item"].astype(float)
    assert _psifr_serials(table).tolist() == expected  # the oracle says what the case claims
    events, messages = _from_table(table)
    assert _our_serials(events).tolist() == expected
    if warning is None:
        assert messages == []
    else:
        assert len(messages) == 1
        assert re.search(warning, messages[0]), messages[0]
        assert "\n" not in messages[0]


def test_items_are_kept_as_written_when_matched_by_value():
    events, _ = _from_table(_table([1, 2], [2.0, 1]))
    assert events["study_item"].values[0].tolist() == ["1", "2"]
    assert events["recall_item"].values[0].tolist() == ["2.0", "1"]
    assert events["recalls"].values[0].tolist() == [2, 1]


def test_warnings_point_at_the_caller():
    with pytest.warns(RecallDataWarning, match="written differently") as caught:
        cmr.from_table(_table([1, 2], [2.0, 1]))
    assert len(caught) == 1 and caught[0].filename == __file__


def test_normalize_items_joins_equal_values_and_spellings():
    table = _table([1, "Ant", " bee"], [1.0, "ant ", "BEE", "cow"])
    events, messages = _from_table(table, normalize_items=True)
    assert _our_serials(events).tolist() == [1, 2, 3, -1]
    assert messages == []  # spelling differences are what normalize_items asks to ignore


def test_equal_values_in_one_studied_list_are_one_item_studied_twice():
    events = cmr.from_table(_table([1, 2, 1.0], [1, 2]))
    assert events["presentation_item"].values.tolist() == [[1, 2, 1]]
    assert _our_serials(events).tolist() == [1, 2]  # a repeated item's recall is scored to its first position
    assert events.attrs["repeated_items"] == 1


def test_mostly_numbers_written_apart_are_refused_with_the_cause():
    table = _table(["1.0", "2.0", "3.0"], ["1", "2", "3"], n_lists=40)  # 120 recalls, none matches as written
    with pytest.raises(RecallDataError, match=r"^120 of 120 recalls \(100%\) match no item studied.*; 120 of them "
                                              r"match a studied item when numbers written as text are compared as "
                                              r"numbers.*pandas\.to_numeric.*max_intrusion_share=1$"):
        cmr.from_table(table)
    numbers = table.assign(item=pd.to_numeric(table["item"]))  # the fix the message names
    events, messages = _from_table(numbers)
    assert (events["recalls"].values > 0).all() and messages == []


def test_bundled_data_match_psifr_exactly_without_a_warning():
    fr = require("psifr.fr")
    raw = fr.sample_data("Morton2013")
    raw = raw[raw["subject"].isin([1, 2, 3])]
    events, messages = _from_table(raw)
    assert messages == []
    assert np.array_equal(_our_serials(events), _psifr_serials(raw))


def test_item_columns_of_every_kind_give_the_same_events_as_their_text():
    base = cmr.simulate_free_recall(cmr.default_parameters(), 8, 6, subjects=2, rng=3)
    as_text = cmr.from_table(base.assign(item=base["item"].astype(str)))
    for column in (base["item"], base["item"].astype("category"), base["item"].astype(object),
                   base["item"].astype(str).astype(object)):
        events = cmr.from_table(base.assign(item=column))
        for name in ("recalls", "study_item", "recall_item"):
            assert np.array_equal(events[name].values, as_text[name].values), (column.dtype, name)
