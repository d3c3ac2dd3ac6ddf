"""netCDF save/load: exact round trips, schema checks and atomic writes."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from cmr import errors
from cmr.events import from_recall_matrix
from cmr.io import atomic_write, load_dataset, save_dataset
from cmr.crp import lag_crp
from cmr.crp import lag_crp_compound
from cmr.recall_stats import lag_rank, pfr, spc


@pytest.fixture(scope="module")
def events():
    recalls = np.array([[3, 1, -1, 2, 0], [2, 3, 3, 0, 0], [-1, 0, 0, 0, 0], [4, 3, 2, 1, -1]])
    return from_recall_matrix(
        recalls, [3, 3, 4, 4], subject=np.array(["s1", "s1", "s2", "s2"]),
        study_items=[["a", "b", "c", ""], ["d", "e", "f", ""], ["g", "h", "i", "j"], ["k", "l", "m", "nö"]],
    )


def _round_trip(ds, tmp_path, kind):
    path = save_dataset(ds, tmp_path / f"{kind}.nc")
    back = load_dataset(path, kind)
    xr.testing.assert_identical(back, ds)
    return back


def test_events_round_trip_identical(events, tmp_path):
    back = _round_trip(events, tmp_path, "events")
    assert back["recalls"].dtype == np.int64
    assert back["study_item"].values[3, 3] == "nö"


@pytest.mark.parametrize("by", ["subject", "trial", None])
def test_lag_profile_round_trip_identical(events, tmp_path, by):
    crp = lag_crp(events, by=by, lags=range(-2, 4))
    back = _round_trip(crp, tmp_path, "lag_profile")
    assert back["actual"].dtype == np.int64 and back["possible"].dtype == np.int64
    assert np.isnan(back["profile"].values).any()  # NaN where nothing was possible survives


@pytest.mark.parametrize("stat", [spc, pfr, lag_rank])
def test_recall_stat_round_trip_identical(events, tmp_path, stat):
    _round_trip(stat(events), tmp_path, "recall_stat")


def test_compound_profile_round_trip_identical(events, tmp_path):
    _round_trip(lag_crp_compound(events, by=None), tmp_path, "lag_profile")


def test_failed_write_leaves_no_file_and_keeps_the_old_one(events, tmp_path, monkeypatch):
    path = tmp_path / "out.nc"

    def broken_write(self, target, *args, **kwargs):
        with open(target, "wb") as handle:
            handle.write(b"CDF\x01 half a file")  # partial bytes, then the "crash"
        raise RuntimeError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken_write)
    with pytest.raises(errors.OutputError, match="disk full"):
        save_dataset(events, path)
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary file

    monkeypatch.undo()
    save_dataset(events, path)
    before = path.read_bytes()
    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken_write)
    with pytest.raises(errors.OutputError):
        save_dataset(lag_crp(events), path)
    assert path.read_bytes() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.nc"]


def test_atomic_write_interrupted(tmp_path):
    target = tmp_path / "x.bin"
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as tmp:
            tmp.write_bytes(b"partial")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_invalid_dataset_is_not_written(events, tmp_path):
    bad = events.assign(list_length=("trial", np.array([1, 1, 1, 1])))
    with pytest.raises(errors.SchemaError, match="recalls must be serial positions"):
        save_dataset(bad, tmp_path / "bad.nc")
    assert list(tmp_path.iterdir()) == []


def test_attrs_must_be_netcdf_safe(events, tmp_path):
    crp = lag_crp(events)
    crp.attrs["flag"] = True
    with pytest.raises(errors.SchemaError, match=r"attribute 'flag' must be str, int, float.*got bool"):
        save_dataset(crp, tmp_path / "crp.nc")


def test_atomic_directory_leaves_nothing_on_failure_and_replaces_on_success(tmp_path):
    from cmr.io import atomic_directory

    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "step_000010") as tmp:
            (tmp / "part").write_text("half")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    for text in ("first", "second"):
        with atomic_directory(tmp_path / "step_000010") as tmp:
            (tmp / "part").write_text(text)
    assert (tmp_path / "step_000010" / "part").read_text() == "second"
    with atomic_directory(tmp_path / "step_000010", replace=False) as tmp:
        (tmp / "part").write_text("third")
    assert (tmp_path / "step_000010" / "part").read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["step_000010"]
