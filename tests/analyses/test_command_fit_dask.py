"""fit-recall, fit-population and compare on a dask cluster of worker processes: the numbers equal local threads'."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import cmr
from cmr.io import load_dataset
from tests.conftest import require

MODEL = ["--free", "B_enc,T", "--tie", "B_rec=B_enc", "--no-progress"]
FIT = [*MODEL, "--restarts", "2"]
SAME = ("value", "logl", "restart_logl", "converged")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    truths = {s: dict(cmr.default_parameters(), B_enc=b) for s, b in zip("abc", (0.4, 0.6, 0.8))}
    path = tmp_path_factory.mktemp("dask") / "data.csv"
    cmr.simulate_free_recall(truths, 6, 10, rng=11).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def local(data, tmp_path_factory):
    """fit-recall in two threads of this process, and its summary line."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fits = _fit("fit-recall", data, tmp_path_factory.mktemp("local") / "local.nc", "--jobs", "2")
    return fits, printed.getvalue()


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes (spawned: they import cmr themselves) on loopback."""
    distributed = require("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as running:
        yield running


def _fit(command, data, out, *options):
    from icl_cmr.analyses.cli import main

    assert main([command, str(data), *(FIT if command == "fit-recall" else MODEL), *options, "-o", str(out)]) == 0
    return load_dataset(out)


def _assert_same(local, remote, names=SAME):
    for name in names:
        np.testing.assert_array_equal(local[name].values, remote[name].values, err_msg=name)


def test_fit_recall_on_a_scheduler_equals_threads(data, local, cluster, tmp_path, capsys):
    local, printed = local
    assert "s of fitting in 2 threads; converged" in printed
    before = cluster.scheduler.transition_counter
    remote = _fit("fit-recall", data, tmp_path / "remote.nc", "--scheduler", cluster.scheduler_address)
    assert cluster.scheduler.transition_counter > before  # the subjects ran as tasks of the cluster
    assert "s of fitting on 2 dask workers; converged" in capsys.readouterr().out
    assert local.sizes["subject"] == 3 and local.sizes["restart"] == 2
    _assert_same(local, remote)
    # cross-validation: one task per subject and fold, the same held-out likelihoods
    cv_local = _fit("fit-recall", data, tmp_path / "cv_local.nc", "--cv", "2")
    cv_remote = _fit("fit-recall", data, tmp_path / "cv_remote.nc", "--cv", "2", "--scheduler",
                     cluster.scheduler_address)
    assert "2 folds on 2 dask workers" in capsys.readouterr().out
    _assert_same(cv_local, cv_remote, ("logl", "fold_logl", "fold_converged"))


def test_fit_population_on_a_scheduler_equals_threads(data, cluster, tmp_path, capsys):
    local = _fit("fit-population", data, tmp_path / "local.nc")
    before = cluster.scheduler.transition_counter
    remote = _fit("fit-population", data, tmp_path / "remote.nc", "--scheduler", cluster.scheduler_address)
    assert cluster.scheduler.transition_counter > before
    assert "iterations on 2 dask workers" in capsys.readouterr().out
    _assert_same(local, remote, ("value", "logl", "population_mean", "population_sd"))
    assert local.attrs["n_iter"] == remote.attrs["n_iter"]


def test_fit_recall_on_its_own_local_workers(data, local, tmp_path, capsys):
    require("distributed")
    local, _ = local
    remote = _fit("fit-recall", data, tmp_path / "workers.nc", "--workers", "2")
    assert "on 2 dask workers" in capsys.readouterr().out
    _assert_same(local, remote)


def test_compare_on_a_scheduler_equals_threads(data, cluster, tmp_path, capsys):
    """Every fit of a comparison (the nesting model's started from the nested one's, CMR2's, the
    cross-validation folds) runs as tasks of the cluster; the comparison tables equal a run in threads."""
    rows = np.random.default_rng(0).normal(size=(6, 3))
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{i + 1} {' '.join(map(repr, r.tolist()))}\n" for i, r in enumerate(rows)))
    fast = ["--vectors", str(vectors), "--maxiter", "2", "--popsize", "4", "--restarts", "1", "--no-progress"]

    def compare(name, models, *options):
        from icl_cmr.analyses.cli import main

        out = tmp_path / f"{name}.nc"
        assert main(["compare", str(data), "--models", models, *fast, *options, "-o", str(out)]) == 0
        return load_dataset(out)

    for models, cv in (("textbook,semantic,cmr2", []), ("textbook,semantic", ["--cv", "2"])):
        local = compare("local", models, *cv, "--jobs", "2")
        assert "fitted" in capsys.readouterr().out
        before = cluster.scheduler.transition_counter
        remote = compare("remote", models, *cv, "--scheduler", cluster.scheduler_address)
        assert cluster.scheduler.transition_counter > before
        assert f"fitted {len(models.split(','))} models to 3 subject(s) on 2 dask workers" in capsys.readouterr().out
        assert local.sizes["subject"] == 3 and ("cv_logl" in local) == bool(cv)
        assert sorted(local.data_vars) == sorted(remote.data_vars)
        for name in local.data_vars:
            np.testing.assert_array_equal(local[name].values, remote[name].values, err_msg=f"{models}: {name}")


def _error_line(capsys, argv, code=1) -> str:
    from icl_cmr.analyses.cli import main

    if code == 2:  # argparse's refusal
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    else:
        assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in err
    return err


def test_the_command_line_refusals(data, tmp_path, capsys, monkeypatch):
    out = str(tmp_path / "x.nc")
    fit = ["fit-recall", str(data), *FIT, "-o", out]
    both = _error_line(capsys, [*fit, "--scheduler", "tcp://127.0.0.1:8786", "--workers", "2"], code=2)
    assert "--workers: not allowed with argument --scheduler" in both
    require("distributed")
    unreachable = _error_line(capsys, [*fit, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "0.5"])
    assert unreachable.startswith("icl-cmr fit-recall: error: no dask scheduler answered at 'tcp://127.0.0.1:9' "
                                  "within 0.5 s")
    threads = _error_line(capsys, [*fit, "--workers", "2", "--jobs", "2"])
    assert "--jobs sets threads of this process; with --workers the dask workers run the subjects" in threads
    assert "must be an integer >= 1; got 0" in _error_line(capsys, [*fit, "--workers", "0"])
    compare = ["compare", str(data), "--models", "textbook,cmr2", "-o", out]
    assert "--jobs sets threads of this process; with --scheduler" in _error_line(
        capsys, [*compare, "--scheduler", "tcp://127.0.0.1:9", "--jobs", "2"])
    assert _error_line(capsys, [*compare, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "0.5"]).startswith(
        "icl-cmr compare: error: no dask scheduler answered at 'tcp://127.0.0.1:9' within 0.5 s")
    assert "--workers: not allowed with argument --scheduler" in _error_line(
        capsys, [*compare, "--scheduler", "tcp://127.0.0.1:9", "--workers", "2"], code=2)
    assert "--connect-timeout must be a positive" in _error_line(
        capsys, ["fit-population", str(data), "--free", "T", "--scheduler", "tcp://127.0.0.1:9",
                 "--connect-timeout", "0", "-o", out])
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the analyses extra were missing
    missing = _error_line(capsys, [*fit, "--workers", "2"])
    assert "pip install 'icl-cmr[analyses]'" in missing
    assert not (tmp_path / "x.nc").exists()


def test_without_cluster_options_no_dask_is_needed(monkeypatch):
    from icl_cmr.analyses.cluster import describe_executor, fit_executor

    monkeypatch.setitem(sys.modules, "distributed", None)
    with fit_executor() as executor:
        assert executor is None
    assert describe_executor(None, n_jobs=1) == "in 1 thread"


def test_a_scheduler_without_workers_or_a_malformed_address_is_refused():
    from cmr.errors import ParameterError
    from icl_cmr.analyses.cluster import fit_executor

    distributed = require("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as empty:
        with pytest.raises(ParameterError, match="has no workers after 0.2 s: start some"):
            with fit_executor(scheduler=empty.scheduler_address, connect_timeout=0.2):
                pass
    with pytest.raises(ParameterError, match="'127.0.0.1' is not a dask scheduler address"):
        with fit_executor(scheduler="127.0.0.1"):
            pass
    with pytest.raises(ParameterError, match="not both"):
        with fit_executor(scheduler="tcp://127.0.0.1:8786", workers=2):
            pass
