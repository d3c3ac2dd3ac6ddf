"""Lag-CRP: psifr-exact on the bundled data, hand-worked counts, and properties."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings

from cmr.errors import ProfileError, RecallDataError
from cmr.events import from_recall_matrix
from cmr.crp import lag_counts, lag_crp
from cmr.testing import recall_matrices
from tests.conftest import require


@pytest.fixture(scope="module", params=["Morton2013", "peers_notask"])
def bundled(request):
    """(events dataset, psifr merged table) of one bundled psifr data set."""
    fr = require("psifr.fr")
    from icl_cmr.adapters.recall_data import load_recall_data

    events = load_recall_data(f"psifr:{request.param}")
    merged = fr.merge_free_recall(fr.sample_data(request.param))
    return events, merged


def test_lag_crp_equals_psifr_for_every_subject_and_lag(bundled):
    fr = require("psifr.fr")
    events, merged = bundled
    ours = lag_crp(events, by="subject")
    ref = fr.lag_crp(merged).set_index(["subject", "lag"]).to_xarray()
    assert np.array_equal(ref["lag"].values.astype(np.int64), ours["lag"].values)
    assert np.array_equal(ref["subject"].values, ours["subject"].values)
    assert np.array_equal(ref["actual"].values, ours["actual"].values)
    assert np.array_equal(ref["possible"].values, ours["possible"].values)
    np.testing.assert_allclose(ours["profile"].values, ref["prob"].values, rtol=0, atol=1e-12)
    assert ours["actual"].dtype == np.int64 and ours["possible"].dtype == np.int64


def test_pooled_lag_crp_is_the_sum_over_subjects(bundled):
    events, _ = bundled
    per_subject = lag_crp(events, by="subject", lags=5)
    pooled = lag_crp(events, by=None, lags=5)
    assert pooled["profile"].dims == ("lag",)
    assert np.array_equal(pooled["actual"].values, per_subject["actual"].sum("subject").values)
    assert np.array_equal(pooled["possible"].values, per_subject["possible"].sum("subject").values)
    # sem across subjects of the per-subject profiles
    expected = per_subject["profile"].std("subject", ddof=1) / np.sqrt(per_subject.sizes["subject"])
    np.testing.assert_allclose(pooled["sem"].sel(lag=[-1, 1]).values, expected.sel(lag=[-1, 1]).values, rtol=1e-12)


def test_by_trial_sums_to_by_subject(bundled):
    events, _ = bundled
    per_trial = lag_crp(events, by="trial", lags=3)
    per_subject = lag_crp(events, by="subject", lags=3)
    summed = per_trial["actual"].groupby("subject").sum()
    assert np.array_equal(summed.values, per_subject["actual"].values)


def _single(recalls, length):
    ds = from_recall_matrix(np.array([recalls]), length)
    return lag_crp(ds, by=None)


def test_hand_worked_psifr_docstring_example():
    # psifr stats.count_lags docstring: list 1..4 recalled 4, 2, 3, 1
    crp = _single([4, 2, 3, 1], 4)
    assert crp["lag"].values.tolist() == [-3, -2, -1, 0, 1, 2, 3]
    assert crp["actual"].values.tolist() == [0, 2, 0, 0, 1, 0, 0]
    assert crp["possible"].values.tolist() == [1, 2, 2, 0, 1, 0, 0]


def test_hand_worked_intrusions_and_repeats():
    # recalls 6, 2, 3, 6 (repeat), 1, -1 (intrusion), 4, 5 of a 6-item list
    # valid transitions: 6->2 (lag -4), 2->3 (+1), 1 -> intrusion skipped, 4->5 (+1)
    # 3->6: to a repeat, skipped; 6->1: from a repeat, skipped; intrusion->4 skipped
    crp = _single([6, 2, 3, 6, 1, -1, 4, 5], 6)
    actual = dict(zip(crp["lag"].values.tolist(), crp["actual"].values.tolist()))
    possible = dict(zip(crp["lag"].values.tolist(), crp["possible"].values.tolist()))
    assert {k: v for k, v in actual.items() if v} == {-4: 1, 1: 2}
    # possible: from 6 with {1..5} left: -5..-1; from 2 with {1,3,4,5}: -1,+1,+2,+3;
    # from 4 with {5} left (1, 2, 3, 6 recalled): +1
    expected = {-5: 1, -4: 1, -3: 1, -2: 1, -1: 2, 1: 2, 2: 1, 3: 1}
    assert {k: v for k, v in possible.items() if v} == expected


def test_first_recall_after_intrusion_and_no_transitions():
    crp = _single([-1, 3, 0, 0], 3)  # one correct recall: no transition at all
    assert crp["actual"].values.sum() == 0 and crp["possible"].values.sum() == 0
    assert np.isnan(crp["profile"].values).all()


def test_lag_window_cuts_and_pads():
    ds = from_recall_matrix(np.array([[4, 2, 3, 1]]), 4)
    wide = lag_crp(ds, by=None, lags=range(-5, 7))
    assert wide["lag"].values.tolist() == list(range(-5, 7))
    full = lag_crp(ds, by=None)
    assert np.array_equal(wide["actual"].sel(lag=full["lag"]).values, full["actual"].values)
    assert wide["possible"].sel(lag=[-5, -4, 4, 5, 6]).values.sum() == 0
    narrow = lag_crp(ds, by=None, lags=1)
    assert narrow["lag"].values.tolist() == [-1, 0, 1]
    gaps = lag_crp(ds, by=None, lags=[-2, -1, 1, 2])
    assert np.array_equal(gaps["actual"].values, full["actual"].sel(lag=[-2, -1, 1, 2]).values)
    with pytest.raises(ProfileError, match="strictly increasing"):
        lag_crp(ds, lags=(2, -2))
    with pytest.raises(RecallDataError, match="by must be"):
        lag_crp(ds, by="session")


def test_lag_counts_per_trial_and_grouped():
    recalls = np.array([[4, 2, 3, 1], [1, 2, 0, 0]])
    lags, actual, possible = lag_counts(recalls, 4)
    assert actual.shape == (2, 7) and lags.tolist() == list(range(-3, 4))
    assert actual[1].tolist() == [0, 0, 0, 0, 1, 0, 0]
    assert possible[1].tolist() == [0, 0, 0, 0, 1, 1, 1]
    _, a_g, p_g = lag_counts(recalls, 4, group=[0, 0])
    assert np.array_equal(a_g[0], actual.sum(0)) and np.array_equal(p_g[0], possible.sum(0))


# --- properties -------------------------------------------------------------------------


#: random recall matrices with intrusions, repeats and padding
RECALL_MATRICES = recall_matrices(list_length=(1, 9), n_trials=(1, 5), n_outputs=(1, 12))


def _valid_transitions(row):
    """Brute-force count of psifr-valid transitions of one recall sequence."""
    seen, count = set(), 0
    for prev, curr in zip(row[:-1], row[1:]):
        if prev <= 0 or prev in seen:
            continue
        seen.add(prev)
        if curr > 0 and curr not in seen:
            count += 1
    return count


@settings(max_examples=40, deadline=None)
@given(RECALL_MATRICES)
def test_counts_conserve_transitions(data):
    recalls, length = data
    _, actual, possible = lag_counts(recalls, length)
    assert (actual <= possible).all()
    assert (actual >= 0).all()
    assert actual.sum(axis=1).tolist() == [_valid_transitions(r.tolist()) for r in recalls]
    # lag 0 is never possible: the "from" item is already recalled
    assert (possible[:, length - 1] == 0).all()


@settings(max_examples=40, deadline=None)
@given(RECALL_MATRICES)
def test_reversing_lists_mirrors_lags(data):
    recalls, length = data
    mirrored = np.where(recalls > 0, length + 1 - recalls, recalls)
    lags, actual, possible = lag_counts(recalls, length)
    lags_m, actual_m, possible_m = lag_counts(mirrored, length)
    assert np.array_equal(lags, -lags_m[::-1])
    assert np.array_equal(actual, actual_m[:, ::-1])
    assert np.array_equal(possible, possible_m[:, ::-1])


@settings(max_examples=25, deadline=None)
@given(RECALL_MATRICES)
def test_lag_profile_netcdf_round_trip_is_identical(tmp_path_factory, data):
    from cmr.io import load_dataset, save_dataset

    recalls, length = data
    crp = lag_crp(from_recall_matrix(recalls, length), by="trial")
    path = tmp_path_factory.mktemp("crp") / "crp.nc"
    save_dataset(crp, path)
    xr.testing.assert_identical(load_dataset(path, "lag_profile"), crp)


def test_cli_lag_crp_writes_a_loadable_profile(tmp_path, capsys):
    from icl_cmr.analyses.cli import main
    from cmr.io import load_dataset

    source = tmp_path / "tiny.csv"
    from cmr.events import to_table

    to_table(from_recall_matrix(np.array([[4, 2, 3, 1], [1, 2, 0, 0]]), 4, subject=[1, 2])).to_csv(source, index=False)
    out = tmp_path / "crp.nc"
    assert main(["lag-crp", str(source), "-o", str(out), "--lags", "2"]) == 0
    crp = load_dataset(out, "lag_profile")
    assert crp["profile"].dims == ("subject", "lag") and crp["lag"].values.tolist() == [-2, -1, 0, 1, 2]
    assert crp["actual"].sel(subject=1).values.tolist() == [2, 0, 0, 1, 0]
    assert main(["lag-crp", str(source), "-o", str(out), "--pooled"]) == 0
    assert load_dataset(out)["profile"].dims == ("lag",)
    assert main(["lag-crp", "psifr:nope", "-o", str(tmp_path / "x.nc")]) == 1
    assert "unknown bundled recall data set 'psifr:nope'" in capsys.readouterr().err
    assert not (tmp_path / "x.nc").exists()
