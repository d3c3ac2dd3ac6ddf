"""The icl-cmr data model: dataset kinds, their validators and provenance attrs.

Every dataset the toolkit writes carries ``attrs["icl_cmr_kind"]`` naming its kind and
``attrs["icl_cmr_schema"]`` (an int version). Dimensions are found by name, never by
position. Attributes are netCDF-safe: str, int, float or 1-d numeric arrays; structured
provenance is stored as a JSON string in ``attrs["provenance"]``. See docs/schema.md.
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import platform
from importlib import metadata

import numpy as np
import pandas as pd
import xarray as xr

from .deprecation import keyword_only
from .errors import SchemaError

__all__ = [
    "KIND_ATTR",
    "SCHEMA_VERSION",
    "provenance_attrs",
    "validate",
    "validate_events",
    "validate_lag_profile",
    "validate_profile_fit",
    "validate_profile_null",
    "validate_recall_stat",
    "validate_recall_fit",
    "validate_recall_cv",
    "validate_model_comparison",
    "validate_predictive_check",
    "validate_cmr_states",
    "validate_circuit_trace",
    "register_kind",
    "known_kinds",
    "check_attrs_netcdf_safe",
    "batch_dims",
    "require_variables",
    "require_dims",
    "check_range",
    "check_counts",
]

KIND_ATTR = "icl_cmr_kind"
SCHEMA_VERSION = 1

_VERSIONED = ("icl-cmr", "numpy", "numba", "scipy", "xarray", "netCDF4")


@functools.lru_cache(maxsize=None)  # metadata lookups cost ~1 ms each; versions do not change in a process
def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def provenance_attrs(kind: str, created_by: str, **info) -> dict:
    """Attrs for a new dataset of ``kind``: kind, schema version and JSON provenance.

    ``info`` holds anything that made the dataset (source, seeds, settings); it must be
    JSON-serialisable. Library versions and the time of creation are added.
    """
    record = {
        "created_by": created_by,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in _VERSIONED},
        **info,
    }
    try:
        text = json.dumps(record, sort_keys=True, default=_json_default)
    except TypeError as exc:
        raise TypeError(f"provenance must be JSON-serialisable: {exc}") from exc
    return {KIND_ATTR: kind, "icl_cmr_schema": SCHEMA_VERSION, "provenance": text}


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


#: attribute values netCDF cannot store exactly
_NETCDF_UNSAFE = (bool, np.bool_, type(None), dict, list, tuple, set)


def check_attrs_netcdf_safe(attrs: dict, where: str) -> None:
    """Raise SchemaError for attrs netCDF cannot store exactly (None, bool, dict, ...)."""
    for key, value in attrs.items():
        if isinstance(value, _NETCDF_UNSAFE):
            raise SchemaError(
                f"{where}: attribute {key!r} must be str, int, float or a numeric array "
                f"(netCDF-safe; store structures as JSON strings); got {type(value).__name__}"
            )


@keyword_only
def batch_dims(ds: xr.Dataset | xr.DataArray, *, core: str = "lag") -> tuple[str, ...]:
    """All dims except the core dim, in the dataset's order."""
    return tuple(d for d in ds.dims if d != core)


# --- validators -----------------------------------------------------------------------


def require_variables(ds, names, kind):
    """SchemaError unless ``ds`` has every variable of ``names`` (``kind`` names the dataset)."""
    variables = ds.variables
    missing = [n for n in names if n not in variables]
    if missing:
        raise SchemaError(
            f"{kind} dataset needs variables {', '.join(names)}; missing: {', '.join(missing)}"
        )


def require_dims(da, dims, kind, name):
    """SchemaError unless variable ``name`` of a ``kind`` dataset has exactly ``dims`` (any order)."""
    if set(da.dims) != set(dims):
        raise SchemaError(
            f"{kind} dataset: variable {name!r} must have dims {tuple(dims)}; got {tuple(da.dims)}"
        )


def validate_events(ds: xr.Dataset) -> None:
    """Check an events dataset (study and recall sequences; see docs/schema.md)."""
    kind = "events"
    require_variables(ds, ["subject", "list", "list_length", "study_item", "recall_item", "recalls"], kind)
    variables = ds.variables  # read directly: every analysis validates its input once
    require_dims(variables["list_length"], ["trial"], kind, "list_length")
    require_dims(variables["study_item"], ["trial", "study_position"], kind, "study_item")
    require_dims(variables["recall_item"], ["trial", "output_position"], kind, "recall_item")
    require_dims(variables["recalls"], ["trial", "output_position"], kind, "recalls")
    if ds.sizes["trial"] == 0:
        raise SchemaError("events dataset has no trials")
    recalls = np.asarray(variables["recalls"].values)
    length = np.asarray(variables["list_length"].values)
    if not np.issubdtype(recalls.dtype, np.integer) or not np.issubdtype(length.dtype, np.integer):
        raise SchemaError(
            f"events dataset: recalls and list_length must be integers; got {recalls.dtype} and {length.dtype}"
        )
    if (length < 1).any() or (length > ds.sizes["study_position"]).any():
        raise SchemaError(
            f"events dataset: list_length must be in 1..{ds.sizes['study_position']}; "
            f"got {length.min()}..{length.max()}"
        )
    if "presentation_item" in variables:
        _check_presentation_items(ds, length)
    if variables["recalls"].dims == ("trial", "output_position") and _recalls_in_order(recalls, length):
        return  # the common case, in a few whole-array passes
    if (recalls < -1).any() or (recalls > length[:, None]).any():
        raise SchemaError(
            "events dataset: recalls must be serial positions 1..list_length, 0 (padding) or -1 (intrusion)"
        )
    padding = recalls == 0
    if (padding[:, :-1] & ~padding[:, 1:]).any():
        trial = int(np.flatnonzero((padding[:, :-1] & ~padding[:, 1:]).any(axis=1))[0])
        raise SchemaError(
            "events dataset: padding (0) must come after the last recall of a trial; "
            f"trial {trial} has recalls after a 0: {recalls[trial].tolist()}"
        )


def _check_presentation_items(ds: xr.Dataset, length: np.ndarray) -> None:
    """SchemaError unless ``presentation_item`` maps each presentation to its item's first serial
    position: a position in 1..itself whose ``study_item`` is the same and which maps to itself, and
    0 beyond ``list_length`` (docs/repetition.md)."""
    variable = ds.variables["presentation_item"]
    require_dims(variable, ["trial", "study_position"], "events", "presentation_item")
    first = np.asarray(variable.transpose("trial", "study_position").values)
    if not np.issubdtype(first.dtype, np.integer):
        raise SchemaError(f"events dataset: presentation_item must be integers; got {first.dtype}")
    position = np.arange(1, first.shape[1] + 1)[None, :]
    inside = position <= length[:, None]
    bad = np.where(inside, (first < 1) | (first > position), first != 0)
    if not bad.any():
        rows = np.arange(first.shape[0])[:, None]
        at = np.maximum(first, 1) - 1
        items = ds.variables["study_item"].transpose("trial", "study_position").values
        bad = inside & ((first[rows, at] != first) | ~_same_items(items[rows, at], items))
        trial, column = np.nonzero(inside & (first == position))  # first presentations: no item twice
        again = pd.DataFrame({"t": trial, "item": items[trial, column].astype(str)}).duplicated().to_numpy()
        bad[trial[again], column[again]] = True
    if bad.any():
        trial = int(np.nonzero(bad.any(axis=1))[0][0])
        items = ds.variables["study_item"].transpose("trial", "study_position").values[trial]
        raise SchemaError(
            "events dataset: presentation_item must give each presentation the serial position of its item's "
            "first presentation (1..list_length, the same study_item, itself a first presentation) and 0 beyond "
            f"list_length; trial {trial} has {first[trial].tolist()} for items {items.tolist()}"
        )


def _same_item_text(a, b) -> bool:
    """Whether two item texts name one item as recalls are matched: as written, ignoring case and
    surrounding spaces, or as equal numbers (``1`` and ``1.0``)."""
    a, b = str(a).strip().casefold(), str(b).strip().casefold()
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _same_items(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise :func:`_same_item_text`; only pairs written differently (rare) are read one by one."""
    same = np.asarray(a == b, dtype=bool)
    for index in zip(*np.nonzero(~same)):
        same[index] = _same_item_text(a[index], b[index])
    return same


def _recalls_in_order(recalls, length) -> bool:
    """Whether every recall lies in -1..list_length and no recall follows padding (0) in its trial.

    True proves the recalls valid; False sends them through the row-by-row checks, which name
    the fault. Contiguous passes only: a recall after padding is a 0 -> nonzero step within a
    row, and the steps of the flattened matrix are those plus the ones across row ends.
    """
    if recalls.size == 0:
        return True
    if recalls.min() < -1 or recalls.max() > length.min():
        return False
    filled = np.ascontiguousarray(recalls != 0)
    flat = filled.ravel()
    steps_up = np.count_nonzero(flat[1:] > flat[:-1])
    steps_up_across_rows = np.count_nonzero(filled[1:, 0] > filled[:-1, -1])
    return steps_up == steps_up_across_rows


def validate_lag_profile(ds: xr.Dataset) -> None:
    """Check a lag-profile dataset (humans and heads alike; see docs/schema.md)."""
    kind = "lag_profile"
    require_variables(ds, ["profile", "lag"], kind)
    if "lag" not in ds["profile"].dims:
        raise SchemaError(f"lag_profile dataset: 'profile' needs dim 'lag'; got {ds['profile'].dims}")
    lags = np.asarray(ds["lag"].values)
    if not np.issubdtype(lags.dtype, np.integer) or (np.diff(lags) <= 0).any():
        raise SchemaError("lag_profile dataset: coord 'lag' must be strictly increasing integers")
    if "profile_kind" not in ds.attrs:
        raise SchemaError("lag_profile dataset needs attr 'profile_kind'")
    for name in ("sem", "actual", "possible"):
        if name in ds and tuple(ds[name].dims) != tuple(ds["profile"].dims):
            raise SchemaError(
                f"lag_profile dataset: {name!r} must have the dims of 'profile' {ds['profile'].dims}; "
                f"got {ds[name].dims}"
            )
    for name in ds.data_vars:
        if name == "sem" or name.endswith("_sem") or name.startswith("sem_") or name in LAG_PROFILE_COUNTS:
            check_range(ds, name, 0.0, np.inf, kind)
        elif name in LAG_PROFILE_PROBABILITIES:
            check_range(ds, name, 0.0, 1.0, kind)
    # a lag-CRP made from counts is a probability (one labelled so by hand, without counts, is left alone)
    profile_kind = ds.attrs.get("profile_kind")
    if profile_kind in PROBABILITY_PROFILES and (profile_kind not in ("lag_crp", "lag_crp_compound") or "possible" in ds):
        check_range(ds, "profile", 0.0, 1.0, kind)
    if "copying_score" in ds:
        check_range(ds, "copying_score", -1.0, 1.0, kind)
    for actual, possible in (("actual", "possible"), ("soft_actual", "soft_possible")):
        if actual in ds and possible in ds:
            check_counts(ds, actual, possible, kind)


#: profile kinds whose ``profile`` is a probability (a lag-CRP, a distribution over lags)
PROBABILITY_PROFILES = ("lag_crp", "lag_crp_compound", "cmr_mc_crp", "cmr_tf_prob", "attention_prob", "soft_lag_crp")
#: lag-profile variables that are counts or sums of non-negative numbers
LAG_PROFILE_COUNTS = ("actual", "possible", "n_samples", "soft_actual", "soft_possible")
#: lag-profile variables that are probabilities
LAG_PROFILE_PROBABILITIES = (
    "prob_profile", "soft_crp", "induction_score", "duplicate_token_score", "previous_token_score",
)
# float32 forward passes (softmax, sums of attention) can overshoot a bound by a few ulps
_BOUND_SLACK = 1e-6


def check_range(ds: xr.Dataset, name: str, low: float, high: float, kind: str) -> None:
    """Every non-NaN value of ``ds[name]`` must lie in ``[low, high]``; a :class:`SchemaError` otherwise."""
    variable = ds.variables.get(name) if isinstance(ds, xr.Dataset) else None  # no DataArray to build
    values = np.asarray((ds[name] if variable is None else variable).values)
    if values.dtype.kind not in "biuf" or values.size == 0:
        return
    slack = _BOUND_SLACK * max(1.0, abs(low) if np.isfinite(low) else 1.0, abs(high) if np.isfinite(high) else 1.0)
    with np.errstate(invalid="ignore"):
        outside = (values < low - slack) | (values > high + slack)
    if bool(outside.any()):
        bad = values[outside]
        raise SchemaError(
            f"{kind} dataset: {name!r} must lie in [{low:g}, {high:g}]; got {int(outside.sum())} values outside, "
            f"e.g. {bad.flat[0]!r} (a damaged or hand-edited file?)"
        )


def check_counts(ds: xr.Dataset, actual: str, possible: str, kind: str) -> None:
    """``0 <= ds[actual] <= ds[possible]`` wherever both are defined."""
    with np.errstate(invalid="ignore"):
        over = np.asarray(ds[actual].values > ds[possible].values * (1 + _BOUND_SLACK))
    if bool(over.any()):
        raise SchemaError(
            f"{kind} dataset: {actual!r} must not exceed {possible!r}; got {int(over.sum())} cells where it does "
            "(a damaged or hand-edited file?)"
        )


def validate_profile_fit(ds: xr.Dataset) -> None:
    """Check a profile-fit dataset (CMR fits of lag profiles; see docs/schema.md)."""
    kind = "profile_fit"
    require_variables(ds, ["profile", "fitted", "distance", "gain", "offset", "parameters", "lag"], kind)
    for name in ("profile", "fitted"):
        if "lag" not in ds[name].dims:
            raise SchemaError(f"profile_fit dataset: {name!r} needs dim 'lag'; got {ds[name].dims}")
    if "parameter" not in ds["parameters"].dims:
        raise SchemaError(f"profile_fit dataset: 'parameters' needs dim 'parameter'; got {ds['parameters'].dims}")
    if ds.attrs.get("objective") not in ("paper", "lsq"):
        raise SchemaError(f"profile_fit dataset needs attr objective 'paper' or 'lsq'; got {ds.attrs.get('objective')!r}")
    check_range(ds, "distance", 0.0, np.inf, kind)


def validate_recall_stat(ds: xr.Dataset) -> None:
    """Check a recall-statistics dataset (SPC, PNR/PFR, lag rank; see docs/schema.md)."""
    if "stat_kind" not in ds.attrs:
        raise SchemaError("recall_stat dataset needs attr 'stat_kind' (e.g. 'spc', 'pfr', 'lag_rank')")
    if not ds.data_vars:
        raise SchemaError("recall_stat dataset has no data variables")
    if "actual" in ds or "possible" in ds:
        require_variables(ds, ["actual", "possible"], "recall_stat")
        actual, possible = ds.variables["actual"], ds.variables["possible"]
        if tuple(actual.dims) != tuple(possible.dims):
            raise SchemaError(f"recall_stat dataset: 'actual' dims {actual.dims} differ from 'possible' dims {possible.dims}")
        if not (np.issubdtype(actual.dtype, np.integer) and np.issubdtype(possible.dtype, np.integer)):
            raise SchemaError(f"recall_stat dataset: counts must be integers; got {actual.dtype} and {possible.dtype}")
        if bool((actual.values < 0).any()) or bool((actual.values > possible.values).any()):
            raise SchemaError("recall_stat dataset: counts must satisfy 0 <= actual <= possible")
    if "prob" in ds:
        check_range(ds, "prob", 0.0, 1.0, "recall_stat")


def validate_recall_fit(ds: xr.Dataset) -> None:
    """Check a recall_fit dataset (maximum-likelihood CMR fits per subject; docs/schema.md)."""
    kind = "recall_fit"
    require_variables(ds, ["value", "logl", "n", "parameter", "free"], kind)
    if "parameter" not in ds["value"].dims:
        raise SchemaError(f"recall_fit dataset: 'value' needs dim 'parameter'; got {ds['value'].dims}")
    units = tuple(d for d in ds["value"].dims if d != "parameter")
    for name in ("logl", "n"):
        require_dims(ds[name], units, kind, name)
    require_dims(ds["free"], ["parameter"], kind, "free")
    if not np.issubdtype(np.asarray(ds["n"].values).dtype, np.integer):
        raise SchemaError(f"recall_fit dataset: 'n' must be integers; got {ds['n'].dtype}")


def validate_recall_cv(ds: xr.Dataset) -> None:
    """Check a recall_cv dataset (leave-lists-out cross-validated likelihood; docs/schema.md)."""
    kind = "recall_cv"
    require_variables(ds, ["logl", "n", "fold_logl", "fold_n", "subject", "fold"], kind)
    require_dims(ds["logl"], ["subject"], kind, "logl")
    require_dims(ds["fold_logl"], ["subject", "fold"], kind, "fold_logl")
    if "k" not in ds.attrs:
        raise SchemaError("recall_cv dataset needs attr 'k' (free parameters)")


def validate_model_comparison(ds: xr.Dataset) -> None:
    """Check a model_comparison dataset (CMR variants on the same subjects; docs/schema.md)."""
    kind = "model_comparison"
    require_variables(ds, ["logl", "aic", "bic", "k", "model", "akaike_weight"], kind)
    for name in ("logl", "aic", "bic"):
        require_dims(ds[name], ["model", "subject"], kind, name)
    require_dims(ds["k"], ["model"], kind, "k")
    if ds.attrs.get("criterion") not in ("aic", "cv_logl"):
        raise SchemaError(f"model_comparison dataset needs attr criterion 'aic' or 'cv_logl'; got {ds.attrs.get('criterion')!r}")


def validate_predictive_check(ds: xr.Dataset) -> None:
    """Check a predictive_check dataset (data against model curves; docs/schema.md)."""
    kind = "predictive_check"
    require_variables(ds, ["crp", "spc", "pfr", "crp_group", "spc_group", "pfr_group", "source"], kind)
    require_dims(ds["crp"], ["source", "subject", "lag"], kind, "crp")
    for name in ("spc", "pfr"):
        require_dims(ds[name], ["source", "subject", "serial_position"], kind, name)
    if sorted(map(str, ds["source"].values)) != ["data", "model"]:
        raise SchemaError(f"predictive_check dataset: coord 'source' must be data, model; got {ds['source'].values}")


def validate_cmr_states(ds: xr.Dataset) -> None:
    """Check a cmr_states dataset (recorded context and supports; docs/schema.md)."""
    kind = "cmr_states"
    require_variables(ds, ["study_context", "cue_context", "support", "probability", "stop_probability"], kind)
    require_dims(ds["study_context"], ["trial", "study_position", "unit"], kind, "study_context")
    require_dims(ds["cue_context"], ["trial", "event", "unit"], kind, "cue_context")
    require_dims(ds["support"], ["trial", "event", "study_position"], kind, "support")


def validate_profile_null(ds: xr.Dataset) -> None:
    """Check a profile_null dataset (nulls of the CMR distance; docs/schema.md)."""
    kind = "profile_null"
    require_variables(ds, ["distance", "p_permuted", "p_smooth", "p_value", "threshold", "beyond_chance"], kind)
    for name in ("alpha", "n_null", "objective"):
        if name not in ds.attrs:
            raise SchemaError(f"profile_null dataset needs attr {name!r}")


def validate_circuit_trace(ds: xr.Dataset) -> None:
    """Check a circuit_trace dataset (CMR run as an attention circuit; docs/schema.md)."""
    kind = "circuit_trace"
    require_variables(ds, ["score", "support", "probability", "context", "cue_position"], kind)
    for name in ("score", "support", "probability"):
        require_dims(ds[name], ["step", "study_position"], kind, name)
    require_dims(ds["context"], ["step", "unit"], kind, "context")


_VALIDATORS = {
    "circuit_trace": validate_circuit_trace,
    "events": validate_events,
    "profile_null": validate_profile_null,
    "recall_cv": validate_recall_cv,
    "model_comparison": validate_model_comparison,
    "predictive_check": validate_predictive_check,
    "cmr_states": validate_cmr_states,
    "lag_profile": validate_lag_profile,
    "recall_fit": validate_recall_fit,
    "recall_stat": validate_recall_stat,
    "profile_fit": validate_profile_fit,
}

#: entry-point group through which other packages register dataset kinds (name = kind,
#: value = "module:validator"); looked up only when a dataset of an unknown kind comes in
KIND_ENTRY_POINTS = "cmr.dataset_kinds"


def register_kind(kind: str, validator) -> None:
    """Register the validator of a dataset kind defined outside ``cmr``.

    ``validator(ds)`` raises :class:`SchemaError` for a malformed dataset. Packages can also
    declare kinds as entry points in the group ``cmr.dataset_kinds``, so a file of their kind
    loads before they are imported.
    """
    if not isinstance(kind, str) or not kind or not callable(validator):
        raise SchemaError(f"register_kind needs a kind name and a callable validator; got {kind!r}, {validator!r}")
    if kind in _VALIDATORS and _VALIDATORS[kind] is not validator:
        raise SchemaError(f"dataset kind {kind!r} is already registered")
    _VALIDATORS[kind] = validator


def known_kinds() -> tuple[str, ...]:
    """Every dataset kind with a validator (built in, registered or declared as an entry point)."""
    return tuple(sorted(set(_VALIDATORS) | {ep.name for ep in metadata.entry_points(group=KIND_ENTRY_POINTS)}))


def _validator(kind: str):
    if kind not in _VALIDATORS:
        for entry in metadata.entry_points(group=KIND_ENTRY_POINTS):
            if entry.name == kind:
                try:
                    register_kind(kind, entry.load())
                except ImportError as exc:
                    raise SchemaError(
                        f"dataset kind {kind!r} is defined by {entry.value!r}, which cannot be imported ({exc})"
                    ) from exc
                break
    if kind not in _VALIDATORS:
        raise SchemaError(f"unknown dataset kind {kind!r}; known: {', '.join(known_kinds())}")
    return _VALIDATORS[kind]


def validate(ds: xr.Dataset, kind: str | None = None) -> xr.Dataset:
    """Validate ``ds`` against the schema of its kind (or of ``kind``); return it unchanged."""
    if not isinstance(ds, xr.Dataset):
        raise SchemaError(f"expected an xarray.Dataset; got {type(ds).__name__}")
    got = ds.attrs.get(KIND_ATTR)
    if got is None:
        raise SchemaError(f"dataset has no {KIND_ATTR!r} attribute; it was not made by icl-cmr")
    if kind is not None and got != kind:
        raise SchemaError(f"expected a {kind!r} dataset; got {got!r}")
    validator = _validator(got)
    check_attrs_netcdf_safe(ds.attrs, got)
    for name, var in ds.variables.items():
        attrs = var.attrs
        if attrs:
            for value in attrs.values():
                if isinstance(value, _NETCDF_UNSAFE):  # the message is built only here
                    check_attrs_netcdf_safe(attrs, f"{got}.{name}")
    validator(ds)
    return ds
