"""The CLI writes every result by its output's extension; spc, pfr and export; fit on a human lag-CRP."""
from __future__ import annotations

import argparse
import csv

import numpy as np
import pandas as pd
import pytest

import cmr
from icl_cmr.analyses.cli import main
from icl_cmr.analyses.commands.options import parse_lags
from tests.conftest import require
from tests.cmr.test_tables import heads_dataset


def run_cli(capsys, *argv):
    """Exit status, stdout and stderr of one command run in this process."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str, command: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"icl-cmr {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def morton():
    require("psifr")
    from icl_cmr.adapters.recall_data import load_recall_data

    return load_recall_data("psifr:Morton2013")


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory):
    """A psifr-format file with text subject labels, as a lab would export it."""
    table = cmr.simulate_free_recall(cmr.default_parameters(), 8, 5, subjects=["01", "02", "03"], rng=1)
    path = tmp_path_factory.mktemp("recall") / "experiment.csv"
    table.to_csv(path, index=False)
    return path


# --- every command that writes a result refuses an unknown extension before any work ------

WRITERS = {
    "lag-crp": ["lag-crp", "missing.csv"],
    "spc": ["spc", "missing.csv"],
    "pfr": ["pfr", "missing.csv"],
    "fit": ["fit", "missing.nc"],
    "fit-recall": ["fit-recall", "missing.csv", "--free", "B_rec"],
    "export": ["export", "missing.nc"],
    "heads": ["heads"],
    "grid": ["grid", "--kind", "tf-prob"],
    "ablate": ["ablate", "--heads", "L0.H0"],
}


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_an_unknown_output_extension_is_refused_before_any_work(command, capsys, tmp_path):
    code, out, err = run_cli(capsys, *WRITERS[command], "-o", tmp_path / "result.xlsx")
    line = one_error_line(err, command)
    assert code == 1 and ".xlsx" in line and "missing" not in line  # the inputs were never touched
    assert list(tmp_path.iterdir()) == []


def test_lag_crp_of_morton2013_is_a_csv_a_spreadsheet_opens(morton, capsys, tmp_path):
    path = tmp_path / "x.csv"
    code, out, err = run_cli(capsys, "lag-crp", "psifr:Morton2013", "-o", path)
    assert code == 0 and out.startswith(f"wrote {path}") and err == ""
    expected = cmr.lag_crp(morton)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["subject", "lag", "profile", "sem", "actual", "possible"]
    body = rows[1:]
    assert len(body) == 40 * 47 and all(len(row) == 6 for row in body)
    assert [(int(r[0]), int(r[1])) for r in body] == [(s, lag) for s in expected["subject"].values.tolist()
                                                      for lag in range(-23, 24)]
    numbers = [cell for row in body for cell in row[2:]]
    assert not any("e" in cell.lower() or cell.lower() in ("nan", "inf") for cell in numbers)
    assert all(float(cell) >= 0 for cell in numbers if cell)
    assert all(row[2] == "" and row[3] == "" for row in body if row[1] == "0")  # lag 0: never possible
    table = pd.read_csv(path)
    assert list(table.dtypes) == [np.int64, np.int64, np.float64, np.float64, np.int64, np.int64]
    np.testing.assert_array_equal(table["profile"], expected["profile"].values.ravel())
    np.testing.assert_array_equal(table["possible"], expected["possible"].values.ravel())


def test_spc_and_pfr_commands_equal_the_library(morton, capsys, tmp_path):
    for command, stat in (("spc", cmr.spc), ("pfr", cmr.pfr)):
        code, out, _ = run_cli(capsys, command, "psifr:Morton2013", "-o", tmp_path / f"{command}.nc")
        assert code == 0 and "40 subjects" in out
        back = cmr.load_dataset(tmp_path / f"{command}.nc", kind="recall_stat")
        expected = stat(morton)
        assert back.attrs["stat_kind"] == command
        for name in ("prob", "actual", "possible"):
            np.testing.assert_array_equal(back[name].values, expected[name].values)
        code, out, _ = run_cli(capsys, command, "psifr:Morton2013", "--pooled", "-o", tmp_path / f"{command}_p.nc")
        pooled = cmr.load_dataset(tmp_path / f"{command}_p.nc")
        assert code == 0 and "pooled" in out and pooled["prob"].dims == ("serial_position",)
        np.testing.assert_array_equal(pooled["actual"].values, expected["actual"].sum("subject").values)


def test_per_list_tables_carry_subject_and_list_as_written(small_csv, capsys, tmp_path):
    for command in ("lag-crp", "spc", "pfr"):
        path = tmp_path / f"{command}.csv"
        code, out, _ = run_cli(capsys, command, small_csv, "--per-list", "-o", path)
        assert code == 0 and "15 lists" in out
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert list(rows[0])[:3] == ["trial", "subject", "list"]
        assert {row["subject"] for row in rows} == {"01", "02", "03"}


def test_pooled_and_per_list_exclude_each_other(small_csv, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main(["spc", str(small_csv), "--per-list", "--pooled", "-o", str(tmp_path / "x.csv")])
    assert stop.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# --- fit on a human lag-CRP works out of the box -----------------------------------------


@pytest.fixture(scope="module")
def small_crp(small_csv, tmp_path_factory):
    path = tmp_path_factory.mktemp("crp") / "crp.nc"
    assert main(["lag-crp", str(small_csv), "-o", str(path)]) == 0
    return path


def test_fit_on_a_human_crp_leaves_lag_0_out_against_the_installed_published_grid(small_crp, capsys, tmp_path):
    code, out, err = run_cli(capsys, "fit", small_crp, "--objective", "lsq", "-o", tmp_path / "fits.nc")
    assert code == 0 and "the study's published grid" in out and "cmr_crp_grid.npz" in out, err
    fits = cmr.load_dataset(tmp_path / "fits.nc", kind="profile_fit")
    assert fits["lag"].values.tolist() == list(cmr.RECALL_LAGS) and 0 not in fits["lag"].values
    assert np.isfinite(fits["distance"].values).all()
    code, _, err = run_cli(capsys, "fit", small_crp, "--lags=-3:-1,1:3", "-o", tmp_path / "fits3.csv")
    assert code == 0, err
    table = pd.read_csv(tmp_path / "fits3.csv", dtype={"subject": str})
    assert table["subject"].tolist() == ["01", "02", "03"] and "beta_enc" in table


@pytest.mark.parametrize("lags", ["5", "-2:2", "0,1,2"])
def test_fit_refuses_lag_0_of_a_recall_crp(small_crp, capsys, tmp_path, lags):
    code, _, err = run_cli(capsys, "fit", small_crp, f"--lags={lags}", "-o", tmp_path / "fits.csv")
    line = one_error_line(err, "fit")
    assert code == 1 and "undefined at lag 0" in line and "--lags=-5:-1,1:5" in line
    assert not (tmp_path / "fits.csv").exists()


def test_lags_option_syntax():
    assert parse_lags("5") == 5
    assert parse_lags("-2:2") == [-2, -1, 0, 1, 2]
    assert parse_lags("-5:-4,1:2,7") == [-5, -4, 1, 2, 7]
    for bad in ("-2", "3:1", "", "a", "1:2:3", ",", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="lags must be"):
            parse_lags(bad)


# --- export --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def head_files(tmp_path_factory):
    """A heads file and two fits of its heads, as icl-cmr heads and icl-cmr fit write them."""
    folder = tmp_path_factory.mktemp("heads")
    heads = heads_dataset()
    grid = cmr.paper_teacher_forced_grid([0.3, 0.6], [0.5, 1.0], [0.0], lags=range(-3, 4), list_length=20)
    cmr.save_dataset(heads, folder / "heads.nc")
    for objective in ("lsq", "paper"):
        fits = cmr.fit_profiles(heads, grid, objective=objective, lags=range(-3, 4))
        cmr.save_dataset(fits, folder / f"fits_{objective}.nc")
    cmr.save_dataset(cmr.fit_profiles(heads.isel(layer=[0]), grid, lags=range(-3, 4)), folder / "fits_layer0.nc")
    return folder


def test_export_joins_per_unit_tables_of_the_same_heads(head_files, capsys, tmp_path):
    out = tmp_path / "heads.csv"
    code, printed, err = run_cli(capsys, "export", head_files / "heads.nc", "--with", f"{head_files}/fits_lsq.nc:lsq",
                                 "--with", f"{head_files}/fits_paper.nc:paper", "-o", out)
    assert code == 0 and "6 rows" in printed, err
    table = pd.read_csv(out)
    expected = cmr.unit_table(cmr.load_dataset(head_files / "heads.nc"),
                              lsq=cmr.load_dataset(head_files / "fits_lsq.nc"),
                              paper=cmr.load_dataset(head_files / "fits_paper.nc"))
    pd.testing.assert_frame_equal(table, expected)
    assert list(table.columns[:4]) == ["model", "checkpoint", "layer", "head"]
    assert {"induction_score", "lsq_distance", "lsq_beta_enc", "paper_distance", "paper_gaussian_aic"} <= set(table)


@pytest.mark.parametrize("layout, rows", [("auto", 6 * 7), ("long", 6 * 7), ("units", 6)])
def test_export_converts_one_result_by_layout(head_files, capsys, tmp_path, layout, rows):
    out = tmp_path / "heads.parquet"
    code, printed, err = run_cli(capsys, "export", head_files / "heads.nc", "--layout", layout, "-o", out)
    assert code == 0, err
    table = pd.read_parquet(out)
    assert len(table) == rows
    pd.testing.assert_frame_equal(table, cmr.to_dataframe(cmr.load_dataset(head_files / "heads.nc"), layout=layout))


def test_export_to_netcdf_keeps_the_dataset(head_files, capsys, tmp_path):
    code, _, err = run_cli(capsys, "export", head_files / "fits_lsq.nc", "-o", tmp_path / "copy.nc")
    assert code == 0, err
    import xarray as xr

    xr.testing.assert_identical(cmr.load_dataset(tmp_path / "copy.nc"), cmr.load_dataset(head_files / "fits_lsq.nc"))


@pytest.mark.parametrize("extra, match", [
    (["--with", "{d}/fits_layer0.nc:lsq"], "does not hold the same units"),
    (["--with", "{d}/fits_lsq.nc", "--with", "{d}/fits_paper.nc"], "'distance'"),
    (["--with", "{d}/fits_lsq.nc:a", "--with", "{d}/fits_paper.nc:a"], "prefix 'a' is given twice"),
    (["--with", "{d}/fits_lsq.nc:lsq", "--layout", "long"], "--layout units"),
    (["--with", "{d}/nothing.nc:lsq"], "no such file"),
])
def test_export_refuses_bad_joins_in_one_line(head_files, capsys, tmp_path, extra, match):
    argv = [a.format(d=head_files) for a in extra]
    code, _, err = run_cli(capsys, "export", head_files / "heads.nc", *argv, "-o", tmp_path / "out.csv")
    assert code == 1 and match in one_error_line(err, "export")
    assert not (tmp_path / "out.csv").exists()


def test_export_refuses_a_join_into_netcdf_and_a_bad_prefix(head_files, capsys, tmp_path):
    code, _, err = run_cli(capsys, "export", head_files / "heads.nc", "--with", f"{head_files}/fits_lsq.nc:lsq",
                           "-o", tmp_path / "out.nc")
    assert code == 1 and ".csv or .parquet" in one_error_line(err, "export")
    with pytest.raises(SystemExit):
        main(["export", str(head_files / "heads.nc"), "--with", f"{head_files}/fits_lsq.nc:2x", "-o", "x.csv"])
    assert "PREFIX a name" in capsys.readouterr().err
