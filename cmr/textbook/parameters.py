"""Parameters of textbook CMR, named as in cymr (Morton & Polyn 2016).

Each parameter has an admissible range (where the model is defined; values outside raise
:class:`~cmr.errors.ParameterError`), a default (the cymr ``Morton2013_mixed`` example set)
and a typical search range for maximum-likelihood fits. See docs/parameters.md for the
table mapping these names to cymr's and jaxcmr's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..checks import shown
from ..deprecation import keyword_only
from ..errors import ParameterError

__all__ = [
    "ParameterSpec",
    "PARAMETER_NAMES",
    "PARAMETER_SPECS",
    "SEMANTIC_PARAMETER_NAMES",
    "SEMANTIC_PARAMETER_SPECS",
    "MODEL_PARAMETER_NAMES",
    "default_parameters",
    "validate_parameters",
    "read_parameters",
    "parameter_vector",
    "fit_bounds",
]


@dataclass(frozen=True)
class ParameterSpec:
    """One CMR parameter: admissible closed range, default and typical search range."""

    name: str
    lower: float
    upper: float
    default: float
    fit_lower: float
    fit_upper: float
    description: str

    def check(self, raw, *, model: str = "CMR") -> float:
        """``raw`` as a float in the admissible range; ParameterError naming ``model`` and the range otherwise."""
        bounds = _bounds_text(self)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ParameterError(
                f"{model} parameter {self.name} must be a real number in {bounds}; got {shown(raw)}"
            ) from None
        if isinstance(raw, (bool, np.bool_)) or math.isnan(value) or not self.lower <= value <= self.upper:
            raise ParameterError(f"{model} parameter {self.name} must be in {bounds}; got {shown(raw)}")
        return value


# Order matters: it is the layout of the float64 parameter vector the kernels read.
PARAMETER_SPECS = (
    ParameterSpec("Lfc", 0.0, 1.0, 0.15, 0.0, 1.0, "item-to-context learning rate"),
    ParameterSpec("Lcf", 0.0, 1.0, 0.15, 0.0, 1.0, "context-to-item learning rate (asymptote)"),
    ParameterSpec("P1", 0.0, 100.0, 0.2, 0.0, 10.0, "extra context-to-item learning for the first item"),
    ParameterSpec("P2", 0.0, 100.0, 2.0, 0.1, 5.0, "decay of the primacy gradient over serial positions"),
    ParameterSpec("B_enc", 0.0, 1.0, 0.7, 0.0, 1.0, "context drift rate during study"),
    ParameterSpec("B_start", 0.0, 1.0, 0.3, 0.0, 1.0, "reinstatement of start-of-list context before recall"),
    ParameterSpec("B_rec", 0.0, 1.0, 0.9, 0.0, 1.0, "context drift rate after each recall"),
    ParameterSpec("T", 1e-6, 100.0, 0.1, 0.01, 1.0, "choice temperature of exp(2 a / T)"),
    ParameterSpec("X1", 0.0, 1.0, 0.001, 0.0, 0.2, "probability of stopping before the first recall"),
    ParameterSpec("X2", 0.0, 10.0, 0.25, 0.0, 2.0, "growth of the stop probability per output position"),
    ParameterSpec("Afc", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental item-to-context weight, all units"),
    ParameterSpec("Acf", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental context-to-item weight, all units"),
    ParameterSpec("Dfc", 0.0, 10.0, 0.85, 0.0, 1.0, "pre-experimental item-to-context weight, own unit"),
    ParameterSpec("Dcf", 0.0, 10.0, 0.85, 0.0, 1.0, "pre-experimental context-to-item weight, own unit"),
)

PARAMETER_NAMES = tuple(spec.name for spec in PARAMETER_SPECS)

# Weights of item patterns (cymr's ``sem`` and ``vector`` patterns; Polyn, Norman & Kahana 2009;
# Morton & Polyn 2016). Optional: a parameter set without them has them at 0, which is localist CMR.
SEMANTIC_PARAMETER_SPECS = (
    ParameterSpec("Sfc", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental item-to-context weight of semantic similarity"),
    ParameterSpec("Scf", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental context-to-item weight of semantic similarity"),
    ParameterSpec("Sff", 0.0, 100.0, 0.0, 0.0, 5.0, "direct item-to-item cue of the last recall, times similarity"),
    ParameterSpec("Cfc", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental item-to-context weight of feature units"),
    ParameterSpec("Ccf", 0.0, 10.0, 0.0, 0.0, 1.0, "pre-experimental context-to-item weight of feature units"),
)
SEMANTIC_PARAMETER_NAMES = tuple(spec.name for spec in SEMANTIC_PARAMETER_SPECS)

#: every parameter name, in the order of the kernels' float64 vector (19 values)
MODEL_PARAMETER_NAMES = PARAMETER_NAMES + SEMANTIC_PARAMETER_NAMES
_SPEC_BY_NAME = {spec.name: spec for spec in PARAMETER_SPECS + SEMANTIC_PARAMETER_SPECS}


def default_parameters(*, semantic: bool = False) -> dict[str, float]:
    """A new dict of the default parameter values (cymr's Morton2013_mixed example).

    With ``semantic=True`` the five pattern weights (all 0) are included too.
    """
    specs = PARAMETER_SPECS + (SEMANTIC_PARAMETER_SPECS if semantic else ())
    return {spec.name: spec.default for spec in specs}


def _bounds_text(spec: ParameterSpec) -> str:
    return f"[{spec.lower:g}, {spec.upper:g}]"


def validate_parameters(params: Mapping[str, float], *, partial: bool = False) -> dict[str, float]:
    """Check names and values; return a new dict of plain floats.

    Parameters
    ----------
    params : mapping of str to float
        Parameter values in cymr's names.
    partial : bool
        If True, names may be missing (e.g. fixed parameters of a fit); otherwise all 14
        parameters of localist CMR are required. The pattern weights
        (``SEMANTIC_PARAMETER_NAMES``) are always optional: a missing one is 0.

    Raises
    ------
    ParameterError
        For an unknown name, a missing name (unless ``partial``), a value that is not a real
        number, NaN, or a value outside the admissible range; the message names the
        parameter and its bounds. Also when ``Afc + Dfc == 0`` (item input to context would
        be the zero vector, so context could not keep unit length).
    """
    if not isinstance(params, Mapping):
        raise ParameterError(f"parameters must be a mapping of name to value; got {type(params).__name__}")
    unknown = sorted(set(params) - set(MODEL_PARAMETER_NAMES))
    if unknown:
        raise ParameterError(
            f"unknown CMR parameter(s) {', '.join(map(repr, unknown))}; known: {', '.join(MODEL_PARAMETER_NAMES)}"
        )
    missing = [name for name in PARAMETER_NAMES if name not in params]
    if missing and not partial:
        raise ParameterError(
            "missing CMR parameter(s): "
            + ", ".join(f"{name} (bounds {_bounds_text(_SPEC_BY_NAME[name])})" for name in missing)
        )
    clean = {}
    for name in MODEL_PARAMETER_NAMES:
        if name not in params:
            continue
        clean[name] = _SPEC_BY_NAME[name].check(params[name])
    if "Afc" in clean and "Dfc" in clean and clean["Afc"] + clean["Dfc"] <= 0:
        raise ParameterError(
            "CMR parameters Afc and Dfc (bounds [0, 10]) must not both be 0: an item would give "
            f"context no input; got Afc={clean['Afc']!r}, Dfc={clean['Dfc']!r}"
        )
    return clean


def parameter_vector(params: Mapping[str, float]) -> np.ndarray:
    """Validate a full parameter set and pack it as the kernels' float64 vector, shape (19,).

    The order is ``MODEL_PARAMETER_NAMES``; missing pattern weights are 0.
    """
    clean = validate_parameters(params)
    return np.array([clean.get(name, 0.0) for name in MODEL_PARAMETER_NAMES], dtype=np.float64)


@keyword_only
def fit_bounds(names, *, bounds: Mapping[str, tuple[float, float]] | None = None) -> list[tuple[float, float]]:
    """Search bounds for the free parameters ``names``: typical ranges unless overridden.

    Raises ParameterError for unknown names or bounds outside the admissible range.
    """
    bounds = dict(bounds or {})
    unknown = sorted((set(names) | set(bounds)) - set(MODEL_PARAMETER_NAMES))
    if unknown:
        raise ParameterError(
            f"unknown CMR parameter(s) {', '.join(map(repr, unknown))}; known: {', '.join(MODEL_PARAMETER_NAMES)}"
        )
    out = []
    for name in names:
        spec = _SPEC_BY_NAME[name]
        low, high = bounds.get(name, (spec.fit_lower, spec.fit_upper))
        low, high = float(low), float(high)
        if not (spec.lower <= low < high <= spec.upper):
            raise ParameterError(
                f"search bounds for CMR parameter {name} must satisfy {spec.lower:g} <= low < high <= "
                f"{spec.upper:g} (bounds {_bounds_text(spec)}); got ({low!r}, {high!r})"
            )
        out.append((low, high))
    return out


def read_parameters(path) -> dict:
    """Parameter values from a JSON file: one object ``{"name": value, ...}``, or one such object per subject.

    The values are returned as written (check them with :func:`validate_parameters`, or let the
    function that uses them do so).

    Raises
    ------
    DataSourceError
        No file at ``path``, a special file or one over the cap (:func:`cmr.files.check_input_file`).
    FileFormatError
        The file is not JSON.
    ParameterError
        The JSON is not an object.
    """
    from ..checks import parse_json
    from ..errors import DataSourceError, FileFormatError
    from ..files import check_input_file

    path = check_input_file(path, "parameter file", kind="json")
    try:
        text = path.read_text()
    except OSError as exc:
        raise DataSourceError(f"cannot read parameter file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise FileFormatError(f"parameter file {str(path)!r} is not valid JSON: {exc}") from None
    params = parse_json(text, f"parameter file {str(path)!r}")
    if not isinstance(params, dict):
        raise ParameterError(f"{str(path)!r} must hold one JSON object of name: value; got {type(params).__name__}")
    return params
