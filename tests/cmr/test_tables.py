"""Tidy tables of results: per-unit and long layouts, column rules, exact CSV/Parquet round trips."""
from __future__ import annotations

import csv
import io
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr.errors import FileFormatError, OptionalDependencyError, SchemaError
from cmr.schema import provenance_attrs
from cmr.tables import unit_dims
from tests.conftest import REPO_ROOT, require

SUBJECTS = ["01", "02", "10"]  # text labels that a number parser would mangle


@pytest.fixture(scope="module")
def events():
    table = cmr.simulate_free_recall(cmr.default_parameters(), 8, 6, subjects=SUBJECTS, rng=3)
    return cmr.from_table(table)


@pytest.fixture(scope="module")
def grid():
    return cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 0.75], [0.0, 0.3], list_length=20)


@pytest.fixture(scope="module")
def crp(events):
    return cmr.lag_crp(events)


@pytest.fixture(scope="module")
def fits(crp, grid):
    return {objective: cmr.fit_profiles(crp, grid, objective=objective, lags=cmr.RECALL_LAGS)
            for objective in ("lsq", "paper")}


@pytest.fixture(scope="module")
def recall_fit(events):
    return cmr.fit_recall(events, cmr.FitSpec(["B_rec"]), rng=0, progress=False, polish=False,
                          de_options={"maxiter": 2, "popsize": 4})


def heads_dataset(n_layers=2, n_heads=3, lags=range(-3, 4), n_positions=9):
    """A lag profile of attention heads as `icl-cmr heads` writes it (dims and variables), no model needed."""
    rng = np.random.default_rng(0)
    unit = (1, 1, n_layers, n_heads)
    lags = np.asarray(list(lags))
    dims = ("model", "checkpoint", "layer", "head")
    return xr.Dataset(
        {
            "profile": (dims + ("lag",), rng.normal(size=unit + (lags.size,))),
            "sem": (dims + ("lag",), rng.uniform(0.1, 0.2, size=unit + (lags.size,))),
            "n_samples": (dims + ("lag",), np.full(unit + (lags.size,), 40, dtype=np.int64)),
            "induction_score": (dims, rng.uniform(size=unit)),
            "copying_score": (dims, rng.uniform(-1, 1, size=unit)),
            "position_loss": (("model", "checkpoint", "position"), rng.uniform(size=(1, 1, n_positions))),
            "loss_first_copy": (("model", "checkpoint"), [[5.5]]),
        },
        coords={"model": ["tiny"], "checkpoint": [-1], "layer": np.arange(n_layers), "head": np.arange(n_heads),
                "lag": lags, "position": np.arange(1, n_positions + 1)},
        attrs={**provenance_attrs("lag_profile", "test"), "profile_kind": "attention_score", "unit_kind": "heads"},
    )


def read_csv_back(path, expected: pd.DataFrame) -> pd.DataFrame:
    """A CSV as a user reads it: text columns as text, floats parsed exactly."""
    text = {name: str for name in expected if not pd.api.types.is_numeric_dtype(expected[name])}
    return pd.read_csv(path, dtype=text)


# --- per-unit tables ---------------------------------------------------------------------


def test_a_recall_fit_gives_one_row_per_subject_with_each_parameter_as_a_column(recall_fit):
    table = cmr.unit_table(recall_fit)
    assert list(table.columns) == ["subject", *cmr.PARAMETER_NAMES, "logl", "n", "aic", "bic", "nfev", "nit",
                                   "success", "n_nan", "n_invalid", "seconds", "message", "best_restart",
                                   *(f"at_bound_{name}" for name in cmr.PARAMETER_NAMES), "few_events",
                                   "n_restarts", "logl_gap", "logl_spread", "converged"]
    assert table["subject"].tolist() == SUBJECTS
    assert isinstance(table.index, pd.RangeIndex)
    for name in cmr.PARAMETER_NAMES:
        np.testing.assert_array_equal(table[name], recall_fit["value"].sel(parameter=name).values)
    for name in ("n", "nfev", "nit", "success", "n_nan", "n_invalid", "n_restarts"):
        assert table[name].dtype == np.int64
    np.testing.assert_array_equal(table["logl"], recall_fit["logl"].values)
    assert table["message"].map(type).eq(str).all()
    assert cmr.to_dataframe(recall_fit).equals(table)  # per unit is the default layout of fits


def test_a_profile_fit_names_its_parameters_and_baseline_columns(fits, crp):
    fit = fits["lsq"]
    table = cmr.unit_table(fit)
    assert table.columns[0] == "subject" and len(table) == crp.sizes["subject"]
    for name in ("distance", "gain", "offset", "grid_distance", "aic", "bic", "beta_enc", "beta_rec", "gamma",
                 "grid_beta_enc", "grid_beta_rec", "grid_gamma", "gaussian_a", "gaussian_b", "gaussian_mu",
                 "gaussian_sigma", "gaussian_distance", "gaussian_aic", "gaussian_bic", "inverse_temperature"):
        assert name in table.columns, name
    assert not {"profile", "fitted", "gaussian_fitted", "lag", "parameter"} & set(table.columns)
    np.testing.assert_array_equal(table["beta_rec"], fit["parameters"].sel(parameter="beta_rec").values)
    np.testing.assert_array_equal(table["grid_gamma"], fit["grid_parameters"].sel(parameter="gamma").values)
    np.testing.assert_array_equal(table["gaussian_mu"], fit["gaussian_parameters"].sel(gaussian_parameter="mu").values)
    # stable order: unit first, then the dataset's variables in their order
    order = [name for name in fit.data_vars if name in table.columns]
    assert [c for c in table.columns if c in order] == order
    flags = [c for c in table.columns if c.startswith("at_grid_edge_")]
    assert flags == ["at_grid_edge_beta_enc", "at_grid_edge_beta_rec", "at_grid_edge_gamma"]
    assert all(table[c].dtype == np.int64 for c in flags)  # 0/1 flags stay integers
    assert all(table[c].dtype == np.float64 for c in table.columns[1:] if c not in flags)


def test_bootstrap_intervals_get_one_column_per_bound(crp, grid):
    fit = cmr.fit_profiles(crp, grid, objective="paper", lags=cmr.RECALL_LAGS, n_bootstrap=3, rng=0)
    table = cmr.unit_table(fit)
    for name in ("distance_ci_lower", "distance_ci_upper", "gain_ci_lower", "beta_enc_ci_lower", "gamma_ci_upper"):
        assert name in table.columns, name
    np.testing.assert_array_equal(table["beta_rec_ci_upper"],
                                  fit["parameters_ci"].sel(parameter="beta_rec", bound="upper").values)


def test_two_fits_side_by_side_with_prefixes(crp, fits):
    table = cmr.unit_table(crp, lsq=fits["lsq"], paper=fits["paper"])
    assert table["subject"].tolist() == SUBJECTS
    assert table.columns[0] == "subject"
    assert "lsq_distance" in table and "paper_distance" in table and "paper_beta_enc" in table
    assert "distance" not in table and "lsq_subject" not in table
    np.testing.assert_array_equal(table["lsq_distance"], fits["lsq"]["distance"].values)
    np.testing.assert_array_equal(table["paper_gain"], fits["paper"]["gain"].values)


def test_heads_table_has_unit_columns_scores_and_fit_and_leaves_curves_out():
    heads = heads_dataset()
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5], [0.0], lags=range(-3, 4), list_length=20)
    fit = cmr.fit_profiles(heads, grid, objective="lsq", lags=range(-3, 4))
    table = cmr.unit_table(heads, fit)
    assert list(table.columns[:7]) == ["model", "checkpoint", "layer", "head", "induction_score", "copying_score",
                                       "loss_first_copy"]
    assert len(table) == 6
    assert table["model"].tolist() == ["tiny"] * 6 and table["layer"].tolist() == [0, 0, 0, 1, 1, 1]
    assert table["head"].tolist() == [0, 1, 2, 0, 1, 2]
    assert not any(c.startswith(("position", "profile", "sem", "n_samples")) for c in table.columns)
    np.testing.assert_array_equal(table["loss_first_copy"], 5.5)  # a per-model value, on every head's row
    np.testing.assert_array_equal(table["induction_score"], heads["induction_score"].values.ravel())
    np.testing.assert_array_equal(table["distance"], fit["distance"].values.ravel())
    for name in ("checkpoint", "layer", "head"):
        assert table[name].dtype == np.int64


def test_naming_rules_for_other_vectors(recall_fit, crp):
    recovery = recall_fit.assign(true_value=recall_fit["value"] * 2)
    table = cmr.unit_table(recovery)
    np.testing.assert_array_equal(table["true_B_rec"], 2 * table["B_rec"])
    tests = crp.assign_coords(comparison=["top_vs_none", "top_vs_random"]).assign(
        t_pvalue=(("subject", "comparison"), np.arange(6.0).reshape(3, 2)))
    long = cmr.to_dataframe(tests)
    assert list(long.columns[-2:]) == ["t_pvalue_top_vs_none", "t_pvalue_top_vs_random"]
    assert long.groupby("subject")["t_pvalue_top_vs_random"].first().tolist() == [1.0, 3.0, 5.0]


def test_scalar_coordinates_label_every_row():
    one = heads_dataset().isel(model=0, checkpoint=0)
    table = cmr.unit_table(one)
    assert list(table.columns[:4]) == ["layer", "head", "model", "checkpoint"]
    assert table["model"].tolist() == ["tiny"] * 6 and table["checkpoint"].tolist() == [-1] * 6
    assert list(cmr.to_dataframe(one).columns[:5]) == ["layer", "head", "model", "checkpoint", "lag"]


def test_units_in_another_order_are_aligned(fits):
    fit = fits["lsq"]
    table = cmr.unit_table(fit, again=fit.isel(subject=[2, 0, 1]))
    np.testing.assert_array_equal(table["again_distance"], table["distance"])


def test_colliding_columns_raise_naming_the_column(fits):
    with pytest.raises(SchemaError, match="'distance'"):
        cmr.unit_table(fits["lsq"], fits["paper"])
    renamed = fits["lsq"].assign_coords(parameter=["distance", "beta_rec", "gamma"])
    with pytest.raises(SchemaError, match="two variables give the column 'distance'"):
        cmr.unit_table(renamed)


@pytest.mark.parametrize("change, match", [
    (lambda fit: fit.isel(subject=[0, 1]), r"1 unit\(s\) of the first result are not in it, e.g. \(subject=10\)"),
    (lambda fit: fit.assign_coords(subject=["01", "02", "11"]), r"\(subject=11\)"),
    (lambda fit: fit.assign_coords(subject=[1, 2, 10]), "not the same units|does not hold the same units"),
])
def test_units_that_differ_raise(fits, change, match):
    with pytest.raises(SchemaError, match=match):
        cmr.unit_table(fits["lsq"], other=change(fits["paper"]))


def test_results_of_other_unit_dims_raise(events, fits):
    with pytest.raises(SchemaError, match=r"has units \(trial\) but the first result has \(subject\)"):
        cmr.unit_table(fits["lsq"], other=cmr.lag_crp(events, by="trial"))
    with pytest.raises(SchemaError, match="xarray Datasets"):
        cmr.unit_table(fits["lsq"].to_dataframe())
    with pytest.raises(SchemaError, match="at least one"):
        cmr.unit_table()


def test_types_are_spreadsheet_safe(fits):
    fit = fits["lsq"].assign(
        cmr_like=fits["lsq"]["distance"] < 0.5,
        code=("subject", np.array([1, 2, 3], dtype=object)),
        mixed=("subject", np.array([1, "a", 2.5], dtype=object)),
        label=("subject", np.array([b"x", b"y", b"z"])),
    )
    table = cmr.unit_table(fit)
    assert table["cmr_like"].dtype == np.int64 and set(table["cmr_like"]) <= {0, 1}
    assert table["code"].dtype == np.int64
    assert table["mixed"].tolist() == ["1", "a", "2.5"] and table["label"].tolist() == ["x", "y", "z"]
    assert not any(table[c].dtype == object and not table[c].map(type).eq(str).all() for c in table)


# --- long tables -------------------------------------------------------------------------


def test_lag_crp_long_per_subject_per_list_and_pooled(events, crp):
    table = cmr.to_dataframe(crp)
    assert list(table.columns) == ["subject", "lag", "profile", "sem", "actual", "possible"]
    assert len(table) == crp.sizes["subject"] * crp.sizes["lag"]
    assert table["subject"].tolist() == np.repeat(SUBJECTS, crp.sizes["lag"]).tolist()
    np.testing.assert_array_equal(table["profile"], crp["profile"].transpose("subject", "lag").values.ravel())
    assert table["actual"].dtype == np.int64

    per_list = cmr.lag_crp(events, by="trial")
    table = cmr.to_dataframe(per_list)
    assert list(table.columns) == ["trial", "subject", "list", "lag", "profile", "sem", "actual", "possible"]
    assert table["subject"].iloc[:: per_list.sizes["lag"]].tolist() == events["subject"].values.tolist()
    assert table["list"].iloc[:: per_list.sizes["lag"]].tolist() == events["list"].values.tolist()

    pooled = cmr.lag_crp(events, by=None)
    assert list(cmr.to_dataframe(pooled).columns) == ["lag", "profile", "sem", "actual", "possible"]
    with pytest.raises(SchemaError, match="pooled"):
        cmr.to_dataframe(pooled, layout="units")


def test_recall_statistics_long(events):
    spc = cmr.spc(events)
    table = cmr.to_dataframe(spc)
    assert list(table.columns) == ["subject", "serial_position", "prob", "actual", "possible"]
    assert len(table) == 3 * 8
    pnr = cmr.pnr(events)
    table = cmr.to_dataframe(pnr)
    assert list(table.columns[:3]) == ["subject", "output_position", "serial_position"]
    assert len(table) == 3 * pnr.sizes["output_position"] * 8
    np.testing.assert_array_equal(table["prob"], pnr["prob"].transpose("subject", "output_position",
                                                                     "serial_position").values.ravel())
    rank = cmr.to_dataframe(cmr.lag_rank(events))
    assert list(rank.columns) == ["subject", "rank", "n_transitions"]


def test_grid_fit_and_events_long(grid, fits, events):
    table = cmr.to_dataframe(grid)
    assert list(table.columns) == ["beta_enc", "beta_rec", "gamma", "lag", "profile"]
    assert len(table) == 8 * grid.sizes["lag"] and unit_dims(grid) == ("beta_enc", "beta_rec", "gamma")
    long = cmr.to_dataframe(fits["lsq"], layout="long")
    assert list(long.columns[:5]) == ["subject", "lag", "profile", "fitted", "gaussian_fitted"]
    assert len(long) == 3 * len(cmr.RECALL_LAGS)
    assert long.groupby("subject")["distance"].nunique().eq(1).all()
    pd.testing.assert_frame_equal(cmr.to_dataframe(events), cmr.to_table(events))
    assert list(cmr.to_dataframe(events, layout="units").columns) == ["trial", "subject", "list", "list_length"]
    with pytest.raises(SchemaError, match="layout must be one of"):
        cmr.to_dataframe(grid, layout="wide")


# --- files -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(events, crp, fits, recall_fit, grid):
    return {
        "crp": crp, "crp_per_list": cmr.lag_crp(events, by="trial"), "crp_pooled": cmr.lag_crp(events, by=None),
        "spc": cmr.spc(events), "pnr": cmr.pnr(events), "fit": fits["lsq"], "recall_fit": recall_fit,
        "grid": grid, "events": events,
    }


@pytest.mark.parametrize("name", ["crp", "crp_per_list", "crp_pooled", "spc", "pnr", "fit", "recall_fit", "grid",
                                  "events"])
def test_csv_and_parquet_read_back_equal_to_the_dataset(results, name, tmp_path):
    ds = results[name]
    expected = cmr.to_dataframe(ds)
    path = cmr.write_result(ds, tmp_path / f"{name}.csv")
    pd.testing.assert_frame_equal(read_csv_back(path, expected), expected, check_dtype=True)
    path = cmr.write_result(ds, tmp_path / f"{name}.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(path), expected, check_dtype=True)


def test_csv_is_what_a_spreadsheet_expects(results, tmp_path):
    crp = results["crp"].copy()
    crp["sem"] = crp["sem"] * 1e-4  # small numbers a default float repr writes as 1.2e-05
    path = cmr.write_result(crp, tmp_path / "crp.csv")
    text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["subject", "lag", "profile", "sem", "actual", "possible"]
    assert len(rows) == 1 + crp.sizes["subject"] * crp.sizes["lag"]
    body = rows[1:]
    assert [row[0] for row in body[:: crp.sizes["lag"]]] == SUBJECTS  # "01" stays "01"
    assert not any("e" in cell.lower() for row in body for cell in row[1:])
    assert all("." not in row[4] and "." not in row[5] for row in body)  # counts are integers
    at_zero = [row for row in body if row[1] == "0"]
    assert at_zero and all(row[2] == "" and row[3] == "" for row in at_zero)  # NaN is an empty cell
    values = [float(row[3]) for row in body if row[3]]
    np.testing.assert_array_equal(values, crp["sem"].values[np.isfinite(crp["sem"].values)])


def test_unknown_extension_or_layout_writes_nothing(results, tmp_path):
    with pytest.raises(FileFormatError, match=r"\.xlsx"):
        cmr.write_result(results["crp"], tmp_path / "crp.xlsx")
    with pytest.raises(SchemaError, match="layout"):
        cmr.write_result(results["crp"], tmp_path / "crp.csv", layout="wide")
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_pyarrow_is_refused_before_work(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(OptionalDependencyError, match="pip install pyarrow"):
        cmr.io.result_format(tmp_path / "x.parquet")


def test_the_tables_example_of_the_schema_runs(tmp_path, monkeypatch, capsys):
    require("psifr")
    text = (REPO_ROOT / "docs" / "schema.md").read_text()
    section = text[text.index("## Tables"):]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(blocks[0], "docs/schema.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert namespace["subjects"].shape[0] == 40 and len(namespace["long"]) == 40 * 47
    assert "lsq_distance" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "subject_fits.csv")) == 40
