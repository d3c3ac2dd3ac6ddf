"""Maximum-likelihood CMR fits: recovery on small data, the recall_fit dataset, errors."""
from __future__ import annotations

import json

import numpy as np
import xarray as xr
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
    summary = capsys.readouterr().out.splitlines()[0]
    assert summary.endswith(f"; converged {int(fits['converged'].sum())} of 2 subjects (best two restarts within "
                            f"0.1 log units)"), summary
    assert main(["fit-recall", str(csv), "--free", "T", "-o", str(out), "--no-progress", "--restarts", "1"]) == 0
    assert "; convergence not checked (1 restart each; --restarts auto checks it)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["fit-recall", str(csv), "--free", "T", "-o", str(out), "--restarts", "some"])
    assert "expected 'auto' or a positive integer; got 'some'" in capsys.readouterr().err
    params.write_text(json.dumps({"T": 0.1}))
    assert main(["loglik", str(csv), "--params", str(params)]) == 1
    assert "missing CMR parameter" in capsys.readouterr().err


@pytest.mark.slow
def test_parameter_recovery_study_b_enc_b_rec_t():
    """20 simulated subjects (96 lists x 24 items); B_enc, B_rec, T recovered with r >= 0.9."""
    from icl_cmr.analyses.reproduce.recovery import RECOVERY_RANGES

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


def test_a_subjects_fit_depends_only_on_its_label_and_the_seed(two_subjects):
    _, events = two_subjects
    labels = events["subject"].values
    third = events.isel(trial=np.flatnonzero(labels == "s1")[:10]).assign_coords()
    third["subject"] = ("trial", np.full(third.sizes["trial"], "s0"))
    first_rows = np.flatnonzero(labels == "s2")[:10]
    both = xr.concat([third, events.isel(trial=np.flatnonzero(labels == "s1")[:10]), events.isel(trial=first_rows)],
                     dim="trial")
    both["trial"] = np.arange(both.sizes["trial"])
    alone = events.isel(trial=first_rows)
    options = dict(rng=7, progress=False, de_options=FAST_DE, n_restarts=2)
    together = fit_recall(both, FitSpec(["T"]), **options)
    single = fit_recall(alone, FitSpec(["T"]), **options)
    assert list(together["subject"].values) == ["s0", "s1", "s2"]  # s2 third here, alone there
    np.testing.assert_array_equal(together["restart_value"].sel(subject="s2").values,
                                  single["restart_value"].sel(subject="s2").values)
    np.testing.assert_array_equal(together["restart_seed"].sel(subject="s2").values,
                                  single["restart_seed"].sel(subject="s2").values)
    # another seed, or another label, gives other searches
    assert together["restart_seed"].sel(subject="s0")[0] != together["restart_seed"].sel(subject="s1")[0]
    other = fit_recall(alone, FitSpec(["T"]), **dict(options, rng=8))
    assert other["restart_seed"].values[0, 0] != single["restart_seed"].values[0, 0]


def test_restarts_run_until_two_agree_and_the_verdict_is_kept(fits):
    ran = fits["n_restarts"].values
    info = json.loads(fits.attrs["provenance"])
    assert info["n_restarts"] == "auto" and info["max_restarts"] == 8 and fits.attrs["convergence_tolerance"] == 0.1
    library = (fits["restart_seed"].values == -2).sum(axis=1)  # polishes from the start library come first
    assert (library > 0).all() and (fits["restart_seed"].values[:, 0] == -2).all()
    assert ((ran - library >= 2) & (ran - library <= 8)).all()
    for s in range(fits.sizes["subject"]):
        logl = np.sort(fits["restart_logl"].values[s, : ran[s]])
        assert np.isnan(fits["restart_logl"].values[s, ran[s]:]).all()  # padding of subjects with fewer restarts
        assert fits["logl_gap"].values[s] == pytest.approx(logl[-1] - logl[-2])
        assert fits["logl_spread"].values[s] == pytest.approx(logl[-1] - logl[0])
        assert bool(fits["converged"].values[s]) == (logl[-1] - logl[-2] <= 0.1)
        # stopped at the first restart that made two agree (once two searches ran), or after the last
        if ran[s] - library[s] > 2:
            earlier = np.sort(fits["restart_logl"].values[s, : ran[s] - 1])
            assert earlier[-1] - earlier[-2] > 0.1


def test_a_fit_that_did_not_converge_is_named_in_one_warning(two_subjects):
    from cmr.errors import FitWarning

    _, events = two_subjects
    one = events.isel(trial=slice(0, 12))
    with pytest.warns(FitWarning, match=r"1 of 1 subject not converged: best two restarts more than 0.1 log units "
                                        r"apart \(subject s1: [0-9.]+ apart after 2 restarts\)"):
        fits = fit_recall(one, FitSpec(["B_enc", "T", "B_rec"]), rng=2, progress=False, polish=False,
                          de_options=dict(popsize=3, maxiter=1), max_restarts=2, start_library=False)
    assert not fits["converged"].values[0] and fits["logl_gap"].values[0] > 0.1
    single = fit_recall(one, FitSpec(["T"]), rng=0, progress=False, n_restarts=1, de_options=FAST_DE)
    assert not single["converged"].values[0] and np.isnan(single["logl_gap"].values[0])
    with pytest.raises(ParameterError, match="n_restarts must be 'auto' or an integer >= 1; got 'many'"):
        fit_recall(one, FitSpec(["T"]), n_restarts="many", progress=False)
    with pytest.raises(ParameterError, match="max_restarts must be an integer >= 2; got 1"):
        fit_recall(one, FitSpec(["T"]), max_restarts=1, progress=False)
