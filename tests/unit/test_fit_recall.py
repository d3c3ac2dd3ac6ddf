"""Maximum-likelihood CMR fits: recovery on small data, the recall_fit dataset, errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from cmr.errors import ParameterError
from cmr.events import from_recall_matrix, from_table
from cmr.textbook.fit import fit_recall, parameter_recovery
from cmr.textbook.spec import FitSpec
from cmr.io import load_dataset, save_dataset
from cmr.textbook.likelihood import log_likelihood
from cmr.textbook.parameters import PARAMETER_NAMES, default_parameters
from cmr.textbook.simulate import simulate_recalls

FAST_DE = dict(popsize=8, tol=0.02, maxiter=60)


@pytest.fixture(scope="module")
def two_subjects():
    """Two simulated subjects with different B_enc and T (24 lists of 12 items each)."""
    truths = [dict(default_parameters(), B_enc=0.4, T=0.3, B_rec=0.8),
              dict(default_parameters(), B_enc=0.85, T=0.1, B_rec=0.8)]
    matrices = [simulate_recalls(p, 12, 30, rng=10 + i) for i, p in enumerate(truths)]
    events = from_recall_matrix(np.concatenate(matrices), 12, subject=np.repeat(["s1", "s2"], 30))
    return truths, events


@pytest.fixture(scope="module")
def fits(two_subjects):
    _, events = two_subjects
    return fit_recall(events, FitSpec(["B_enc", "T"], fixed={"B_rec": 0.8}), rng=3, n_jobs=2, progress=False,
                      de_options=FAST_DE)


def test_recovers_known_parameters_roughly(two_subjects, fits):
    truths, _ = two_subjects
    assert list(fits["subject"].values) == ["s1", "s2"]
    for i, truth in enumerate(truths):
        got = fits["value"].isel(subject=i)
        assert abs(float(got.sel(parameter="B_enc")) - truth["B_enc"]) < 0.15
        assert abs(float(got.sel(parameter="T")) - truth["T"]) < 0.1
        assert float(got.sel(parameter="B_rec")) == 0.8  # fixed stays fixed
    assert fits["value"].sel(parameter="B_enc").values[0] < fits["value"].sel(parameter="B_enc").values[1]


def test_fit_logl_is_the_likelihood_at_the_fitted_values(two_subjects, fits):
    _, events = two_subjects
    best = dict(zip(PARAMETER_NAMES, fits["value"].isel(subject=0).values.tolist()))
    check = log_likelihood(events, best)
    np.testing.assert_allclose(fits["logl"].values[0], check["logl"].values[0], rtol=1e-10)
    np.testing.assert_array_equal(fits["n"].values, check["n"].values)
    # the fit beats the generating parameters (maximum likelihood)
    truth = log_likelihood(events, dict(two_subjects[0][0]))
    assert fits["logl"].values[0] >= truth["logl"].values[0] - 1e-6


def test_fit_dataset_round_trips_netcdf(fits, tmp_path):
    path = save_dataset(fits, tmp_path / "fits.nc")
    back = load_dataset(path, kind="recall_fit")
    for name in ("value", "logl", "n", "free", "nfev", "success", "message"):
        np.testing.assert_array_equal(back[name].values, fits[name].values)
    info = json.loads(back.attrs["provenance"])
    assert info["free"] == ["B_enc", "T"] and info["fixed"] == {"B_rec": 0.8} and info["seed"] == 3
    assert fits["success"].dtype == np.int64 and (fits["nfev"] > 0).all() and (fits["n_nan"] == 0).all()


def test_seeded_fits_are_reproducible(two_subjects):
    _, events = two_subjects
    one = events.isel(trial=slice(0, 10))
    a = fit_recall(one, FitSpec(["T"]), rng=5, progress=False, de_options=FAST_DE, polish=False)
    b = fit_recall(one, FitSpec(["T"]), rng=5, progress=False, de_options=FAST_DE, polish=False, n_jobs=2)
    np.testing.assert_array_equal(a["value"].values, b["value"].values)


def test_parameter_recovery_returns_truth_and_correlation():
    rec = parameter_recovery(4, FitSpec(["B_rec"]), list_length=8, n_lists=10, rng=1, progress=False,
                             de_options=dict(popsize=6, maxiter=20))
    assert rec.sizes["subject"] == 4
    assert np.isfinite(rec["correlation"].sel(parameter="B_rec"))
    assert np.isnan(rec["correlation"].sel(parameter="T"))
    assert (rec["true_value"].sel(parameter="T") == default_parameters()["T"]).all()


def test_bad_free_and_fixed_raise():
    with pytest.raises(ParameterError, match="both free and fixed"):
        FitSpec(["T"], fixed={"T": 0.2})
    with pytest.raises(ParameterError, match="unknown"):
        FitSpec(["gamma"])
    with pytest.raises(ParameterError, match=r"B_rec must be in \[0, 1\]"):
        FitSpec(["T"], fixed={"B_rec": 1.5})
    with pytest.raises(ParameterError, match="at least one"):
        FitSpec([])


def test_cli_loglik_and_fit_recall(tmp_path, capsys):
    from icl_cmr.analyses.cli import main
    from cmr.textbook.simulate import simulate_free_recall

    table = simulate_free_recall(default_parameters(), 8, 6, subjects=2, rng=4)
    csv = tmp_path / "data.csv"
    table.to_csv(csv, index=False)
    params = tmp_path / "params.json"
    params.write_text(json.dumps(default_parameters()))
    assert main(["loglik", str(csv), "--params", str(params)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"total_logl", "n", "per_subject"} and set(printed["per_subject"]) == {"1", "2"}
    assert np.isclose(printed["total_logl"], sum(v["logl"] for v in printed["per_subject"].values()))
    direct = log_likelihood(from_table(table), default_parameters())
    assert printed["total_logl"] == direct.attrs["total_logl"] and printed["n"] == direct.attrs["n"]
    fixed = tmp_path / "fixed.json"
    fixed.write_text(json.dumps({"B_rec": 0.9}))
    out = tmp_path / "fits.nc"
    assert main(["fit-recall", str(csv), "--free", "T", "--fixed", str(fixed), "-o", str(out),
                 "--no-progress", "--bounds", "T=0.05:0.5"]) == 0
    fits = load_dataset(out, kind="recall_fit")
    assert 0.05 <= float(fits["value"].sel(parameter="T")[0]) <= 0.5
    params.write_text(json.dumps({"T": 0.1}))
    assert main(["loglik", str(csv), "--params", str(params)]) == 1
    assert "missing CMR parameter" in capsys.readouterr().err


@pytest.mark.slow
def test_parameter_recovery_study_b_enc_b_rec_t():
    """20 simulated subjects (96 lists x 24 items); B_enc, B_rec, T recovered with r >= 0.9."""
    from icl_cmr.analyses.recovery import RECOVERY_RANGES

    free = ["B_enc", "B_rec", "T"]
    rec = parameter_recovery(20, FitSpec(free), ranges={name: RECOVERY_RANGES[name] for name in free},
                             list_length=24, n_lists=96, rng=2, n_jobs=2, progress=False)
    for name in free:
        assert float(rec["correlation"].sel(parameter=name)) >= 0.9, name


def test_kernel_compiled_once_for_all_subjects(fits):
    """All subjects and all fits share one compiled specialisation (no per-subject recompilation)."""
    from cmr.textbook import _lanes, _network

    assert len(_lanes.population_log_likelihood.signatures) == 1
    assert len(_network.trials_log_likelihood.signatures) == 1
