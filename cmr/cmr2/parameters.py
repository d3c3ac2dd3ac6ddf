"""Parameters of CMR2 (Lohnas, Polyn & Kahana 2015): textbook CMR's 14 plus two of its own.

The 14 textbook parameters keep cymr's names and bounds (:mod:`cmr.textbook.parameters`);
CMR2 adds ``B_distract``, the context disruption at the start of every list after the first,
and ``C_thresh``, the context-similarity threshold of the post-retrieval check. See docs/cmr2.md.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import xarray as xr

from ..errors import ParameterError
from ..schema import validate
from ..textbook.parameters import PARAMETER_NAMES as TEXTBOOK_NAMES
from ..textbook.parameters import ParameterSpec
from ..textbook.parameters import default_parameters as textbook_defaults
from ..textbook.parameters import validate_parameters as validate_textbook

__all__ = ["CMR2_PARAMETER_NAMES", "CMR2_PARAMETER_SPECS", "default_cmr2_parameters", "validate_cmr2_parameters",
           "cmr2_parameter_vector", "cmr2_parameter_table", "parameters_of_fit"]

#: the two parameters CMR2 adds to textbook CMR, in the order of the kernels' vector
CMR2_PARAMETER_SPECS = (
    ParameterSpec("B_distract", 0.0, 1.0, 0.9, 0.0, 1.0,
                  "context disruption at the start of each list after the first (an orthogonal distractor)"),
    ParameterSpec("C_thresh", 0.0, 1.0, 0.0, 0.0, 0.5,
                  "a retrieved item is reported only if c . c_in of the item >= C_thresh"),
)
_SPECS = {spec.name: spec for spec in CMR2_PARAMETER_SPECS}

#: every CMR2 parameter, in the order of the kernels' float64 vector (16 values)
CMR2_PARAMETER_NAMES = TEXTBOOK_NAMES + tuple(_SPECS)


def default_cmr2_parameters() -> dict[str, float]:
    """A new dict of CMR2 parameters: textbook CMR's defaults, ``B_distract=0.9``, ``C_thresh=0``."""
    return {**textbook_defaults(), **{spec.name: spec.default for spec in CMR2_PARAMETER_SPECS}}


def validate_cmr2_parameters(params: Mapping[str, float]) -> dict[str, float]:
    """Check names and values of a full CMR2 parameter set; return a new dict of plain floats.

    Raises
    ------
    ParameterError
        A name that is not a CMR2 parameter, a missing one, a value that is not a real number,
        NaN, or outside its bounds; the message names the parameter and its bounds.
    """
    if not isinstance(params, Mapping):
        raise ParameterError(f"CMR2 parameters must be a mapping of name to value; got {type(params).__name__}")
    unknown = sorted(set(params) - set(CMR2_PARAMETER_NAMES), key=str)
    if unknown:
        raise ParameterError(f"unknown CMR2 parameter(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(CMR2_PARAMETER_NAMES)}")
    missing = [name for name in CMR2_PARAMETER_NAMES if name not in params]
    if missing:
        raise ParameterError(f"missing CMR2 parameter(s): {', '.join(missing)} "
                             "(cmr.default_cmr2_parameters() gives a full set)")
    clean = validate_textbook({name: params[name] for name in TEXTBOOK_NAMES})
    for name, spec in _SPECS.items():
        clean[name] = spec.check(params[name], model="CMR2")
    return clean


def cmr2_parameter_vector(params: Mapping[str, float]) -> np.ndarray:
    """Validate a full CMR2 parameter set and pack it as the kernels' float64 vector, shape (16,)."""
    clean = validate_cmr2_parameters(params)
    return np.array([clean[name] for name in CMR2_PARAMETER_NAMES], dtype=np.float64)


def parameters_of_fit(params):
    """A ``recall_fit`` dataset as a mapping (of subject label to set, or one pooled set); other
    values unchanged."""
    if not isinstance(params, xr.Dataset):
        return params
    validate(params, "recall_fit")
    names = [str(p) for p in params["parameter"].values]
    value = params["value"]
    if value.dims == ("parameter",):
        return dict(zip(names, map(float, value.values)))
    if set(value.dims) != {"subject", "parameter"}:
        raise ParameterError(f"a recall_fit used as CMR2 parameters needs dims (subject, parameter) or (parameter,); "
                             f"got {value.dims}")
    table = value.transpose("subject", "parameter").values
    return {label: dict(zip(names, map(float, row))) for label, row in zip(params["subject"].values.tolist(), table)}


def cmr2_parameter_table(params, subjects) -> tuple[np.ndarray, np.ndarray]:
    """Parameter vectors (K, 16) and the row each of ``subjects`` uses.

    ``params`` is one full parameter set for everyone, a mapping of subject label to a full
    set (every subject in ``subjects`` needs one; labels compare as text, so 1 and "1" match),
    or a ``recall_fit`` dataset of CMR2 (:func:`cmr.fit_cmr2`; per subject, or one pooled set).
    """
    params = parameters_of_fit(params)
    subjects = np.asarray(subjects)
    if isinstance(params, Mapping) and params and all(isinstance(v, Mapping) for v in params.values()):
        by_text = {str(label): label for label in params}
        labels = list(dict.fromkeys(str(s) for s in subjects.tolist()))
        missing = [label for label in labels if label not in by_text]
        if missing:
            raise ParameterError(f"no CMR2 parameters for subject(s) {', '.join(missing[:5])}; "
                                 f"got parameters for {', '.join(list(by_text)[:5])}"
                                 f"{' ...' if len(by_text) > 5 else ''}")
        table = np.stack([cmr2_parameter_vector(params[by_text[label]]) for label in labels])
        row = {label: k for k, label in enumerate(labels)}
        return table, np.array([row[str(s)] for s in subjects.tolist()], dtype=np.int64)
    return cmr2_parameter_vector(params)[None, :], np.zeros(subjects.size, dtype=np.int64)
