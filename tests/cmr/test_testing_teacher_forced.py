"""cmr.testing.teacher_forced_reference: the numpy oracle of the teacher-forced kernel and benchmark."""
import numpy as np
import pytest

from cmr.testing import teacher_forced_reference


def test_hand_worked_full_drift_puts_everything_on_the_next_item():
    # beta_enc = beta_rec = 1, gamma = 0: context is the last item, support only on the next one
    profile = teacher_forced_reference(1.0, 1.0, 0.0, list_length=10, max_lag=3)
    np.testing.assert_allclose(profile, [0, 0, 0, 0, 1, 0, 0], atol=1e-15)


def test_the_oracle_tells_other_parameters_apart():
    from cmr.grids import paper_teacher_forced_grid

    got = paper_teacher_forced_grid([0.65], [0.35], [0.4], list_length=30, lags=range(-6, 7))["profile"].values.ravel()
    np.testing.assert_allclose(got, teacher_forced_reference(0.65, 0.35, 0.4, list_length=30, max_lag=6),
                               rtol=1e-10, atol=1e-14)
    assert not np.allclose(got, teacher_forced_reference(0.65, 0.36, 0.4, list_length=30, max_lag=6),
                           rtol=1e-10, atol=1e-14)


def test_lags_no_step_reaches_are_nan():
    profile = teacher_forced_reference(0.5, 0.5, 0.5, list_length=3, max_lag=3)
    assert np.isnan(profile[[0, -1]]).all() and np.isfinite(profile[1:-1]).all()


def test_the_benchmark_name_is_a_deprecated_alias():
    from icl_cmr.analyses.bench import profiles

    with pytest.warns(DeprecationWarning, match="cmr.testing.teacher_forced_reference"):
        old = profiles.numpy_teacher_forced_point(0.6, 0.75, 0.3, n=20, max_lag=5)
    np.testing.assert_array_equal(old, teacher_forced_reference(0.6, 0.75, 0.3, list_length=20, max_lag=5))
