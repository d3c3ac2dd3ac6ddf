"""Fault injection: bad files, bad places to write, damaged results and a hostile environment.

Every row of :data:`FAULTS` (and every malformed input of ``test_bad_input.CASES``) must end
in one typed error of exactly the class named, with a message matching the pattern, and must
leave the directory it ran in as it found it: no output, no temporary file, no lock, every
input byte for byte the same. The CLI rows run the command through ``cli.execute`` (what
``icl-cmr`` runs) so the error class can be checked; :func:`test_cli_prints_one_line` checks
what a user sees.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import cmr
from cmr import errors
from cmr.io import load_dataset, save_dataset, write_result
from icl_cmr.adapters.errors import ModelNotAvailableError
from icl_cmr.adapters.recall_data import load_recall_data
from tests.conftest import REPO_ROOT, two_subject_table
from tests.cmr.test_bad_input import CASES


# the files a case made as its inputs, with their content hash when made (reset for every case)
_INPUTS: dict[Path, str | None] = {}


def _made(path: Path) -> Path:
    """Record ``path`` as an input of the running case (its bytes must not change)."""
    _INPUTS[Path(path).absolute()] = None if Path(path).is_dir() else hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return path


def _table():
    """Two subjects, one list each: study a b c, recall c a."""
    return two_subject_table()


def _csv(tmp, name="recall.csv"):
    path = tmp / name
    _table().to_csv(path, index=False)
    return _made(path)


def _compressed(tmp, ext, cut=None, damage=False):
    path = tmp / f"recall.csv.{ext}"
    _table().to_csv(path, index=False)
    data = path.read_bytes()
    if cut is not None:
        data = data[: int(len(data) * cut)]
    if damage:
        data = data[:12] + bytes(b ^ 0xFF for b in data[12:28]) + data[28:]
    path.write_bytes(data)
    return _made(path)


def _crp():
    return cmr.lag_crp(cmr.from_table(_table()))


def _crp_file(tmp, name="crp.nc"):
    return _made(save_dataset(_crp(), tmp / name))


def _flipped(tmp, name="crp.nc"):
    """A saved lag-CRP with the 64 bytes of its first SEMs inverted: same size, other numbers."""
    ds = _crp()
    ds["sem"] = ds["sem"].fillna(0.5) + 0.25  # distinct, finite bytes to find in the file
    path = save_dataset(ds, tmp / name)
    data = path.read_bytes()
    start = data.index(ds["sem"].values.tobytes()[:64])
    path.write_bytes(data[:start] + bytes(b ^ 0xFF for b in data[start:start + 64]) + data[start + 64:])
    assert len(path.read_bytes()) == len(data)
    return _made(path)


def _hand_edited(tmp, change, name="edited.nc"):
    """A lag-CRP file edited outside icl-cmr (written without the schema check)."""
    ds = _crp()
    change(ds)
    return _made(save_dataset(ds, tmp / name, check=False))


def _set(var, index, value):
    def change(ds):
        values = ds[var].values.copy()
        values.flat[index] = value
        ds[var] = (ds[var].dims, values)
    return change


def _recall_stat(change):
    ds = cmr.spc(cmr.from_table(_table()))
    change(ds)
    return ds


def _constant_profiles(tmp):
    """A lag-profile file whose every unit is flat (nothing for a CMR fit to match)."""
    ds = _crp()
    ds = ds.drop_vars(["actual", "possible"])
    ds["profile"] = xr.full_like(ds["profile"], 0.25)
    ds.attrs["profile_kind"] = "values"
    return _made(save_dataset(ds, tmp / "flat.nc"))


def cli(*argv):
    from icl_cmr.analyses.cli import build_parser, execute

    return execute(build_parser().parse_args([str(a) for a in argv]))


def _locked(path, call):
    """Run ``call`` while another open file description holds the lock on ``path`` (as another process would)."""
    lock = path.parent / f".{path.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return call()
    finally:
        os.close(fd)
        lock.unlink()


def _failing(target, name, exc):
    """Run a save while ``target.name`` raises ``exc`` (an environment fault)."""
    def run(tmp, monkeypatch):
        def broken(*args, **kwargs):
            raise exc
        monkeypatch.setattr(target, name, broken)
        return save_dataset(_crp(), tmp / "out.nc")
    return run


def _run(tmp, *extra):
    return cli("run", "-o", tmp / "study", "--model", "tiny-llama", "--recall", _csv(tmp), *extra)


# (id, callable(tmp_path, monkeypatch), exact error class, regex the message must match)
FAULTS = [
    # --- reading: damaged and unreadable files ---------------------------------------------
    ("truncated csv.gz", lambda t, m: load_recall_data(_compressed(t, "gz", cut=0.5)),
     errors.FileFormatError, r"is damaged or truncated.*EOFError"),
    ("truncated csv.bz2", lambda t, m: load_recall_data(_compressed(t, "bz2", cut=0.5)),
     errors.FileFormatError, r"is damaged or truncated"),
    ("truncated csv.xz", lambda t, m: load_recall_data(_compressed(t, "xz", cut=0.5)),
     errors.FileFormatError, r"is damaged or truncated"),
    ("damaged csv.gz", lambda t, m: load_recall_data(_compressed(t, "gz", damage=True)),
     errors.FileFormatError, r"is damaged or truncated"),
    ("damaged csv.xz", lambda t, m: load_recall_data(_compressed(t, "xz", damage=True)),
     errors.FileFormatError, r"is damaged or truncated"),
    ("gzip header only", lambda t, m: load_recall_data(_compressed(t, "gz", cut=0.1)),
     errors.FileFormatError, r"is damaged or truncated"),
    ("unreadable recall file", lambda t, m: (m.setattr(pd, "read_csv", _raiser(PermissionError(13, "Permission denied"))),
                                             load_recall_data(_csv(t))),
     errors.DataSourceError, r"cannot read recall-data file .*Permission denied"),
    ("64 bytes flipped in a result (same size)", lambda t, m: load_dataset(_flipped(t)),
     errors.FileFormatError, r"is not a readable netCDF file"),
    ("result cut to its first half", lambda t, m: load_dataset(_truncate(_crp_file(t))),
     errors.FileFormatError, r"is not a readable netCDF file"),
    ("negative SEM in a file", lambda t, m: load_dataset(_hand_edited(t, _set("sem", 3, -14770.0))),
     errors.SchemaError, r"'sem' must lie in \[0, inf\].*-14770"),
    ("negative count in a file", lambda t, m: load_dataset(_hand_edited(t, _set("actual", 2, -1))),
     errors.SchemaError, r"'actual' must lie in \[0, inf\]"),
    ("actual > possible in a file", lambda t, m: load_dataset(_hand_edited(t, _set("actual", 0, 99))),
     errors.SchemaError, r"'actual' must not exceed 'possible'"),
    ("lag-CRP above 1 in a file", lambda t, m: load_dataset(_hand_edited(t, _set("profile", 4, 1.5))),
     errors.SchemaError, r"'profile' must lie in \[0, 1\].*1\.5"),
    ("lag-CRP below 0 in memory", lambda t, m: cmr.schema.validate(_set_copy(_crp(), "profile", 4, -0.5)),
     errors.SchemaError, r"'profile' must lie in \[0, 1\]"),
    ("SPC probability above 1", lambda t, m: cmr.schema.validate(_recall_stat(_set("prob", 0, 2.0))),
     errors.SchemaError, r"'prob' must lie in \[0, 1\]"),
    ("negative head SEM", lambda t, m: cmr.schema.validate(_heads_like(sem=-1.0)),
     errors.SchemaError, r"'sem' must lie in \[0, inf\]"),
    ("induction score above 1", lambda t, m: cmr.schema.validate(_heads_like(induction_score=1.2)),
     errors.SchemaError, r"'induction_score' must lie in \[0, 1\]"),
    ("negative sample count", lambda t, m: cmr.schema.validate(_heads_like(n_samples=-3)),
     errors.SchemaError, r"'n_samples' must lie in \[0, inf\]"),
    ("negative CMR distance", lambda t, m: cmr.schema.validate(_negative_distance()),
     errors.SchemaError, r"'distance' must lie in \[0, inf\]"),
    # --- writing: places that cannot take the output ---------------------------------------
    ("output is a directory", lambda t, m: save_dataset(_crp(), _mkdir(t / "out.nc")),
     errors.OutputError, r"'.*out\.nc' is a directory; expected a file name"),
    ("output under a file", lambda t, m: save_dataset(_crp(), _csv(t) / "out.nc"),
     errors.OutputError, r"recall\.csv' is a file, not a directory"),
    ("output directory not writable", lambda t, m: (m.setattr(os, "access", lambda *a, **k: False),
                                                    save_dataset(_crp(), t / "out.nc")),
     errors.OutputError, r"directory .* is not writable"),
    ("permission denied at create", _failing(tempfile, "mkstemp", PermissionError(13, "Permission denied")),
     errors.OutputError, r"cannot write .*out\.nc': Permission denied"),
    ("disk full at flush", _failing(os, "fsync", OSError(errno.ENOSPC, "No space left on device")),
     errors.OutputError, r"cannot write .*out\.nc': No space left on device"),
    ("read-only file system at rename", _failing(os, "replace", OSError(errno.EROFS, "Read-only file system")),
     errors.OutputError, r"Read-only file system"),
    ("a second writer of one output", lambda t, m: _locked(t / "out.nc", lambda: save_dataset(_crp(), t / "out.nc")),
     errors.OutputError, r"another process is writing .*out\.nc"),
    ("table output is a directory", lambda t, m: write_result(_crp(), _mkdir(t / "out.csv")),
     errors.OutputError, r"is a directory"),
    ("unknown output extension", lambda t, m: write_result(_crp(), t / "out.txt"),
     errors.FileFormatError, r"extension must be one of \.nc, \.csv, \.parquet; got '\.txt'"),
    # --- the command line ---------------------------------------------------------------------
    ("cli: output is the input CSV", lambda t, m: cli("lag-crp", _csv(t), "-o", t / "recall.csv"),
     errors.OutputError, r"'.*recall\.csv' is also an input \(argument source\)"),
    ("cli: output is the input netCDF", lambda t, m: cli("fit", _crp_file(t), "-o", t / "crp.nc", "--no-gaussian"),
     errors.OutputError, r"is also an input \(argument profiles\)"),
    ("cli: spc output is the input", lambda t, m: cli("spc", _csv(t), "-o", t / "recall.csv"),
     errors.OutputError, r"is also an input"),
    ("cli: export output is the input", lambda t, m: cli("export", _crp_file(t, "crp.csv.nc"), "-o", _csv(t, "x.csv"),
                                                         "--with", t / "x.csv"),
     errors.OutputError, r"is also an input \(argument joined\)"),
    ("cli: output is a directory", lambda t, m: cli("lag-crp", _csv(t), "-o", _mkdir(t / "crp.nc")),
     errors.OutputError, r"is a directory; expected a file name"),
    ("cli: pfr output is a directory", lambda t, m: cli("pfr", _csv(t), "-o", _mkdir(t / "pfr.csv")),
     errors.OutputError, r"is a directory"),
    ("cli: output under a file", lambda t, m: cli("lag-crp", _csv(t), "-o", t / "recall.csv" / "crp.nc"),
     errors.OutputError, r"is a file, not a directory"),
    ("cli: output being written by another process", lambda t, m: _locked(t / "crp.nc", lambda: cli("lag-crp", _csv(t), "-o", t / "crp.nc")),
     errors.OutputError, r"another process is writing"),
    ("cli: truncated csv.gz", lambda t, m: cli("lag-crp", _compressed(t, "gz", cut=0.5), "-o", t / "crp.nc"),
     errors.FileFormatError, r"is damaged or truncated"),
    ("cli: damaged result into fit", lambda t, m: cli("fit", _flipped(t), "-o", t / "fits.nc"),
     errors.FileFormatError, r"is not a readable netCDF file"),
    ("cli: --invalid nan and nothing fittable", lambda t, m: _warned(cmr.profile_fit.ProfileWarning, "fit", _constant_profiles(t), "-o", t / "fits.nc", "--invalid", "nan", "--lags", "2",
                                                                 "--no-gaussian", "--objective", "lsq", "--no-refine"),
     errors.ProfileError, r"no unit of .*flat\.nc could be fitted: all 2 have NaN lags or a constant profile.*nothing was written"),
    ("cli: run --ablation-passages -1", lambda t, m: _run(t, "--ablation-passages", "-1"),
     errors.ParameterError, r"ablation_passages \(--ablation-passages\) must be an integer >= 0; got -1"),
    ("cli: run --n-prompts 0", lambda t, m: _run(t, "--n-prompts", "0"),
     errors.ParameterError, r"n_prompts \(--n-prompts\) must be an integer >= 1; got 0"),
    ("cli: run --n-words 0", lambda t, m: _run(t, "--n-words", "0"),
     errors.ParameterError, r"n_words .* >= 2; got 0"),
    ("cli: run --grid-trials 0", lambda t, m: _run(t, "--grid-trials", "0"),
     errors.ParameterError, r"grid_trials .* >= 1; got 0"),
    ("cli: run --ablation-random 0", lambda t, m: _run(t, "--ablation-random", "0"),
     errors.ParameterError, r"ablation_random .* >= 1; got 0"),
    ("cli: run --seed -1", lambda t, m: _run(t, "--seed", "-1"),
     errors.ParameterError, r"seed .* >= 0; got -1"),
    ("cli: run with a missing recall file", lambda t, m: cli("run", "-o", t / "study", "--recall", t / "nothere.csv"),
     errors.DataSourceError, r"'.*nothere\.csv' is neither a bundled name .* nor an existing CSV file"),
    ("cli: run with a missing grid", lambda t, m: _run(t, "--grid", t / "nothere.nc"),
     errors.DataSourceError, r"grid: no such file: '.*nothere\.nc'"),
    ("cli: run into a file", lambda t, m: cli("run", "-o", _csv(t), "--recall", _csv(t, "other.csv"), "--model", "tiny-llama",
                                               "--ablation-passages", "0"),
     errors.OutputError, r"output directory '.*recall\.csv' is a file; expected a directory"),
    # --- models offline -----------------------------------------------------------------------
    ("unknown hub model offline", lambda t, m: _load_model("nosuch-org/nosuch-model"),
     ModelNotAvailableError, r"'nosuch-org/nosuch-model' is not available offline.*embedded default 'smollm2-135m'"),
    ("cli: heads with a model not on disk", lambda t, m: cli("heads", "nosuch-org/nosuch-model", "-o", t / "heads.nc"),
     ModelNotAvailableError, r"'nosuch-org/nosuch-model' is not available offline.*'smollm2-135m'"),
    ("cli: run with a model not on disk", lambda t, m: cli("run", "--model", "nosuch-org/nosuch-model", "-o", t / "study",
                                                            "--recall", _csv(t)),
     ModelNotAvailableError, r"'nosuch-org/nosuch-model' is not available offline.*'smollm2-135m'"),
    ("empty model name", lambda t, m: _load_model(""),
     ModelNotAvailableError, r"model name must be a non-empty string"),
]


def _warned(category, *argv):
    """Run a command that must warn ``category`` before it fails."""
    with pytest.warns(category):
        return cli(*argv)


def _raiser(exc):
    def raise_(*args, **kwargs):
        raise exc
    return raise_


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return _made(path)


def _mkdir(path):
    path.mkdir()
    return _made(path)


def _set_copy(ds, var, index, value):
    ds = ds.copy(deep=True)
    _set(var, index, value)(ds)
    return ds


def _heads_like(**bad):
    """A minimal heads-style lag profile with one variable set to an impossible value."""
    shape = (2, 3)
    ds = xr.Dataset(
        {
            "profile": (("head", "lag"), np.zeros(shape)),
            "sem": (("head", "lag"), np.full(shape, 0.1)),
            "n_samples": (("head", "lag"), np.full(shape, 5, dtype=np.int64)),
            "induction_score": (("head",), np.array([0.2, 0.9])),
        },
        coords={"head": [0, 1], "lag": np.array([-1, 0, 1], dtype=np.int64)},
    )
    for name, value in bad.items():
        values = ds[name].values.copy()
        values.flat[0] = value
        ds[name] = (ds[name].dims, values)
    ds.attrs.update(cmr.schema.provenance_attrs("lag_profile", "tests"), profile_kind="attention_score", unit_kind="heads")
    return ds


def _negative_distance():
    grid = cmr.paper_teacher_forced_grid(beta_enc=[0.3, 0.6], beta_rec=[0.3, 0.6], gamma=[0.0])
    profiles = _crp().drop_vars(["actual", "possible", "sem"])
    profiles["profile"] = profiles["profile"].fillna(0.0) + xr.DataArray(np.arange(profiles.sizes["lag"]) % 3, dims="lag") * 0.1
    profiles.attrs["profile_kind"] = "values"
    fits = cmr.fit_profiles(profiles, grid, objective="lsq", lags=2, refine=False, gaussian=False)
    fits["distance"] = -fits["distance"] - 1.0
    return fits


def _load_model(name):
    from icl_cmr.adapters.lm.loading import load_model

    return load_model(name)


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` with the SHA-256 of its content (directories: None)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


ALL_FAULTS = [(f"api: {c[0]}", (lambda call: lambda t, m: call(t))(c[1]), c[2], c[3]) for c in CASES] + FAULTS


@pytest.mark.parametrize("case", ALL_FAULTS, ids=[c[0] for c in ALL_FAULTS])
def test_fault_ends_in_one_typed_error_and_leaves_nothing(tmp_path, monkeypatch, case):
    name, call, error, pattern = case
    _INPUTS.clear()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.ICLCMRError) as info:
        call(tmp_path, monkeypatch)
    monkeypatch.undo()
    assert type(info.value) is error, f"expected {error.__name__}; got {type(info.value).__name__}: {info.value}"
    assert "\n" not in str(info.value), "the message must be one line"
    assert re.search(pattern, str(info.value)), f"{pattern!r} not in {str(info.value)!r}"
    after = _snapshot(tmp_path)
    assert not [p for p in after if ".partial-" in p or p.endswith(".lock")], f"left behind: {sorted(after)}"
    if name.startswith("api: "):
        return  # cases of test_bad_input make their files their own way; they only read
    inputs = {str(p.relative_to(tmp_path)): digest for p, digest in _INPUTS.items()}
    assert after == inputs, f"written or changed: {sorted(set(after.items()) ^ set(inputs.items()))}"


# --- what the faults above do not show: results that used to be silently wrong, the environment ---


def test_cli_prints_one_line(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    source = _csv(tmp_path)
    assert main(["lag-crp", str(source), "-o", str(source)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("icl-cmr lag-crp: error: output ") and "is also an input" in err


def test_cli_environment_fault_is_one_line(tmp_path, capsys, monkeypatch):
    from icl_cmr.analyses.cli import main

    source = _csv(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)  # the disk fills inside a third-party writer
    assert main(["spc", str(source), "-o", str(tmp_path / "spc.csv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recall.csv"]


def test_subject_labels_kept_as_written(tmp_path):
    one = _table().query("subject == 's1'")
    table = pd.concat([one.assign(subject="01"), one.assign(subject="1")])
    path = tmp_path / "labels.csv"
    table.to_csv(path, index=False)
    crp = cmr.lag_crp(load_recall_data(path))
    assert sorted(crp["subject"].values.tolist()) == ["01", "1"]
    mixed = pd.concat([one.assign(subject="7"), one.assign(subject="1")])
    mixed.to_csv(path, index=False)
    assert cmr.lag_crp(load_recall_data(path))["subject"].values.tolist() == [1, 7]  # plain integers stay numbers


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_honour_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        nc = save_dataset(_crp(), tmp_path / "crp.nc")
        csv = write_result(_crp(), tmp_path / "crp.csv")
        from cmr.io import atomic_directory

        with atomic_directory(tmp_path / "step") as tmp:
            (tmp / "part").write_text("x")
    finally:
        os.umask(old)
    for path in (nc, csv):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "step").stat().st_mode) == 0o777 & ~umask
    os.chmod(nc, 0o640)
    save_dataset(_crp(), nc)
    assert stat.S_IMODE(nc.stat().st_mode) == 0o640  # a replaced file keeps its mode


def test_leftovers_of_a_killed_write_are_removed_by_the_next_write(tmp_path):
    from cmr.io import PARTIAL

    (tmp_path / f".crp.nc{PARTIAL}abcd1234.tmp").write_bytes(b"CDF half")
    (tmp_path / ".crp.nc.lock").write_bytes(b"")  # a dead writer's lock file: not held by anyone
    (tmp_path / f".other.nc{PARTIAL}abcd1234.tmp").write_bytes(b"another output's")
    save_dataset(_crp(), tmp_path / "crp.nc")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".other.nc{PARTIAL}abcd1234.tmp", "crp.nc"]


def _hold_lock_then_signal(path, ready, release):
    from cmr.io import output_lock

    with output_lock(path):
        ready.set()
        release.wait(30)


def test_two_writers_one_output(tmp_path):
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")  # never fork a test process whose thread pools may be running
    ready, release = spawn.Event(), spawn.Event()
    holder = spawn.Process(target=_hold_lock_then_signal, args=(tmp_path / "crp.nc", ready, release))
    holder.start()
    try:
        assert ready.wait(120)
        with pytest.raises(errors.OutputError, match="another process is writing"):
            save_dataset(_crp(), tmp_path / "crp.nc")
    finally:
        release.set()
        holder.join(30)
    save_dataset(_crp(), tmp_path / "crp.nc")  # once the first writer is done, the next one writes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crp.nc"]


_READ_ONLY_NUMBA = """
import os, sys, warnings
from numba.core import caching
allowed = os.environ["ALLOWED"]
real = caching._CacheLocator.ensure_cache_path
def ensure(self):  # the installed package and HOME refuse writes; only the temporary directory takes them
    if not os.path.abspath(self.get_cache_path()).startswith(allowed):
        raise PermissionError(13, "Permission denied", self.get_cache_path())
    return real(self)
caching._CacheLocator.ensure_cache_path = ensure
if sys.argv[1] == "bare":  # what numba does on its own in that place
    import numba
    code = "@numba.njit(cache=True)\\ndef f(x):\\n    return x\\n"
    exec(compile(code, os.path.join(os.path.dirname(caching.__file__), "x.py"), "exec"), {"numba": numba})
else:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import cmr  # defines every kernel (compiling one here would take seconds)
        from numba.core import config
    print(len(caught), caught[0].category.__name__ if caught else "", config.CACHE_DIR.startswith(allowed))
"""


def test_no_writable_numba_cache_falls_back_with_one_warning(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), ALLOWED=str(tmp_path), PYTHONPATH=str(REPO_ROOT))
    env.pop("NUMBA_CACHE_DIR", None)
    bare = subprocess.run([sys.executable, "-c", _READ_ONLY_NUMBA, "bare"], env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "no locator available" in bare.stderr  # the fault is real
    done = subprocess.run([sys.executable, "-c", _READ_ONLY_NUMBA, "cmr"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "RuntimeWarning", "True"]
    assert (tmp_path / f"icl-cmr-numba-{os.getuid()}").is_dir()


def forbid_loading_and_network(monkeypatch) -> list:
    """Make the model-loading path (torch, transformers, TransformerLens) and any network
    connection fail and record their names in the returned list: a refusal that touches none
    of them takes milliseconds, whatever the machine's load (the time itself is
    ``icl-cmr bench unknown-model``)."""
    import socket

    entered = []

    def forbidden(what):
        def refuse(*args, **kwargs):
            entered.append(what)  # recorded, in case a caller swallows the error
            raise AssertionError(f"{what} was entered for a model that is not on disk")
        return refuse

    monkeypatch.setattr("icl_cmr.adapters.lm.loading.require_lm", forbidden("require_lm"))
    monkeypatch.setattr("icl_cmr.adapters.lm.loading._load_local", forbidden("_load_local"))
    monkeypatch.setattr(socket.socket, "connect", forbidden("socket.connect"))
    return entered


@pytest.mark.parametrize("name", ["nosuch-org/nosuch-model", "nosuch-model", "gpt2-small"])
def test_unknown_model_is_refused_before_loading_or_the_network(name, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty local cache
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    entered = forbid_loading_and_network(monkeypatch)
    with pytest.raises(ModelNotAvailableError, match="embedded default 'smollm2-135m'"):
        _load_model(name)  # a TransformerLens alias resolves to its hub id (gpt2-small -> gpt2) on disk
    assert entered == []


def test_a_transformer_lens_alias_resolves_without_importing_it():
    from icl_cmr.adapters.lm._model_files import official_model_name

    assert official_model_name("gpt2-small") == "gpt2"
    assert official_model_name("pythia-70m") == "EleutherAI/pythia-70m"
    assert official_model_name("no-such-alias") == "no-such-alias"


def test_converted_model_cache_is_verified_and_rebuilt(tmp_path, monkeypatch):
    from icl_cmr.adapters.lm import loading
    from icl_cmr.adapters.lm._model_files import SOURCE_RECORD, converted_problem

    conversions = []

    def convert(gguf, out):  # stands in for the 15-45 s GGUF conversion
        conversions.append(out)
        (out / "config.json").write_text('{"model_type": "llama"}')
        (out / "model.safetensors").write_bytes(bytes(range(256)) * 64)

    monkeypatch.setattr(loading, "_convert_gguf", convert)
    gguf = tmp_path / "model.Q4.gguf"
    gguf.write_bytes(b"GGUF")
    first = loading._converted_dir("m", gguf, tmp_path / "cache")
    assert converted_problem(first) is None and (first / SOURCE_RECORD).is_file()
    assert loading._converted_dir("m", gguf, tmp_path / "cache") == first and len(conversions) == 1
    weights = first / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100:164] = bytes(64)  # same size, other bytes
    weights.write_bytes(bytes(data))
    assert "model.safetensors differs" in converted_problem(first)
    with pytest.warns(RuntimeWarning, match=r"is damaged \(model.safetensors differs.*rebuilding it"):
        again = loading._converted_dir("m", gguf, tmp_path / "cache")
    assert again == first and len(conversions) == 2 and converted_problem(again) is None
    assert stat.S_IMODE(again.stat().st_mode) == 0o777 & ~os.umask(os.umask(0o022))
    (again / "config.json").unlink()
    assert converted_problem(again) == "config.json is missing"
    assert sorted(p.name for p in again.parent.iterdir()) == [again.name]  # nothing partial left
