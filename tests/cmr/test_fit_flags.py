"""Flags of a recall fit: estimates at a search bound, units with few scored events per free parameter.

Hand-made fit results (through ``fit_dataset``, the assembly every fit goes through) pin the
exact flags and the exact summary line; small real fits check the warning and the command line.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cmr
from cmr.constants import AT_BOUND_TOLERANCE, MIN_EVENTS_PER_PARAMETER
from cmr.errors import FitWarning, SchemaError
from cmr.io import load_dataset, save_dataset
from cmr.textbook.fit import fit_dataset, fit_recall, flag_summary
from cmr.textbook.parameters import default_parameters
from cmr.textbook.simulate import simulate_free_recall
from cmr.textbook.spec import FitSpec

FAST_DE = dict(popsize=6, tol=0.02, maxiter=10)


def _result(x, logl=-50.0):
    return dict(x=np.asarray(x, dtype=np.float64), logl=logl, nfev=10, nit=2, success=True, n_nan=0,
                n_invalid=0, seconds=0.5, message="ok", seed=1)


def _fits(xs, counts, labels=("4", "9", "17"), spec=None):
    """A recall_fit of T in [0.01, 1] and B_enc in [0, 1] (free), B_rec tied, one restart per unit."""
    spec = spec or FitSpec(["T", "B_enc"], bounds={"T": (0.01, 1.0), "B_enc": (0.0, 1.0)}, tied={"B_rec": "B_enc"})
    results = [[_result(x)] for x in xs]
    return fit_dataset(spec._model, None if labels is None else list(labels), results, counts, "test", {})


def test_at_bound_is_within_the_tolerance_of_the_search_range():
    span = 1.0 - 0.01
    inside = 0.01 + 0.9 * AT_BOUND_TOLERANCE * span
    outside = 0.01 + 1.1 * AT_BOUND_TOLERANCE * span
    fits = _fits([(0.01, 0.5), (inside, 1.0), (outside, 0.5)], [100, 100, 100])
    at = fits["at_bound"]
    assert at.dims == ("subject", "parameter") and at.dtype == bool
    assert at.sel(parameter="T").values.tolist() == [True, True, False]
    assert at.sel(parameter="B_enc").values.tolist() == [False, True, False]
    # tied (B_rec follows B_enc to 1.0) and fixed parameters are not estimates: never flagged
    assert not at.sel(parameter="B_rec").values.any()
    assert int(at.sum()) == 3
    assert fits.attrs["at_bound_tolerance"] == AT_BOUND_TOLERANCE


def test_few_events_is_below_the_floor_per_free_parameter():
    floor = MIN_EVENTS_PER_PARAMETER * 2  # two free parameters
    fits = _fits([(0.5, 0.5)] * 3, [floor - 1, floor, 41])
    assert fits["few_events"].dims == ("subject",) and fits["few_events"].dtype == bool
    assert fits["few_events"].values.tolist() == [True, False, False]
    assert fits["n"].values.tolist() == [floor - 1, floor, 41]  # the scored events: n, not a second count
    assert fits.attrs["min_events_per_parameter"] == MIN_EVENTS_PER_PARAMETER


def test_summary_names_parameter_bound_and_subjects():
    fits = _fits([(0.01, 0.5), (0.01, 1.0), (0.5, 0.5)], [100, 19, 12])
    assert flag_summary(fits) == (
        "3 of 6 estimates at a bound (B_enc at its upper bound 1 for subject 9; "
        "T at its lower bound 0.01 for subjects 4, 9); "
        "2 subjects with fewer than 10 scored events per free parameter "
        "(subject 9: 19 events, subject 17: 12 events, 2 free)")


def test_summary_is_empty_when_nothing_is_flagged():
    assert flag_summary(_fits([(0.5, 0.5), (0.2, 0.7)], [100, 20], labels=("a", "b"))) == ""


def test_summary_lists_five_subjects_then_a_count():
    labels = [str(s) for s in range(1, 8)]
    fits = _fits([(0.01, 0.5)] * 7, [100] * 7, labels=labels)
    assert flag_summary(fits) == "7 of 14 estimates at a bound (T at its lower bound 0.01 for subjects 1, 2, 3, 4, 5 and 2 more)"


def test_pooled_fit_has_the_flags_without_the_subject_dim():
    fits = _fits([(0.01, 0.5)], [15], labels=None)
    assert fits["at_bound"].dims == ("parameter",) and fits["few_events"].dims == ()
    assert bool(fits["few_events"]) and bool(fits["at_bound"].sel(parameter="T"))
    assert flag_summary(fits) == ("1 of 2 estimates at a bound (T at its lower bound 0.01); the pooled fit has "
                                  "fewer than 10 scored events per free parameter (15 events, 2 free)")


def test_summary_of_a_dataset_without_flags_is_refused():
    fits = _fits([(0.5, 0.5)], [100], labels=("a",)).drop_vars("at_bound")
    with pytest.raises(SchemaError, match="at_bound"):
        flag_summary(fits)


def test_flags_reach_the_table_and_survive_netcdf(tmp_path):
    fits = _fits([(0.01, 0.5), (0.5, 0.5)], [100, 5], labels=("a", "b"))
    table = cmr.to_dataframe(fits)
    assert table["at_bound_T"].tolist() == [1, 0] and table["at_bound_B_enc"].tolist() == [0, 0]
    assert table["few_events"].tolist() == [0, 1] and table["few_events"].dtype == np.int64
    back = load_dataset(save_dataset(fits, tmp_path / "fits.nc"), kind="recall_fit")
    assert back["at_bound"].dtype == bool and back.identical(fits)


@pytest.fixture(scope="module")
def small_table():
    """Two subjects of 3 lists of 8 items: far fewer scored events than 10 per free parameter."""
    return simulate_free_recall(default_parameters(), 8, 3, subjects=2, rng=4)


def test_fit_recall_warns_once_with_the_summary(small_table):
    with pytest.warns(FitWarning) as record:
        fits = fit_recall(small_table, FitSpec(["B_enc", "B_rec", "T", "Lfc", "Lcf", "P1", "P2"]), rng=0,
                          progress=False, de_options=FAST_DE, polish=False)
    flagged = [w for w in record if issubclass(w.category, FitWarning)]
    assert len(flagged) == 1
    message = str(flagged[0].message)
    assert message == f"fit_recall: {flag_summary(fits)}; see the fit's at_bound, few_events and converged"
    assert "2 subjects with fewer than 10 scored events per free parameter" in message
    assert "\n" not in message and "np." not in message


def test_fit_recall_is_silent_when_nothing_is_flagged():
    table = simulate_free_recall(default_parameters(), 8, 12, subjects=1, rng=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitWarning)
        fits = fit_recall(table, FitSpec(["B_enc"], bounds={"B_enc": (0.2, 0.9)}), rng=0, progress=False,
                          de_options=FAST_DE)
    assert not fits["at_bound"].values.any() and not fits["few_events"].values.any()


def _cli_table(tmp_path, n_lists):
    csv = tmp_path / f"data{n_lists}.csv"
    simulate_free_recall(default_parameters(), 8, n_lists, subjects=2, rng=4).to_csv(csv, index=False)
    return csv


def test_cli_prints_the_flags_in_one_line(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    out = tmp_path / "fits.nc"
    assert main(["fit-recall", str(_cli_table(tmp_path, 2)), "--free", "T,B_enc", "--bounds", "T=0.01:0.02",
                 "-o", str(out), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("wrote ")
    fits = load_dataset(out, kind="recall_fit")
    assert lines[1] == f"check: {flag_summary(fits)} (see at_bound, few_events, converged)"
    assert lines[1].startswith("check: ") and " of 4 estimates at a bound (" in lines[1]
    assert "; 2 subjects with fewer than 10 scored events per free parameter (subject 1: 18 events, " in lines[1]


def test_cli_prints_no_flag_line_when_nothing_is_flagged(tmp_path, capsys):
    from icl_cmr.analyses.cli import main

    out = tmp_path / "fits.nc"
    assert main(["fit-recall", str(_cli_table(tmp_path, 12)), "--free", "B_enc", "--bounds", "B_enc=0.2:0.9",
                 "-o", str(out), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("wrote ")
    fits = load_dataset(out, kind="recall_fit")
    assert not fits["at_bound"].values.any() and not fits["few_events"].values.any()


def test_convergence_variables_are_the_verdict_of_each_units_restarts():
    from cmr.textbook.flags import convergence_variables

    verdict = convergence_variables([[-10.0, -10.05, -12.0], [-3.0, -4.0], [-7.0], [-5.0, -np.inf]])
    np.testing.assert_array_equal(verdict["n_restarts"], [3, 2, 1, 2])
    np.testing.assert_allclose(verdict["logl_gap"], [0.05, 1.0, np.nan, np.nan], atol=1e-12)  # finite restarts only
    np.testing.assert_allclose(verdict["logl_spread"], [2.0, 1.0, np.nan, np.nan], atol=1e-12)
    np.testing.assert_array_equal(verdict["converged"], [True, False, False, False])


def test_the_convergence_line_names_the_units_of_any_fitter():
    """A network fit's units (dim ``unit``) are named as a recall fit's subjects; a pooled one as pooled."""
    import xarray as xr

    from cmr.textbook.flags import convergence_summary, convergence_variables

    verdict = convergence_variables([[-3.0, -4.0], [-7.0, -7.01]])
    fits = xr.Dataset({name: ("unit", values) for name, values in verdict.items()}, coords={"unit": ["1", "2"]},
                      attrs={"convergence_tolerance": 0.1, "by": "subject"})
    assert convergence_summary(fits) == ("1 of 2 subjects not converged: best two restarts more than 0.1 log units "
                                         "apart (subject 1: 1 apart after 2 restarts)")
    pooled = fits.isel(unit=[0]).assign_attrs(by="pooled")
    assert convergence_summary(pooled).startswith("the pooled fit did not converge: best two restarts 1 log units")
