"""Scale-out: chunked (dask-backed) profiles fit chunk by chunk with results identical to numpy."""
from __future__ import annotations

import numpy as np
import xarray as xr

from cmr.profile_fit import fit_profiles
from cmr.schema import provenance_attrs
from tests.conftest import require

LAGS = np.arange(-5, 6)


def grid():
    centres = np.array([-1.0, 0.0, 1.0, 2.0])
    widths = np.array([0.5, 1.0, 2.0])
    values = np.exp(-((LAGS[None, None, :] - centres[:, None, None]) ** 2) / (2 * widths[None, :, None] ** 2))
    ds = xr.Dataset({"profile": (("centre", "width", "lag"), values)},
                    coords={"centre": centres, "width": widths, "lag": LAGS.astype(np.int64)})
    ds.attrs.update(provenance_attrs("lag_profile", "tests"))
    ds.attrs.update(profile_kind="test_bumps", unit_kind="cmr_parameters")
    return ds


def heads(n_layer=4, n_head=6, seed=0):
    rng = np.random.default_rng(seed)
    centre = rng.uniform(-1, 2, size=(n_layer, n_head, 1))
    values = 3 * np.exp(-((LAGS - centre) ** 2) / 2) + 0.2 * rng.normal(size=(n_layer, n_head, LAGS.size))
    values[0, 0] = np.nan  # one padding unit
    ds = xr.Dataset(
        {"profile": (("layer", "head", "lag"), values), "sem": (("layer", "head", "lag"), np.full(values.shape, 0.1))},
        coords={"layer": np.arange(n_layer), "head": np.arange(n_head), "lag": LAGS.astype(np.int64)},
    )
    ds.attrs.update(provenance_attrs("lag_profile", "tests"))
    ds.attrs["profile_kind"] = "attention_score"
    return ds


def assert_same(lazy, eager):
    computed = lazy.compute()
    assert set(computed.data_vars) == set(eager.data_vars)
    for name in eager.data_vars:
        np.testing.assert_array_equal(computed[name].values, eager[name].values, err_msg=name)
    for name in eager.coords:
        np.testing.assert_array_equal(computed[name].values, eager[name].values)


def test_chunked_fit_is_lazy_and_identical_to_in_process():
    require("dask")
    data = heads()
    options = dict(objective="lsq", n_bootstrap=5, rng=1)
    eager = fit_profiles(data, grid(), **options)
    lazy = fit_profiles(data.chunk({"layer": 1, "head": 4}), grid(), **options)
    assert lazy["distance"].chunks is not None
    assert_same(lazy, eager)


def test_fit_on_a_local_distributed_cluster_matches_in_process():
    distributed = require("distributed")
    data = heads(seed=5)
    eager = fit_profiles(data, grid(), objective="paper")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        lazy = fit_profiles(data.chunk({"layer": 2}), grid(), objective="paper")
        computed = client.compute(lazy).result()
    assert_same(computed, eager)
