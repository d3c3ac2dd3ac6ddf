"""The default fits of semantic CMR, CMR2 and the network fitter reach the best known maximum of
their documented examples (icl_cmr.analyses.bench.fit_examples; best known: fit_reference_examples.csv)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import cmr
from cmr.constants import CONVERGENCE_TOLERANCE
from cmr.errors import FitWarning, ParameterError
from icl_cmr.analyses.bench import fit_examples
from icl_cmr.analyses.bench.fit_quality_examples import PARAMETER_COLUMNS, fit_points, rescored
from tests.conftest import require


@pytest.fixture(scope="module")
def reference():
    return fit_examples.load_reference()


def test_the_reference_has_one_row_per_unit_of_every_example_and_each_rescores_to_its_logl(reference):
    expected = {(family, unit) for family, build in fit_examples.EXAMPLES.items() for unit in build().units}
    assert set(zip(reference["family"], reference["unit"])) == expected
    assert len(reference) == len(expected)
    for _, row in reference.iterrows():
        free = fit_examples.example(row["family"]).free
        assert all(np.isfinite(row[name]) == (name in free) for name in PARAMETER_COLUMNS)
        # the best known is at least what each of its two searches found, and is their better one
        assert row["logl"] == pytest.approx(max(row["deep_logl"], row["independent_logl"]), abs=1e-6)
        assert rescored(row) == pytest.approx(row["logl"], abs=1e-6)


def _gaps(family, reference, **options):
    """Best known minus the default fit's logl per unit, and the fit's free values per unit."""
    ex = fit_examples.example(family)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        points = fit_points(ex, ex.fit(**options))
    best = reference[reference["family"] == family].set_index("unit")["logl"]
    return {unit: float(best[unit] - points[unit][0]) for unit in ex.units}, {u: p[1] for u, p in points.items()}


@pytest.mark.parametrize("family", ["semantic", "network"])
def test_the_default_fit_reaches_the_best_known_maximum(family, reference):
    gaps, values = _gaps(family, reference)
    assert max(gaps.values()) <= CONVERGENCE_TOLERANCE, gaps
    assert min(gaps.values()) >= -1e-6, gaps  # nothing above the best known: the reference would be stale
    if family == "network":
        # subject 1's likelihood spans only 0.05 log units over B_enc's whole range, so the
        # estimate is checked too (cymr's test allows 0.02)
        best = reference[reference["family"] == family].set_index("unit")["B_enc"]
        for unit, x in values.items():
            assert x[0] == pytest.approx(best[unit], abs=0.01), unit


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["1", pytest.param("2", marks=pytest.mark.xfail(
    strict=True, reason="the default fit ends 0.15 log units below a narrow maximum that 2 of 64 searches found"))])
def test_the_default_cmr2_fit_reaches_the_best_known_maximum(unit, reference):
    """One subject at a time (a subject's fit does not depend on the others fitted with it)."""
    ex = fit_examples.example("cmr2")
    rows = ex.data[ex.data["subject"].astype(str) == unit]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        fits = cmr.fit_cmr2(rows, ex.spec, session="session", progress=False)
    best = reference[(reference["family"] == "cmr2") & (reference["unit"] == unit)]["logl"].item()
    gap = best - fit_points(ex, fits)[unit][0]
    assert -1e-6 <= gap <= CONVERGENCE_TOLERANCE, gap


def test_the_examples_are_the_documented_ones():
    semantic = fit_examples.example("semantic")
    assert semantic.free == ("B_enc", "T", "Sff") and semantic.units == ("pooled",)
    cmr2 = fit_examples.example("cmr2")
    assert cmr2.free == ("B_enc", "B_distract", "C_thresh") and cmr2.units == ("1", "2")
    network = fit_examples.example("network")
    assert network.free == ("B_enc",) and network.bounds == ((0.0, 1.0),)
    with pytest.raises(ParameterError, match=r"no documented fitting example of family 'cmr3'; known: semantic, "
                                             r"cmr2, network"):
        fit_examples.example("cmr3")


def test_the_network_example_is_cymrs_sample1():
    theirs = require("cymr.fit").sample_data("sample1")
    theirs["list"] = theirs["subject"]
    ours = fit_examples.sample1()
    for column in ours.columns:
        np.testing.assert_array_equal(ours[column].to_numpy(), theirs[column].to_numpy())
