"""The shared argument checks (cmr.checks), the one AIC/BIC (cmr.criteria), and that no layer
writes its own integer check."""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import cmr
from cmr import checks
from cmr.criteria import aic_bic, least_squares_logl
from cmr.errors import ParameterError, SchemaError
from icl_cmr.adapters.errors import PromptError
from tests.conftest import REPO_ROOT


# --- the checkers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 7, -3, np.int64(5), np.uint8(2), np.int32(-1)])
def test_is_integer_takes_python_and_numpy_integers(value):
    assert checks.is_integer(value)


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 1.0, np.float64(2.0), "3", None, [1], np.array(4)])
def test_is_integer_refuses_bools_floats_strings_and_arrays(value):
    assert not checks.is_integer(value)


def test_integer_returns_a_python_int_within_its_bounds():
    value = checks.integer(np.int64(4), "n", minimum=2, maximum=4)
    assert value == 4 and type(value) is int
    assert checks.integer(-5, "shift", minimum=None) == -5
    assert checks.integer(3, "n", minimum=None, maximum=3) == 3


@pytest.mark.parametrize("value, bounds, message", [
    (0, {}, "n must be an integer >= 1; got 0"),
    (2.0, {}, "n must be an integer >= 1; got 2.0"),
    (True, {"minimum": 0}, "n must be an integer >= 0; got True"),
    (5, {"minimum": 0, "maximum": 4}, r"n must be an integer in 0\.\.4; got 5"),
    (5, {"minimum": None, "maximum": 4}, "n must be an integer <= 4; got 5"),
    ("1", {"minimum": None}, "n must be an integer; got '1'"),
])
def test_integer_says_what_it_expected_and_what_came_in(value, bounds, message):
    with pytest.raises(ParameterError, match=f"^{message}$"):
        checks.integer(value, "n", **bounds)


def test_integer_raises_the_error_type_it_is_given():
    with pytest.raises(PromptError, match="n_words must be an integer >= 2; got 1"):
        checks.integer(1, "n_words", minimum=2, error=PromptError)
    with pytest.raises(SchemaError):
        checks.integer(None, "attr 'layer'", minimum=None, error=SchemaError)


def test_index_accepts_exactly_0_to_size_minus_1():
    assert [checks.index(i, "head", 3) for i in (0, 1, 2)] == [0, 1, 2]
    assert type(checks.index(np.int64(2), "head", 3)) is int
    for bad in (-1, 3, 1.0, True):
        with pytest.raises(ParameterError, match=r"head must be an integer in 0\.\.2; got"):
            checks.index(bad, "head", 3)


def test_the_rng_checks_keep_their_meaning():
    generator = np.random.default_rng(3)
    assert checks.as_generator(generator) is generator
    assert checks.as_generator(5).integers(1000) == np.random.default_rng(5).integers(1000)
    assert checks.seed_of(np.int64(9)) == 9
    with pytest.raises(ParameterError, match="rng"):
        checks.as_generator(-1)
    with pytest.raises(ParameterError, match="rng"):
        checks.as_generator("seed")


# --- one integer check, used everywhere -----------------------------------------------------------

_INTEGER_TYPES = {"np.integer", "numpy.integer", "numbers.Integral", "Integral"}


def _class_names(node) -> list[str]:
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return [ast.unparse(item) for item in items]


def _hand_written_integer_checks(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """``isinstance(x, int)`` alone, or an isinstance naming numpy's or numbers' integer types."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            names = _class_names(node.args[1])
            if names == ["int"] or _INTEGER_TYPES & set(names):
                found.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_upper_layer_writes_its_own_integer_check():
    """Every layer checks integers with cmr.checks (is_integer, integer, index), so the rules
    (bools refused, numpy integers taken) and the messages are those of one module."""
    offences = []
    for folder in ("cmr", "adapters", "analyses"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path != REPO_ROOT / "cmr" / "checks.py":
                offences += _hand_written_integer_checks(path)
    assert offences == []


def test_the_integer_check_scan_finds_a_hand_written_check(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("import numpy as np\nok = isinstance(3, (int, float))\nbad = isinstance(3, (int, np.integer))\n"
                    "also_bad = isinstance(3, int)\n")
    assert [line.split()[0] for line in _hand_written_integer_checks(path, tmp_path)] == ["probe.py:3", "probe.py:4"]


def test_the_checks_module_does_not_hide_a_flat_api_name():
    """A module of cmr named like a name of the flat API would replace that name once imported."""
    modules = {path.stem for path in (REPO_ROOT / "cmr").glob("*.py")} | \
              {path.name for path in (REPO_ROOT / "cmr").iterdir() if (path / "__init__.py").is_file()}
    clashes = [name for name in cmr.__all__ if name in modules and not isinstance(getattr(cmr, name), type(cmr))]
    assert clashes == []
    assert cmr.checks is checks and "checks" in cmr.__all__


# --- one AIC and BIC ------------------------------------------------------------------------------

def test_aic_bic_is_the_textbook_formula():
    aic, bic = aic_bic(-10.0, 2, 20)
    assert aic == 24.0 and bic == pytest.approx(2 * np.log(20) + 20.0)
    aic, bic = aic_bic(np.array([-1.0, -2.0]), np.array([[1], [3]]), np.array([5, 6]))
    assert aic.shape == bic.shape == (2, 2)
    np.testing.assert_allclose(bic, [[np.log(5) + 2, np.log(6) + 4], [3 * np.log(5) + 2, 3 * np.log(6) + 4]])


def test_a_least_squares_fit_gets_n_log_rss_over_n_plus_the_penalty():
    rss, n, k = 0.37, 11, 4
    aic, bic = aic_bic(least_squares_logl(rss, n), k, n)
    assert aic == pytest.approx(n * np.log(rss / n) + 2 * k)
    assert bic == pytest.approx(n * np.log(rss / n) + k * np.log(n))
    assert np.isfinite(least_squares_logl(0.0, n))  # a perfect fit: RSS floored, finite criteria


def test_aic_bic_stays_lazy_on_chunked_data():
    pytest.importorskip("dask")
    rss = xr.DataArray(np.linspace(0.1, 2.0, 12), dims="unit").chunk(5)
    aic, bic = aic_bic(least_squares_logl(rss, 11), 4, 11)
    assert aic.chunks is not None
    eager = aic_bic(least_squares_logl(rss.values, 11), 4, 11)
    assert np.array_equal(aic.values, eager[0]) and np.array_equal(bic.values, eager[1])


def test_the_old_criteria_names_warn_and_give_the_same_numbers():
    from cmr.textbook.fit import information_criteria_recall

    rss = np.array([0.0, 0.2, 3.5])
    with pytest.warns(DeprecationWarning, match="cmr.aic_bic"):
        old = cmr.information_criteria(rss, 11, 4)
    new = aic_bic(least_squares_logl(rss, 11), 4, 11)
    assert all(np.array_equal(a, b) for a, b in zip(old, new))
    logl, n = np.array([-50.0, -70.5]), np.array([40, 52])
    with pytest.warns(DeprecationWarning, match="cmr.aic_bic"):
        old = information_criteria_recall(logl, 3, n)
    assert all(np.array_equal(a, b) for a, b in zip(old, aic_bic(logl, 3, n)))


def test_the_new_criteria_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aic_bic(least_squares_logl(1.0, 11), 4, 11)
