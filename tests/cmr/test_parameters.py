"""CMR parameter validation: typed errors that name the parameter and its bounds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cmr.errors import ParameterError
from cmr.textbook.parameters import (
    PARAMETER_NAMES,
    PARAMETER_SPECS,
    default_parameters,
    fit_bounds,
    parameter_vector,
    validate_parameters,
)


def test_names_match_cymr_and_defaults_are_valid():
    assert PARAMETER_NAMES == ("Lfc", "Lcf", "P1", "P2", "B_enc", "B_start", "B_rec", "T", "X1", "X2",
                               "Afc", "Acf", "Dfc", "Dcf")
    vector = parameter_vector(default_parameters())
    assert vector.dtype == np.float64 and vector.shape == (19,)  # 14 + the five pattern weights (0)
    for spec in PARAMETER_SPECS:
        assert spec.lower <= spec.fit_lower < spec.fit_upper <= spec.upper
        assert spec.lower <= spec.default <= spec.upper


@pytest.mark.parametrize("name", PARAMETER_NAMES)
def test_outside_bounds_names_parameter_and_bounds(name):
    spec = dict((s.name, s) for s in PARAMETER_SPECS)[name]
    params = default_parameters()
    params[name] = spec.upper + 1.0
    with pytest.raises(ParameterError, match=rf"{name} must be in \[{spec.lower:g}, {spec.upper:g}\]"):
        validate_parameters(params)
    params[name] = spec.lower - 1.0
    with pytest.raises(ParameterError, match=name):
        validate_parameters(params)


@pytest.mark.parametrize("bad", [math.nan, "abc", None, True])
def test_nan_and_non_numbers_raise(bad):
    params = default_parameters()
    params["T"] = bad
    with pytest.raises(ParameterError, match=r"T must be .*\[1e-06, 100\]"):
        validate_parameters(params)


def test_unknown_and_missing_names():
    params = default_parameters()
    params["beta"] = 0.5
    with pytest.raises(ParameterError, match="unknown CMR parameter.*'beta'"):
        validate_parameters(params)
    params = default_parameters()
    del params["B_rec"]
    with pytest.raises(ParameterError, match=r"missing CMR parameter.*B_rec \(bounds \[0, 1\]\)"):
        validate_parameters(params)
    assert "B_rec" not in validate_parameters(params, partial=True)


def test_zero_item_input_is_rejected_and_errors_are_value_errors():
    params = dict(default_parameters(), Afc=0.0, Dfc=0.0)
    with pytest.raises(ValueError, match="Afc and Dfc"):
        validate_parameters(params)
    with pytest.raises(ParameterError, match="mapping"):
        validate_parameters([("T", 1.0)])


def test_validation_does_not_mutate_input():
    params = default_parameters()
    params["T"] = np.float32(0.5)
    before = dict(params)
    clean = validate_parameters(params)
    assert params == before and type(clean["T"]) is float


def test_fit_bounds():
    assert fit_bounds(["B_enc", "T"]) == [(0.0, 1.0), (0.01, 1.0)]
    assert fit_bounds(["T"], bounds={"T": (0.05, 2)}) == [(0.05, 2.0)]
    with pytest.raises(ParameterError, match=r"T must satisfy 1e-06 <= low < high <= 100"):
        fit_bounds(["T"], bounds={"T": (0.0, 2)})
    with pytest.raises(ParameterError, match="unknown"):
        fit_bounds(["gamma"])
