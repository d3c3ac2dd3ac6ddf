"""The fit-recall and loglik commands with per-subject parameters, ties, restarts, pooled and cross-validated fits."""
from __future__ import annotations

import json

import numpy as np
import pytest

import cmr
from cmr.events import from_table
from cmr.io import load_dataset
from tests.conftest import require


@pytest.fixture()
def csv(tmp_path):
    table = cmr.simulate_free_recall(cmr.default_parameters(), 6, 4, subjects=2, rng=4)
    path = tmp_path / "data.csv"
    table.to_csv(path, index=False)
    return table, path


def test_fit_recall_ties_restarts_pooled_and_cv(csv, tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    table, path = csv
    out = tmp_path / "fits.nc"
    assert main(["fit-recall", str(path), "--free", "B_enc", "--tie", "B_rec=B_enc", "--restarts", "2",
                 "--no-progress", "-o", str(out)]) == 0
    fits = load_dataset(out, kind="recall_fit")
    assert fits.sizes["restart"] == 2
    np.testing.assert_array_equal(fits["value"].sel(parameter="B_rec"), fits["value"].sel(parameter="B_enc"))
    pooled = tmp_path / "pooled.nc"
    assert main(["fit-recall", str(path), "--free", "T", "--pooled", "--no-progress", "-o", str(pooled)]) == 0
    assert load_dataset(pooled, kind="recall_fit")["value"].dims == ("parameter",)
    cv = tmp_path / "cv.nc"
    assert main(["fit-recall", str(path), "--free", "T", "--cv", "2", "--no-progress", "-o", str(cv)]) == 0
    assert load_dataset(cv, kind="recall_cv").sizes["fold"] == 2
    # loglik scores each subject with its own fitted parameters
    capsys.readouterr()
    assert main(["loglik", str(path), "--params", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose([printed["per_subject"][str(s)]["logl"] for s in fits["subject"].values],
                               fits["logl"].values, rtol=1e-12)
    per_subject = tmp_path / "params.json"
    per_subject.write_text(json.dumps({"1": cmr.default_parameters(), "2": dict(cmr.default_parameters(), T=0.3)}))
    assert main(["loglik", str(path), "--params", str(per_subject)]) == 0
    printed = json.loads(capsys.readouterr().out)
    direct = cmr.log_likelihood(from_table(table), {1: cmr.default_parameters(), 2: dict(cmr.default_parameters(), T=0.3)})
    assert printed["total_logl"] == direct.attrs["total_logl"]
    assert main(["fit-recall", str(path), "--free", "T", "--tie", "B_rec", "-o", str(out)]) == 1
    assert "NAME=EXPRESSION" in capsys.readouterr().err


def test_loglik_with_semantic_patterns(tmp_path, capsys):
    require("psifr")
    require("cymr")
    from icl_cmr.analyses.cli import main

    from icl_cmr.adapters.item_pools import load_item_patterns
    from icl_cmr.adapters.recall_data import load_recall_data

    values = dict(cmr.default_parameters(), Sff=0.3, Scf=0.1, Ccf=0.1)
    params = tmp_path / "params.json"
    params.write_text(json.dumps(values))
    assert main(["loglik", "cymr:Morton2013_mixed", "--params", str(params), "--patterns", "semantic+category"]) == 0
    printed = json.loads(capsys.readouterr().out)
    direct = cmr.log_likelihood(load_recall_data("cymr:Morton2013_mixed"), values,
                                patterns=load_item_patterns("cymr:Morton2013_mixed"))
    assert printed["total_logl"] == direct.attrs["total_logl"] and printed["n"] == direct.attrs["n"]


def test_fit_recall_start_library_and_fit_population_from_its_fits(csv, tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    _, path = csv
    forced, off, pop = tmp_path / "forced.nc", tmp_path / "off.nc", tmp_path / "pop.nc"
    assert main(["fit-recall", str(path), "--free", "B_enc,T", "--restarts", "2", "--start-library",
                 "--no-progress", "-o", str(forced)]) == 0
    seeds = load_dataset(forced, kind="recall_fit")["restart_seed"].values
    assert (seeds == -2).any(axis=1).all() and ((seeds >= 0).sum(axis=1) == 2).all()
    assert main(["fit-recall", str(path), "--free", "B_enc,T", "--no-start-library",
                 "--no-progress", "-o", str(off)]) == 0
    assert (load_dataset(off, kind="recall_fit")["restart_seed"].values != -2).all()
    capsys.readouterr()
    assert main(["fit-population", str(path), "--free", "B_enc,T", "--start", str(forced), "--max-iter", "2",
                 "--tol", "1e-9", "--no-progress", "-o", str(pop)]) == 0
    printed = capsys.readouterr().out
    assert json.loads(load_dataset(pop, kind="recall_fit").attrs["provenance"])["start"] is True
    assert "check: no convergence in 2 iterations; still moving: " in printed
