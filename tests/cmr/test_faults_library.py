"""Faults of the library's inputs: tied expressions, hostile JSON and netCDF files, lag windows,
table values, and the numbers a table writer prints.

Each class of fault is one test, parametrised over its cases; every case must end in one
typed error of exactly the class named, with a one-line message matching the pattern, and
leave nothing behind in the directory it ran in.
"""
from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr import errors
from cmr.io import load_dataset, save_dataset, write_table

from tests.conftest import one_typed_line


def _table(n_lists=2):
    rows = []
    for subject in ("s1", "s2"):
        for lst in range(1, n_lists + 1):
            rows += [(subject, lst, "study", p, f"{w}{lst}") for p, w in enumerate("abc", 1)]
            rows += [(subject, lst, "recall", p, f"{w}{lst}") for p, w in enumerate("ca", 1)]
    return pd.DataFrame(rows, columns=["subject", "list", "trial_type", "position", "item"])


def _events():
    return cmr.from_table(_table())


def _left(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir() if ".partial-" in p.name or p.name.endswith(".lock"))


# --- 1. tied expressions -------------------------------------------------------------------

TIES = [
    ("1/0", r"B_rec = '1/0' must evaluate to a finite number; got a division by zero"),
    ("0**-1", r"must evaluate to a finite number; got a division by zero"),
    ("9**9**9", r"must evaluate to a finite number; got a result beyond the largest float"),
    ("B_enc + 9.0**400", r"got a result beyond the largest float"),
    ("(-1)**0.5", r"must evaluate to a real number; got a complex value"),
    ("+".join(["B_enc"] * 30000), r"expression must be at most 1000 characters; got 179999"),
    ("abs(" * 60 + "B_enc" + ")" * 60, r"nested at most 50 levels deep; got 61 levels"),
    ("-" * 80 + "B_enc", r"nested at most 50 levels deep; got 81 levels"),
    ("1e999", r"constants must be finite numbers"),
    ("9" * 400, r"constants must be finite numbers.*\(400 characters\)"),
    ("B_enc*2", r"B_rec = 'B_enc\*2' over the search bounds \(B_enc in \[0, 1\]\) must stay within B_rec's "
                r"admissible range \[0, 1\]; got 1\.25 at B_enc=0\.625; narrow the search bounds"),
    ("log(B_enc)", r"must stay within B_rec's admissible range \[0, 1\]; got -inf at B_enc=0"),
    ("2", r"B_rec = '2' must stay within B_rec's admissible range \[0, 1\]; got 2$"),
    ("T * 20", r"\(T in \[0\.01, 1\]\) must stay within"),
]


@pytest.mark.parametrize("how", ["FitSpec", "fit_recall", "cli"])
@pytest.mark.parametrize("expression, pattern", TIES, ids=[t[0][:20] for t in TIES])
def test_tied_expression_is_refused_before_a_fit(tmp_path, monkeypatch, how, expression, pattern):
    monkeypatch.chdir(tmp_path)
    if how == "FitSpec":
        call = lambda: cmr.FitSpec(["B_enc", "T"], tied={"B_rec": expression})  # noqa: E731
    elif how == "fit_recall":
        from cmr.textbook import _optimize

        def no_fit(*args, **kwargs):
            raise AssertionError("a fit started")
        monkeypatch.setattr(_optimize, "fit_unit", no_fit)
        call = lambda: cmr.fit_recall(_events(), cmr.FitSpec(["B_enc", "T"], tied={"B_rec": expression}),  # noqa: E731
                                      progress=False)
    else:
        _table().to_csv(tmp_path / "recall.csv", index=False)
        from icl_cmr.analyses.cli import build_parser, execute

        call = lambda: execute(build_parser().parse_args(  # noqa: E731
            ["fit-recall", "recall.csv", "--free", "B_enc,T", "--tie", f"B_rec={expression}", "-o", "fit.nc"]))
    one_typed_line(call, errors.ParameterError, pattern)
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if how != "cli" else ["recall.csv"])


@pytest.mark.parametrize("free, bounds, tied", [
    (["B_enc", "T"], None, {"B_rec": "B_enc"}),
    (["B_enc", "T"], {"B_enc": (0.0, 0.5)}, {"B_rec": "B_enc*2"}),  # narrowed bounds make it admissible
    (["Lfc", "Lcf"], None, {"Dfc": "1 - Lfc", "Dcf": "clip(1 - Lcf, 0, 1)"}),
    (["B_enc", "T"], None, {"B_rec": "1 - 0.5 * B_enc"}),
    (["T"], {"T": (0.05, 0.5)}, {"B_enc": "sqrt(B_rec) * 0.9"}),
])
def test_admissible_ties_are_accepted(free, bounds, tied):
    spec = cmr.FitSpec(free, bounds=bounds, tied=tied)
    assert dict(spec.tied) == tied


# --- 2. hostile JSON ---------------------------------------------------------------------------

def _deep(n):
    return "[" * n + "]" * n


@pytest.mark.parametrize("text, error, pattern", [
    (_deep(100_000), errors.FileFormatError, r"is not valid JSON: expected arrays and objects nested"),
    ('{"B_enc": ' + _deep(100_000) + "}", errors.FileFormatError, r"nested at most about 900 levels"),
    ("{" * 50_000, errors.FileFormatError, r"is not valid JSON"),
    ('{"B_enc": 0.5', errors.FileFormatError, r"is not valid JSON: Expecting"),
    ("[1, 2]", errors.ParameterError, r"must hold one JSON object of name: value; got list"),
], ids=["deep list", "deep value", "unclosed objects", "cut short", "a list"])
def test_parameter_json_faults(tmp_path, text, error, pattern):
    path = tmp_path / "params.json"
    path.write_text(text)
    one_typed_line(lambda: cmr.read_parameters(path), error, pattern)


@pytest.mark.parametrize("attr", ["list_keys", "table_columns", "provenance"])
def test_deep_json_in_an_events_attribute(attr):
    events = _events()
    events.attrs[attr] = _deep(100_000)
    call = {"list_keys": lambda: cmr.to_table(events), "table_columns": lambda: cmr.to_table(events),
            "provenance": lambda: cmr.intrusion_rates(events)}[attr]
    one_typed_line(call, errors.RecallDataError, rf"events attribute {attr} is not valid JSON")


def test_cli_fixed_parameters_nested_too_deep(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    _table().to_csv(tmp_path / "recall.csv", index=False)
    (tmp_path / "fixed.json").write_text(_deep(100_000))
    assert main(["fit-recall", str(tmp_path / "recall.csv"), "--free", "T", "--fixed", str(tmp_path / "fixed.json"),
                 "-o", str(tmp_path / "fit.nc")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("icl-cmr fit-recall: error: parameter file") and "Traceback" not in err


# --- 3. files: tables written, netCDF read and written, the output lock -----------------------

@pytest.mark.parametrize("values", [
    [np.inf, -np.inf, 0.5],
    [1e20, -1e16, 1.5e300],
    [np.float64(2.0) ** 60, 3.3e-05, np.nan],
    [1e-190, -2.5e-12, 1e-9],  # tiny weights: an exponent, not a run of zeros
])
def test_csv_writes_plain_numbers_that_read_back(tmp_path, values):
    table = pd.DataFrame({"value": np.array(values, dtype=np.float64)})
    path = write_table(table, tmp_path / "t.csv")
    text = path.read_text()
    assert "np." not in text and "float64" not in text and "0" * 9 not in text
    back = pd.read_csv(path)["value"].to_numpy()
    np.testing.assert_array_equal(back, table["value"].to_numpy())


def _crp():
    return cmr.lag_crp(_events())


def _huge_declared(path):
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("lag", 2 ** 37)  # 1 TiB of float64, never written: a 6 KiB file
        nc.createVariable("profile", "f8", ("lag",), chunksizes=(1024,))
    return path


def _external(path, target):
    import h5py

    target.write_bytes(np.arange(4, dtype="f8").tobytes())
    with h5py.File(path, "w") as f:
        f.create_dataset("profile", shape=(4,), dtype="f8", external=[(str(target), 0, 32)])
    return path


def _virtual(path, target):
    import h5py

    with h5py.File(target, "w") as f:
        f["x"] = np.arange(4.0)
    layout = h5py.VirtualLayout(shape=(4,), dtype="f8")
    layout[:] = h5py.VirtualSource(str(target), "x", shape=(4,))
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("profile", layout)
    return path


def _external_link(path, target):
    import h5py

    with h5py.File(target, "w") as f:
        f["x"] = np.arange(4.0)
    with h5py.File(path, "w") as f:
        f["profile"] = h5py.ExternalLink(str(target), "/x")
    return path


def _disk_full_in_netcdf(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        path = args[1] if len(args) > 1 else kwargs.get("path")
        with open(path, "wb") as handle:  # half a file, as a full disk leaves it
            handle.write(b"\x89HDF\r\n\x1a\n" + bytes(100))
        raise RuntimeError("NetCDF: HDF error")
    monkeypatch.setattr(xr.Dataset, "to_netcdf", full)
    return save_dataset(_crp(), tmp_path / "out.nc")


def _lock_is_a_link(tmp_path, monkeypatch):
    os.symlink(tmp_path / "elsewhere", tmp_path / ".out.nc.lock")
    try:
        return save_dataset(_crp(), tmp_path / "out.nc")
    finally:
        assert not (tmp_path / "elsewhere").exists(), "the link's target was created"
        (tmp_path / ".out.nc.lock").unlink()


def _lock_link_planted_at_open(tmp_path, monkeypatch):
    """The link appears between the check and the open: O_NOFOLLOW refuses it."""
    lock = tmp_path / ".out.nc.lock"
    real_open = os.open

    def racing(path, flags, *args, **kwargs):
        if str(path) == str(lock) and not os.path.lexists(lock):
            os.symlink(tmp_path / "elsewhere", lock)
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", racing)
    try:
        return save_dataset(_crp(), tmp_path / "out.nc")
    finally:
        monkeypatch.undo()
        assert not (tmp_path / "elsewhere").exists(), "the link's target was created"
        lock.unlink()


NETCDF_FAULTS = [
    ("disk full inside to_netcdf", _disk_full_in_netcdf, errors.OutputError,
     r"cannot write '.*out\.nc': the netCDF library failed while writing \(NetCDF: HDF error\)"),
    ("1 TiB declared", lambda t, m: load_dataset(_huge_declared(t / "huge.nc")), errors.FileFormatError,
     r"huge\.nc' declares 1\.0 TiB of data \(variable '/profile'.*expected data that fit in the .* of memory"),
    ("external raw storage", lambda t, m: load_dataset(_external(t / "ext.nc", t / "outside.bin")),
     errors.FileFormatError, r"variable '/profile' is stored outside the file \(external storage in '.*outside\.bin'\)"),
    ("virtual dataset", lambda t, m: load_dataset(_virtual(t / "vds.nc", t / "outside.h5")),
     errors.FileFormatError, r"stored outside the file \(a virtual dataset"),
    ("external link", lambda t, m: load_dataset(_external_link(t / "link.nc", t / "outside.h5")),
     errors.FileFormatError, r"stored outside the file \(an external link to '.*outside\.h5'\)"),
    ("lock is a symbolic link", _lock_is_a_link, errors.OutputError,
     r"its lock '.*\.out\.nc\.lock' is a symbolic link; expected a plain file or none"),
    ("lock link planted at the open", _lock_link_planted_at_open, errors.OutputError,
     r"is a symbolic link; expected a plain file or none"),
]


@pytest.mark.parametrize("case", NETCDF_FAULTS, ids=[c[0] for c in NETCDF_FAULTS])
def test_netcdf_and_lock_faults(tmp_path, monkeypatch, case):
    name, call, error, pattern = case
    before = set(os.listdir(tmp_path))
    one_typed_line(lambda: call(tmp_path, monkeypatch), error, pattern)
    monkeypatch.undo()
    assert _left(tmp_path) == []
    assert "out.nc" not in os.listdir(tmp_path)
    assert before <= set(os.listdir(tmp_path))


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF3_64BIT"])
def test_netcdf3_loads_only_with_a_warning(tmp_path, fmt):
    path = tmp_path / "crp3.nc"
    crp = _crp()
    crp.to_netcdf(path, format=fmt)
    with pytest.warns(errors.UnverifiedFileWarning, match=r"crp3\.nc' is a netCDF-3 file, which has no checksums"):
        back = load_dataset(path)
    xr.testing.assert_equal(back, crp)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_dataset(save_dataset(crp, tmp_path / "crp4.nc"))  # netCDF-4 with checksums: no warning


def test_netcdf4_without_checksums_loads_only_with_a_warning(tmp_path):
    """A netCDF-4 file written by another tool (xarray's default: no Fletcher-32) loads, but says
    which numeric arrays cannot be checked; one array without its checksum is enough."""
    crp = _crp()
    plain = tmp_path / "plain.nc"
    crp.to_netcdf(plain, engine="netcdf4")
    with pytest.warns(errors.UnverifiedFileWarning, match=r"plain\.nc' stores \d+ numeric variable\(s\) without "
                                                          r"checksums \(profile, "):
        back = load_dataset(plain)
    xr.testing.assert_equal(back, crp)
    one = tmp_path / "one.nc"
    encoding = {name: {"fletcher32": True, "contiguous": False} for name, var in crp.variables.items()
                if var.dtype.kind in "biufc" and var.ndim > 0 and name != "sem"}
    crp.to_netcdf(one, engine="netcdf4", encoding=encoding)
    with pytest.warns(errors.UnverifiedFileWarning, match=r"stores 1 numeric variable\(s\) without checksums \(sem\)"):
        load_dataset(one)


# --- 4. lag windows wider than anything can hold ------------------------------------------------

LAGS = [
    ("lag_crp int", lambda: cmr.lag_crp(_events(), lags=10 ** 12),
     r"needs K <= 10000; the longest list \(3 items\) has lags up to 2; got 1000000000000$"),
    ("lag_crp numpy int", lambda: cmr.lag_crp(_events(), lags=np.int64(10 ** 15)), r"got 1000000000000000$"),
    ("lag_crp range", lambda: cmr.lag_crp(_events(), lags=range(-10 ** 12, 10 ** 12)),
     r"lags must lie in -10000\.\.10000.*got range\(-1000000000000, 1000000000000\)"),
    ("lag_crp pooled", lambda: cmr.lag_crp(_events(), by=None, lags=10 ** 12), r"needs K <= 10000"),
    ("lag_crp sequence beyond int64", lambda: cmr.lag_crp(_events(), lags=[1, 10 ** 30]),
     r"lags must lie in -10000\.\.10000.*got 1000000000000000000000000000000$"),
    ("lag_counts", lambda: cmr.lag_counts(np.array([[1, 2]]), 3, lags=10 ** 12), r"needs K <= 10000"),
    ("fit_profiles", lambda: cmr.fit_profiles(_crp(), cmr.paper_teacher_forced_grid(
        beta_enc=[0.3], beta_rec=[0.3], gamma=[0.0]), lags=10 ** 12), r"needs K <= 10000; got 1000000000000$"),
    ("cut_lag_window", lambda: cmr.cut_lag_window(cmr.paper_teacher_forced_grid(
        beta_enc=[0.3], beta_rec=[0.3], gamma=[0.0]), 10 ** 12), r"needs K <= 10000"),
]


@pytest.mark.parametrize("case", LAGS, ids=[c[0] for c in LAGS])
def test_lag_window_beyond_any_list_is_refused(case):
    _, call, pattern = case
    one_typed_line(call, errors.ProfileError, pattern)


@pytest.mark.parametrize("call, pattern", [
    (lambda: cmr.pli_list_lag(_events(), 10 ** 12), r"max_lag must be an integer in 1\.\.10000; got 1000000000000"),
    (lambda: cmr.pli_list_lag(_events(), np.int64(10 ** 12)), r"got 1000000000000$"),
    (lambda: cmr.distance_rank_shifted(_events(), None, np.ones((6, 6)), 10 ** 12),
     r"max_shift must be an integer in 1\.\.10000; got 1000000000000"),
])
def test_list_lag_and_shift_windows_are_bounded(call, pattern):
    one_typed_line(call, errors.ParameterError, pattern)


def test_a_window_wider_than_the_lists_still_pads_with_zeros():
    wide = cmr.lag_crp(_events(), lags=5)  # lags beyond the lists are kept: profiles of lists of other lengths align
    assert wide["lag"].values.tolist() == list(range(-5, 6))
    assert int(wide["possible"].sel(lag=[-5, -4, -3, 3, 4, 5]).sum()) == 0


# --- 5. messages: values as written, trial types, no numpy reprs ---------------------------------

def _with(column, row, value, dtype=None):
    table = _table()
    if dtype is not None:
        table[column] = table[column].astype(dtype)
    table.loc[row, column] = value
    return table


MESSAGES = [
    ("position 1e19", lambda: cmr.from_table(_with("position", 1, 1e19, float)),
     r"positions must be integers below 2\*\*63 \(9\.2e18\) in size; got 1e\+19 \(1 such value\(s\)\)"),
    ("position -1e19", lambda: cmr.from_table(_with("position", 6, -1e19, float)), r"got -1e\+19"),
    ("list label 1e19", lambda: cmr.from_table(_with("list", 0, 1e19, float)), r"list.* below 2\*\*63.*got 1e\+19"),
    ("trial type Study", lambda: cmr.from_table(_with("trial_type", 1, "Study")),
     r"has 2 study events but positions up to 3; trial types are matched exactly: expected 'study' and 'recall', "
     r"and these other values were ignored: 'Study' \(1 rows\)"),
    ("trial types capitalised", lambda: cmr.from_table(_table().assign(trial_type=_table()["trial_type"].str.title())),
     r"no study events; expected 'study' rows .*'Recall', 'Study'"),
    ("numpy parameter value", lambda: cmr.validate_parameters({"B_enc": np.float64(2.0)}, partial=True),
     r"CMR parameter B_enc must be in \[0, 1\]; got 2\.0$"),
    ("numpy count", lambda: cmr.checks.integer(np.int64(-1), "n_words"), r"n_words must be an integer >= 1; got -1$"),
    ("numpy probability", lambda: cmr.checks.probability(np.float64(1.5), "ci"), r"got 1\.5$"),
    ("numpy lags", lambda: cmr.checks.lag_window([np.int64(1), 2.5]), r"got \[1, 2\.5\]$"),
]


@pytest.mark.parametrize("case", MESSAGES, ids=[c[0] for c in MESSAGES])
def test_messages_name_values_as_written(case):
    _, call, pattern = case
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cast warning on the way
        with pytest.raises(errors.ICLCMRError) as info:
            call()
    message = str(info.value)
    assert "\n" not in message and re.search(pattern, message), message
    assert not re.search(r"np\.(int|float)\d+\(", message), message
