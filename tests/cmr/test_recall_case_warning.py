"""Recalls typed in another case (or with surrounding spaces) are never silently intrusions: a
warning counts them whenever normalize_items would match them, below the share that is refused."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cmr
from cmr.errors import RecallDataError, RecallDataWarning


def _table(share, seed=0):
    table = cmr.simulate_free_recall(cmr.default_parameters(), 8, 40, subjects=3, rng=1)
    table["item"] = "w" + table["item"].astype(str)
    recall = (table["trial_type"] == "recall").to_numpy()
    pick = recall & (np.random.default_rng(seed).random(len(table)) < share)
    table.loc[pick, "item"] = " " + table.loc[pick, "item"].str.upper() + " "
    return table, int(pick.sum()), int(recall.sum())


@pytest.mark.parametrize("share", [0.01, 0.3])
def test_a_share_below_the_refusal_is_counted_in_a_warning(share):
    table, changed, n_recalls = _table(share)
    with pytest.warns(RecallDataWarning, match=rf"^{changed} of {n_recalls} recalls \(.*\) match no studied item as "
                                               r"written.*normalize_items=True") as caught:
        events = cmr.from_table(table)
    assert len(caught) == 1 and caught[0].filename == __file__
    assert int((events["recalls"].values < 0).sum()) == changed  # they are intrusions, as the warning says


def test_normalize_items_matches_them_without_a_warning():
    table, _, _ = _table(0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        events = cmr.from_table(table, normalize_items=True)
    assert int((events["recalls"].values < 0).sum()) == 0


def test_real_intrusions_alone_give_no_warning():
    table, _, _ = _table(0.0)
    recall = table.index[table["trial_type"] == "recall"][:5]
    table.loc[recall, "item"] = "never studied"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        events = cmr.from_table(table)
    assert int((events["recalls"].values < 0).sum()) == 5


def test_most_recalls_in_another_case_are_still_refused():
    table, _, _ = _table(0.8)
    with pytest.raises(RecallDataError, match="match a studied item when case and surrounding spaces are ignored"):
        cmr.from_table(table)
