"""CMR profile grids: the published grid loader, Monte Carlo and teacher-forced generators."""
from __future__ import annotations

import numpy as np
import pytest

from cmr.errors import DataSourceError, FileFormatError
from tests.conftest import reference_path


def _published():
    from adapters.published_grid import load_published_grid

    return load_published_grid(reference_path("icl-cmr", "cmr_crp_grid.npz"))


def test_published_grid_loads_with_parameter_dims(tmp_path):
    from cmr.io import load_dataset, save_dataset

    grid = _published()
    assert grid["profile"].dims == ("beta_enc", "beta_rec", "gamma", "lag")
    assert grid.sizes == {"beta_enc": 20, "beta_rec": 21, "gamma": 11, "lag": 17}
    assert grid["lag"].dtype == np.int64 and list(grid["lag"].values) == list(range(-8, 9))
    assert grid.attrs["unit_kind"] == "cmr_parameters"
    assert grid.attrs["profile_kind"] == "cmr_mc_crp"
    np.testing.assert_allclose(grid["profile"].sum("lag"), 1.0, atol=1e-12)
    assert float(grid["beta_enc"][11]) == 0.6 and float(grid["gamma"][3]) == 0.3
    back = load_dataset(save_dataset(grid, tmp_path / "grid.nc"), "lag_profile")
    assert back.identical(grid)


def test_published_grid_bad_paths(tmp_path):
    from adapters.published_grid import load_published_grid

    with pytest.raises(DataSourceError, match="existing .npz"):
        load_published_grid(tmp_path / "absent.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(FileFormatError, match="not a readable"):
        load_published_grid(bad)
    partial = tmp_path / "partial.npz"
    np.savez(partial, crp=np.zeros((2, 2, 2, 3)))
    with pytest.raises(FileFormatError, match="lacks"):
        load_published_grid(partial)
