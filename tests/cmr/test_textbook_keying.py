"""Teacher-forced textbook CMR keyed by the context before each item (prefix matching), support profiles."""
from __future__ import annotations

import numpy as np
import pytest

from cmr.errors import ParameterError, ProfileError
from cmr.grids import textbook_teacher_forced_grid

AXES = {"B_enc": np.linspace(0.05, 0.95, 10), "B_rec": np.linspace(0.05, 0.95, 10)}
LAGS = range(-5, 6)


def peaks(grid):
    return grid["lag"].values[grid["profile"].values.reshape(-1, grid.sizes["lag"]).argmax(axis=1)]


@pytest.mark.parametrize("kind", ["prob", "support", "logsupport"])
def test_prefix_keying_moves_the_peak_to_lag_plus_one(kind):
    # without the pre-experimental self-association (Dcf), which pulls every profile to lag 0
    after = textbook_teacher_forced_grid(AXES, fixed={"Dcf": 0.0}, kind=kind, lags=LAGS, keying="after")
    before = textbook_teacher_forced_grid(AXES, fixed={"Dcf": 0.0}, kind=kind, lags=LAGS, keying="before")
    assert np.sum(peaks(after) == 1) == 0  # cymr's keying can never peak at +1
    assert np.mean(peaks(before) == 1) > 0.6
    assert before.attrs["keying"] == "before" and after.attrs["keying"] == "after"


def test_default_keying_is_cymr_and_unchanged():
    default = textbook_teacher_forced_grid(AXES, kind="prob", lags=LAGS)
    after = textbook_teacher_forced_grid(AXES, kind="prob", lags=LAGS, keying="after")
    np.testing.assert_array_equal(default["profile"].values, after["profile"].values)


def test_support_profile_is_floored_and_positive():
    support = textbook_teacher_forced_grid(AXES, kind="support", lags=LAGS)
    assert support.attrs["profile_kind"] == "cmr_tf_support"
    assert (support["profile"].values >= 1e-6).all()  # cymr's support floor, never zero, never logged


def test_bad_keying_and_kind():
    with pytest.raises(ParameterError, match="keying"):
        textbook_teacher_forced_grid(AXES, keying="prefix")
    with pytest.raises(ProfileError, match="support"):
        textbook_teacher_forced_grid(AXES, kind="attention")


def test_paper_log_support_records_where_the_floor_enters():
    from cmr.grids import paper_teacher_forced_grid

    # beta_rec = 1, gamma = 0: context is the last item only, so every lag <= 0 has exactly zero support
    logs = paper_teacher_forced_grid(beta_enc=[0.5], beta_rec=[1.0], gamma=[0.0], kind="logsupport", lags=range(-5, 6))
    zero = logs["zero_support"].values.ravel()
    np.testing.assert_array_equal(zero, [1.0] * 6 + [0.0] * 5)
    np.testing.assert_allclose(logs["profile"].values.ravel()[:6], np.log(1e-10))
    assert logs.attrs["n_points_floored"] == 1
    smooth = paper_teacher_forced_grid(beta_enc=[0.5], beta_rec=[0.5], gamma=[0.5], kind="logsupport", lags=range(-5, 6))
    # the first item never has support in this variant (nothing precedes it), so each lag <= 0
    # meets one zero among its ~95-100 steps; forward lags never do
    zero = smooth["zero_support"].values.ravel()
    assert (zero[6:] == 0).all() and (zero[:6] > 0).all() and (zero[:6] <= 1 / 95).all()
    assert "zero_support" not in paper_teacher_forced_grid(beta_enc=[0.5], beta_rec=[1.0], gamma=[0.0], lags=range(-5, 6))
