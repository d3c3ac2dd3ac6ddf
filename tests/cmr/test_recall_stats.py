"""SPC, PNR/PFR, compound lag-CRP and lag rank: psifr-exact, hand-worked and properties."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from cmr import recall_stats
from cmr.events import from_recall_matrix
from cmr.crp import lag_crp, lag_crp_compound
from cmr.testing import recall_matrices, recall_tables


@pytest.fixture(scope="module", params=["Morton2013", "peers_notask"])
def bundled(request):
    from tests.conftest import require

    fr = require("psifr.fr")
    from icl_cmr.adapters.recall_data import load_recall_data

    events = load_recall_data(f"psifr:{request.param}")
    merged = fr.merge_free_recall(fr.sample_data(request.param))
    return events, merged, fr


def test_spc_equals_psifr(bundled):
    events, merged, fr = bundled
    ours = recall_stats.spc(events)
    ref = fr.spc(merged).set_index(["subject", "input"]).to_xarray()
    assert np.array_equal(ref["subject"].values, ours["subject"].values)
    np.testing.assert_allclose(ours["prob"].values, ref["recall"].values, rtol=0, atol=1e-12)
    assert (ours["possible"].values == events.sizes["trial"] // ours.sizes["subject"]).all()


def test_pnr_and_pfr_equal_psifr(bundled):
    events, merged, fr = bundled
    ref = fr.pnr(merged).set_index(["subject", "output", "input"]).to_xarray()
    ours = recall_stats.pnr(events)
    assert np.array_equal(ours["actual"].values, ref["actual"].values)
    assert np.array_equal(ours["possible"].values, ref["possible"].values)
    np.testing.assert_allclose(ours["prob"].values, ref["prob"].values, rtol=0, atol=1e-12)
    first = recall_stats.pfr(events)
    assert first["prob"].dims == ("subject", "serial_position")
    assert np.array_equal(first["actual"].values, ref["actual"].sel(output=1).values)
    assert np.array_equal(first["possible"].values, ref["possible"].sel(output=1).values)
    np.testing.assert_allclose(first["prob"].values, ref["prob"].sel(output=1).values, rtol=0, atol=1e-12)


def _first_subjects(events, merged, n=15):
    """The first n subjects only: psifr's compound CRP and lag rank are slow (seconds)."""
    keep = np.unique(events["subject"].values)[:n]
    return events.isel(trial=np.isin(events["subject"].values, keep)), merged[merged["subject"].isin(keep)]


def test_compound_lag_crp_equals_psifr(bundled):
    events, merged, fr = bundled
    events, merged = _first_subjects(events, merged)
    ref = fr.lag_crp_compound(merged).set_index(["subject", "previous", "current"]).to_xarray()
    ours = lag_crp_compound(events)
    assert ours["profile"].dims == ("subject", "previous_lag", "lag")
    assert np.array_equal(ours["actual"].values, ref["actual"].values)
    assert np.array_equal(ours["possible"].values, ref["possible"].values)
    np.testing.assert_allclose(ours["profile"].values, ref["prob"].values, rtol=0, atol=1e-12)


def test_lag_rank_equals_psifr(bundled):
    events, merged, fr = bundled
    events, merged = _first_subjects(events, merged)
    ref = fr.lag_rank(merged).set_index("subject").to_xarray()
    ours = recall_stats.lag_rank(events)
    np.testing.assert_allclose(ours["rank"].values, ref["rank"].values, rtol=0, atol=1e-12)


def _events(rows, length):
    return from_recall_matrix(np.array(rows), length)


def test_hand_worked_spc_and_pfr():
    # list 1: 3, -1, 3, 1 ; list 2: -1, 2 ; list 3: nothing
    events = _events([[3, -1, 3, 1], [-1, 2, 0, 0], [0, 0, 0, 0]], 3)
    curve = recall_stats.spc(events, by=None)
    assert curve["actual"].values.tolist() == [1, 1, 1]
    assert curve["possible"].values.tolist() == [3, 3, 3]
    first = recall_stats.pfr(events, by=None)
    # first *valid* recall: 3 in list 1, 2 in list 2 (after an intrusion); list 3 has none
    assert first["actual"].values.tolist() == [0, 1, 1]
    assert first["possible"].values.tolist() == [2, 2, 2]
    nth = recall_stats.pnr(events, by=None)
    # second valid recall of list 1 is position 1 (the repeat of 3 is skipped)
    assert nth["actual"].sel(output_position=2).values.tolist() == [1, 0, 0]
    assert nth["possible"].sel(output_position=2).values.tolist() == [1, 1, 0]


def test_hand_worked_lag_rank_and_compound():
    # psifr's docstring: 4, 2, 3, 1 -> ranks [0.5, 0.5, nan]
    events = _events([[4, 2, 3, 1]], 4)
    rank = recall_stats.lag_rank(events, by=None)
    assert rank["rank"].item() == 0.5 and rank["n_transitions"].item() == 2
    # psifr's docstring: 3, 1, 2 -> one pair (previous -2, current +1)
    compound = lag_crp_compound(_events([[3, 1, 2]], 3), by=None)
    assert compound["actual"].sel(previous_lag=-2, lag=1).item() == 1
    assert compound["actual"].values.sum() == 1
    assert np.array_equal(compound["actual"].values, compound["possible"].values)


#: random recall matrices with intrusions, repeats and padding
RECALL_MATRICES = recall_matrices(list_length=(2, 8), n_trials=(1, 4), n_outputs=(1, 10))


@settings(max_examples=20, deadline=None)
@given(RECALL_MATRICES)
def test_compound_sums_to_simple_crp_on_second_transitions(data):
    recalls, length = data
    events = from_recall_matrix(recalls, length)
    compound = lag_crp_compound(events, by=None)
    simple = lag_crp(events, by=None)
    # every compound count is a simple-CRP count of the same transition
    assert (compound["actual"].sum("previous_lag").values <= simple["actual"].values).all()
    assert (compound["possible"].sum("previous_lag").values <= simple["possible"].values).all()
    assert (compound["actual"].values <= compound["possible"].values).all()
    pnr = recall_stats.pnr(events, by=None)
    # each valid recall is counted once: output totals = number of distinct correct recalls
    distinct = sum(len({v for v in row if v > 0}) for row in recalls.tolist())
    assert pnr["actual"].values.sum() == distinct
    rank = recall_stats.lag_rank(events, by=None)
    assert np.isnan(rank["rank"].item()) or 0.0 <= rank["rank"].item() <= 1.0


def test_a_psifr_table_is_accepted_directly():
    from cmr.events import to_table

    events = _events([[4, 2, 3, 1], [1, 2, 0, 0]], 4)
    table = to_table(events)
    assert recall_stats.spc(table, by="trial")["actual"].values.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    direct, via = lag_crp(table), lag_crp(events)
    assert np.array_equal(direct["actual"].values, via["actual"].values)


#: psifr long tables with repeats, extra-list and prior-list intrusions, uneven recalls
RANDOM_TABLES = recall_tables(subjects=2, lists=(1, 3), list_length=(2, 7), ragged=False, subject_labels="int")


@settings(max_examples=10, deadline=None)
@given(RANDOM_TABLES)
def test_random_tables_equal_psifr_on_every_statistic(table):
    import warnings

    from tests.conftest import require

    fr = require("psifr.fr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # psifr's nanmean of subjects without transitions warns
        merged = fr.merge_free_recall(table)
        ref_crp = fr.lag_crp(merged).set_index(["subject", "lag"]).to_xarray()
        ref_spc = fr.spc(merged).set_index(["subject", "input"]).to_xarray()
        ref_pnr = fr.pnr(merged).set_index(["subject", "output", "input"]).to_xarray()
        ref_cmp = fr.lag_crp_compound(merged).set_index(["subject", "previous", "current"]).to_xarray()
        ref_rank = fr.lag_rank(merged).set_index("subject").to_xarray()
    crp = lag_crp(table)
    assert np.array_equal(crp["actual"].values, ref_crp["actual"].values)
    assert np.array_equal(crp["possible"].values, ref_crp["possible"].values)
    np.testing.assert_allclose(recall_stats.spc(table)["prob"].values, ref_spc["recall"].values, atol=1e-12, rtol=0)
    nth = recall_stats.pnr(table)
    assert np.array_equal(nth["actual"].values, ref_pnr["actual"].values)
    assert np.array_equal(nth["possible"].values, ref_pnr["possible"].values)
    compound = lag_crp_compound(table)
    assert np.array_equal(compound["actual"].values, ref_cmp["actual"].values)
    assert np.array_equal(compound["possible"].values, ref_cmp["possible"].values)
    np.testing.assert_allclose(recall_stats.lag_rank(table)["rank"].values, ref_rank["rank"].values, atol=1e-12, rtol=0)
