"""read_published_profiles: the study's head table into the lag-profile schema; malformed tables."""
from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from icl_cmr.adapters.published import read_published_metrics, read_published_profiles
from cmr.errors import DataSourceError, FileFormatError, ParameterError
from cmr.io import load_dataset, save_dataset
from tests.conftest import published_path


def small_table(models=(("m-a", 2, 3), ("m-b", 3, 2)), checkpoints=(-1,), lags=range(-2, 3)):
    rows = []
    for model, n_layer, n_head in models:
        for checkpoint in checkpoints:
            for layer in range(n_layer):
                for head in range(n_head):
                    for lag in lags:
                        value = 100 * layer + 10 * head + lag + 0.5 * checkpoint
                        rows.append((model, checkpoint, layer, head, lag, value, abs(value) / 100))
    return pd.DataFrame(rows, columns=["model", "checkpoint", "layer", "head", "lag", "score_mean", "score_sem"])


def write(table, path):
    table.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def gpt2():
    return read_published_profiles(published_path("head_profiles.csv.gz"), model="gpt2-small")


def test_gpt2_profiles_match_the_table(gpt2):
    assert dict(gpt2["profile"].sizes) == {"model": 1, "checkpoint": 1, "layer": 12, "head": 12, "lag": 16}
    assert gpt2["lag"].values.tolist() == list(range(-8, 8))
    assert gpt2["lag"].dtype == np.int64 and gpt2["layer"].dtype == np.int64
    table = pd.read_csv(published_path("head_profiles.csv.gz"), nrows=40)
    row = table.iloc[37]
    unit = gpt2.sel(model=row["model"], checkpoint=row["checkpoint"], layer=row["layer"], head=row["head"], lag=row["lag"])
    assert float(unit["profile"]) == row["score_mean"] and float(unit["sem"]) == row["score_sem"]
    assert gpt2.attrs["profile_kind"] == "attention_score" and gpt2.attrs["padded"] == 0
    assert not gpt2["profile"].isnull().any()
    # metrics merged from the sibling head_metrics.csv.gz
    metrics = read_published_metrics(published_path("head_metrics.csv.gz"), model="gpt2-small")
    xr.testing.assert_equal(gpt2["induction_score"], metrics["induction_score"].transpose(*gpt2["induction_score"].dims))
    assert float(gpt2["induction_score"].sel(layer=5, head=1).squeeze()) > 0.5  # a known induction head


def test_round_trip_is_exact(gpt2, tmp_path):
    path = save_dataset(gpt2, tmp_path / "gpt2.nc")
    xr.testing.assert_identical(load_dataset(path, "lag_profile"), gpt2)


def test_several_models_are_padded_with_nan(tmp_path):
    ds = read_published_profiles(write(small_table(), tmp_path / "t.csv"), metrics=False)
    assert dict(ds.sizes) == {"model": 2, "checkpoint": 1, "layer": 3, "head": 3, "lag": 5}
    assert ds.attrs["padded"] == 1
    assert ds["profile"].sel(model="m-a", layer=2).isnull().all()
    assert float(ds["profile"].sel(model="m-b", checkpoint=-1, layer=2, head=1, lag=-2)) == 207.5  # 200 + 10 - 2 - 0.5
    one = read_published_profiles(tmp_path / "t.csv", model="m-a", metrics=False)
    assert one.attrs["padded"] == 0 and dict(one.sizes)["layer"] == 2


def test_checkpoint_selection(tmp_path):
    path = write(small_table(models=(("p", 1, 2),), checkpoints=(0, 10, 142)), tmp_path / "p.csv")
    final = read_published_profiles(path, checkpoint="final", metrics=False)
    assert final["checkpoint"].values.tolist() == [142]
    assert read_published_profiles(path, checkpoint="10", metrics=False)["checkpoint"].values.tolist() == [10]
    two = read_published_profiles(path, checkpoint=[0, 10], metrics=False)
    assert two["checkpoint"].values.tolist() == [0, 10]
    with pytest.raises(DataSourceError, match="checkpoint"):
        read_published_profiles(path, checkpoint=5, metrics=False)
    with pytest.raises(ParameterError, match="final"):
        read_published_profiles(path, checkpoint="last", metrics=False)


def corrupt_gzip(path):
    path.write_bytes(gzip.compress(b"\x00\x01\x02") [:-4])
    return path


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda p: write(small_table().drop(columns="score_sem"), p), FileFormatError, "score_sem"),
        (lambda p: write(pd.concat([small_table(), small_table().iloc[:1]]), p), FileFormatError, "duplicate"),
        (lambda p: write(small_table().astype({"lag": str}).replace({"lag": {"0": "zero"}}), p), FileFormatError, "lag"),
        (lambda p: write(small_table().iloc[1:], p), FileFormatError, "complete"),
        (lambda p: write(small_table().assign(layer=0.5), p), FileFormatError, "integers"),
        (lambda p: write(small_table().iloc[:0], p), FileFormatError, "no rows"),
        (lambda p: corrupt_gzip(p.with_suffix(".csv.gz")), FileFormatError, "readable"),
    ],
)
def test_malformed_tables_raise_typed_errors(tmp_path, make, error, match):
    path = make(tmp_path / "bad.csv")
    with pytest.raises(error, match=match):
        read_published_profiles(path, metrics=False)


def test_missing_file_and_unknown_model(tmp_path):
    with pytest.raises(DataSourceError, match="existing"):
        read_published_profiles(tmp_path / "nope.csv.gz")
    path = write(small_table(), tmp_path / "t.csv")
    with pytest.raises(DataSourceError, match="m-a, m-b"):
        read_published_profiles(path, model="gpt2-small", metrics=False)


# --- the study's files as package data -------------------------------------------------------------


def _copy_of_published(folder):
    import shutil

    from icl_cmr.adapters.published import PUBLISHED_FILES, embedded_dir

    folder.mkdir(parents=True)
    for name in (*PUBLISHED_FILES, "SHA256SUMS"):
        shutil.copyfile(embedded_dir() / name, folder / name)
    return folder


def test_the_installed_copy_equals_the_published_files_with_licence_and_citation():
    import hashlib

    from icl_cmr.adapters.published import PUBLISHED_FILES, embedded_dir, published_file

    folder = embedded_dir()
    sums = dict(line.split()[::-1] for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert sorted(sums) == sorted(PUBLISHED_FILES)
    for name in PUBLISHED_FILES:
        assert published_file(name) == folder / name
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == sums[name]
    assert (folder / "LICENSE").read_text().startswith("MIT License")
    readme = (folder / "README.md").read_text()
    assert "Ji-An" in readme and "NeurIPS 2024" in readme and "@inproceedings" in readme


def test_the_published_readers_default_to_the_installed_files_and_record_their_checksums():
    import json

    from icl_cmr.adapters.published import file_sha256, published_file
    from icl_cmr.adapters.published_grid import load_published_grid

    metrics = read_published_metrics(model="gpt2-small")
    assert dict(metrics["induction_score"].sizes) == {"model": 1, "checkpoint": 1, "layer": 12, "head": 12}
    grid = load_published_grid()
    record = json.loads(grid.attrs["provenance"])
    assert record["source_sha256"] == file_sha256(published_file("cmr_crp_grid.npz"))
    heads = read_published_profiles(model="gpt2-small", checkpoint="final")
    record = json.loads(heads.attrs["provenance"])
    assert record["source_sha256"] == file_sha256(published_file("head_profiles.csv.gz"))
    assert record["metrics_source_sha256"] == file_sha256(published_file("head_metrics.csv.gz"))


def test_a_damaged_installed_copy_is_an_error(tmp_path, monkeypatch):
    import icl_cmr.adapters.published as published

    folder = _copy_of_published(tmp_path / "installed")
    data = bytearray((folder / "cmr_crp_grid.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    (folder / "cmr_crp_grid.npz").write_bytes(bytes(data))
    monkeypatch.setattr(published, "embedded_dir", lambda: folder)
    assert published.published_file("head_metrics.csv.gz") == folder / "head_metrics.csv.gz"
    with pytest.raises(DataSourceError, match="installed copy of the study's cmr_crp_grid.npz is damaged"):
        published.published_file("cmr_crp_grid.npz")


def test_icl_cmr_reference_points_elsewhere_and_warns_on_a_different_file(tmp_path, monkeypatch):
    from icl_cmr.adapters.published import ReferenceDataWarning, published_file, reference_dir

    nested = _copy_of_published(tmp_path / "reference" / "icl-cmr")  # the study's export layout
    monkeypatch.setenv("ICL_CMR_REFERENCE", str(tmp_path / "reference"))
    assert reference_dir() == nested
    assert published_file("head_metrics.csv.gz") == nested / "head_metrics.csv.gz"  # same bytes: no warning
    table = pd.read_csv(nested / "head_metrics.csv.gz")
    table.loc[0, "induction_score"] = 0.123
    table.to_csv(nested / "head_metrics.csv.gz", index=False)
    with pytest.warns(ReferenceDataWarning, match="not the study's published file"):
        metrics = read_published_metrics(published_file("head_metrics.csv.gz"))
    first = table.iloc[0]
    value = metrics["induction_score"].sel(model=first["model"], checkpoint=first["checkpoint"],
                                           layer=first["layer"], head=first["head"])
    assert float(value) == 0.123
    monkeypatch.setenv("ICL_CMR_REFERENCE", str(nested))  # the folder of the files itself
    assert reference_dir() == nested
    monkeypatch.setenv("ICL_CMR_REFERENCE", str(tmp_path / "missing"))
    with pytest.raises(DataSourceError, match=r"\$ICL_CMR_REFERENCE: expected a folder"):
        published_file("cmr_crp_grid.npz")
    with pytest.raises(ParameterError, match="published file must be one of"):
        published_file("other.csv", reference=nested)
    with pytest.raises(DataSourceError, match="is not in"):
        published_file("cmr_crp_grid.npz", reference=tmp_path)
