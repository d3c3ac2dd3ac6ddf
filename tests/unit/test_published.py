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
from tests.conftest import reference_path


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
    return read_published_profiles(reference_path("icl-cmr", "head_profiles.csv.gz"), model="gpt2-small")


def test_gpt2_profiles_match_the_table(gpt2):
    assert dict(gpt2["profile"].sizes) == {"model": 1, "checkpoint": 1, "layer": 12, "head": 12, "lag": 16}
    assert gpt2["lag"].values.tolist() == list(range(-8, 8))
    assert gpt2["lag"].dtype == np.int64 and gpt2["layer"].dtype == np.int64
    table = pd.read_csv(reference_path("icl-cmr", "head_profiles.csv.gz"), nrows=40)
    row = table.iloc[37]
    unit = gpt2.sel(model=row["model"], checkpoint=row["checkpoint"], layer=row["layer"], head=row["head"], lag=row["lag"])
    assert float(unit["profile"]) == row["score_mean"] and float(unit["sem"]) == row["score_sem"]
    assert gpt2.attrs["profile_kind"] == "attention_score" and gpt2.attrs["padded"] == 0
    assert not gpt2["profile"].isnull().any()
    # metrics merged from the sibling head_metrics.csv.gz
    metrics = read_published_metrics(reference_path("icl-cmr", "head_metrics.csv.gz"), model="gpt2-small")
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
