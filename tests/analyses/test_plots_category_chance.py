"""plots.category_chance: the vectorised level equals a per-list loop over the studied items."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cmr
from cmr.events import as_events
from cmr.errors import ParameterError
from icl_cmr.analyses.plots import category_chance


def _reference(events, category_key="category"):
    """The level list by list: each studied item's share of same-category items among the others."""
    events = as_events(events)
    categories = events[f"study_{category_key}"].transpose("trial", "study_position").values
    shares = []
    for row, length in zip(categories, events["list_length"].values):
        studied = pd.Series(row[: int(length)])
        studied = studied[studied.notna() & (studied.astype(str) != "")]
        if len(studied) < 2:
            continue
        same = studied.map(studied.value_counts()).to_numpy(dtype=float) - 1.0
        shares.extend((same[same > 0] / (len(studied) - 1)).tolist())
    if not shares:
        raise ParameterError("no shared category")
    return float(np.mean(shares))


def _events(categories, lengths, key="category"):
    categories = np.asarray(categories)
    items = [[f"w{trial}.{position}" for position in range(categories.shape[1])] for trial in range(len(lengths))]
    events = cmr.from_recall_matrix(np.zeros((len(lengths), 1), dtype=int), np.asarray(lengths), study_items=items)
    events[f"study_{key}"] = (("trial", "study_position"), categories)
    return events


def _both(events, **keywords):
    try:
        expected = _reference(events, **keywords)
    except ParameterError:
        with pytest.raises(ParameterError, match="shares its category"):
            category_chance(events, **keywords)
        return None
    got = category_chance(events, **keywords)
    assert got == expected  # the same shares averaged in the same order: equal to the last bit
    return got


def test_by_hand_with_missing_and_empty_categories_and_short_lists():
    events = _events(np.array([["a", "a", "b", "a"],    # a: 2/3 three times; b alone
                               ["a", None, "", "a"],    # None and "" are no category: a, a -> 1/1 twice
                               ["b", "c", "b", "b"],    # length 2: b, c -> none shared; beyond it ignored
                               ["x", "x", "x", "x"]], dtype=object), [4, 4, 2, 1])  # one item: nothing
    assert category_chance(events) == pytest.approx((3 * 2 / 3 + 2 * 1.0) / 5, rel=1e-15)
    _both(events)


def test_numeric_categories_with_nan():
    events = _events(np.array([[1.0, 1.0, np.nan, 2.0], [2.0, 2.0, 2.0, np.nan]]), [4, 3])
    assert _both(events) == pytest.approx((2 * 1 / 2 + 3 * 2 / 2) / 5, rel=1e-15)


def test_psifr_table_with_intrusions_repeats_and_an_unnamed_category():
    rows = [(1, 1, "study", p, w, c) for p, (w, c) in enumerate(
        [("cat", "animal"), ("dog", "animal"), ("oak", "tree"), ("elm", None), ("fir", "tree"), ("ash", "")], 1)]
    rows += [(1, 1, "recall", 1, "dog", None), (1, 1, "recall", 2, "pig", None),  # an intrusion
             (1, 1, "recall", 3, "dog", None), (1, 1, "recall", 4, "oak", None)]  # a repeat
    table = pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item", "category"])
    level = _both(table)
    assert level == pytest.approx(1 / 3, rel=1e-15)  # 4 categorised items, each shares with 1 of the 3 others


def test_no_shared_category_and_no_column_are_refused():
    with pytest.raises(ParameterError, match="shares its category"):
        category_chance(_events(np.array([["a", "b"], ["c", None]], dtype=object), [2, 2]))
    with pytest.raises(ParameterError, match="shares its category"):
        category_chance(_events(np.array([["", None]], dtype=object), [2]))
    with pytest.raises(ParameterError, match="no study column 'kind'"):
        category_chance(_events(np.array([["a", "a"]], dtype=object), [2]), category_key="kind")


def test_other_category_key():
    events = _events(np.array([["a", "a", "b"]], dtype=object), [3], key="kind")
    assert _both(events, category_key="kind") == 0.5


_VALUES = {
    "text": st.sampled_from(["a", "b", "c", "", None, np.nan]),
    "numbers": st.sampled_from([0.0, 1.0, 2.0, np.nan]),
    "mixed": st.sampled_from(["1", 1, 1.0, "a", "", None, np.nan, True]),
}


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from(sorted(_VALUES)))
def test_equals_the_per_list_loop(data, kind):
    n_trials = data.draw(st.integers(1, 6), label="n_trials")
    lengths = data.draw(st.lists(st.integers(1, 6), min_size=n_trials, max_size=n_trials), label="lengths")
    width = max(lengths)  # the cells beyond a list's length are there, and ignored
    cells = data.draw(st.lists(_VALUES[kind], min_size=n_trials * width, max_size=n_trials * width), label="cells")
    categories = np.empty((n_trials, width), dtype=object)
    categories.flat[:] = cells
    if kind == "numbers":
        categories = categories.astype(float)
    _both(_events(categories, lengths))
