"""One fit for heads and humans: CMR lag profiles matched to any lag-profile dataset.

:func:`fit_profiles` fits every unit of a ``lag_profile`` dataset (human subjects, attention
heads, anything along the batch dims) against a grid of CMR profiles (a ``lag_profile`` dataset
whose batch dims are CMR parameters, ``unit_kind="cmr_parameters"``), by the CMR distance of
``d = mean_lag((fitted - y)^2) / var_lag(y)``, and fits the fair Gaussian baseline
next to it. The computation goes through ``xarray.apply_ufunc`` with core dim ``lag``, so
dask-backed (chunked) inputs are fitted chunk by chunk, in parallel or on a cluster, with
results identical to the in-process path. See docs/fitting.md for the equations.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import xarray as xr

from . import deprecation
from . import _profile_fit as kernels
from .checks import lag_window, seed_of, shown
from .constants import PAPER_LAGS, RECALL_LAGS
from .criteria import aic_bic, least_squares_logl
from .deprecation import keyword_only
from .errors import ParameterError, ProfileError, SchemaError
from .schema import batch_dims, provenance_attrs, validate

__all__ = ["fit_profiles", "fitting_lags", "ProfileWarning", "N_PARAMETERS_GAUSSIAN", "GAUSSIAN_PARAMETERS", "information_criteria"]

#: free parameters of the Gaussian baseline (a, b, mu, sigma)
N_PARAMETERS_GAUSSIAN = 4
GAUSSIAN_PARAMETERS = ("a", "b", "mu", "sigma")
#: grid profile kinds that are probability distributions over lags: renormalised over the window
PROBABILITY_KINDS = ("cmr_mc_crp", "cmr_tf_prob", "lag_crp", "soft_lag_crp", "attention_prob")


class ProfileWarning(UserWarning):
    """Some units could not be fitted and got NaN results (``invalid="nan"``)."""


def information_criteria(rss, n_lag: int, n_parameters: int):
    """Deprecated: ``cmr.aic_bic(cmr.least_squares_logl(rss, n_lag), n_parameters, n_lag)``."""
    deprecation.warn("cmr.information_criteria(rss, n_lag, n_parameters) is deprecated and will be removed in the "
                    "next release; use cmr.aic_bic(cmr.least_squares_logl(rss, n_lag), n_parameters, n_lag)")
    return aic_bic(least_squares_logl(rss, n_lag), n_parameters, n_lag)


def fit_profiles(
    profiles: xr.Dataset,
    grid: xr.Dataset,
    *,
    objective: str = "paper",
    lags=None,
    refine=None,
    gaussian: bool = True,
    n_bootstrap: int = 0,
    rng=0,
    ci: float = 0.95,
    renormalize="auto",
    invalid: str = "raise",
    variable: str = "profile",
) -> xr.Dataset:
    """Fit CMR (and a Gaussian baseline) to every unit of a lag-profile dataset.

    Parameters
    ----------
    profiles : xarray.Dataset
        ``lag_profile`` dataset; units are all dims of ``profiles[variable]`` except ``lag``
        (``subject``; ``model, checkpoint, layer, head``; anything). May be dask-backed.
    grid : xarray.Dataset
        ``lag_profile`` dataset with ``unit_kind="cmr_parameters"``, whose batch dims are CMR
        parameters with numeric coords (e.g. ``beta_enc, beta_rec, gamma``).
    objective : {"paper", "lsq"}
        ``paper``: the study's min/max-matched map (gain = range of the unit / range of the CMR
        profile, offset matching the minima), grid search only. ``lsq``: least-squares affine
        map with gain >= 0, best grid point, then (``refine``) continuous refinement.
    lags : None, int or sequence of int
        The fitting window; both datasets must contain every lag. Default (None): by the kind of
        profile (:func:`fitting_lags`): -5..-1, 1..5 for a recall lag-CRP (``profile_kind``
        ``"lag_crp"``, undefined at lag 0), else -5..+5 (the study's).
    refine : None, bool or callable
        For ``lsq`` only (default True there, False for ``paper``). True: compass search over
        the multilinear interpolant of the grid, from the best grid point, within the grid's
        bounds. A callable ``profile_fn(**params) -> ndarray (n_lag,)`` (e.g. teacher-forced
        CMR profiles over ``lags``) is refined instead with bounded scipy Powell.
    gaussian : bool or {"fair", "study"}
        Also fit ``a + b exp(-(lag-mu)^2/(2 sigma^2))``. ``True``/``"fair"`` (the default): least
        squares with ``b >= 0``, ``mu`` in the window, ``0.1 <= sigma <= 2 * width`` from many
        starts; ``"study"``: the study's own procedure (unbounded ``curve_fit`` with ``mu``
        started at the peak *value*, a flat line at the lag-0 value when it fails), to reproduce
        its numbers only. See docs/fitting.md.
    n_bootstrap, rng, ci : int, int or Generator, float
        If ``n_bootstrap > 0``, percentile intervals (level ``ci``) of distance, gain and grid
        parameters from refits of ``profile + sem * z`` (``z`` standard normal per lag, drawn
        once from ``numpy.random.default_rng(seed)`` with the seed ``rng`` (a Generator draws
        one) and shared by all units, so results do not depend on chunking). Needs variable
        ``sem``.
    renormalize : "auto" or bool
        Divide each grid profile by its sum over the window (the study cuts its 17-lag CMR
        distribution to -5..+5 and renormalises). "auto": if the grid's ``profile_kind`` is a
        probability (cmr_mc_crp, cmr_tf_prob, ...). Only the gain and the CMR curve depend on it.
    invalid : {"raise", "nan"}
        Units with some NaN lags or zero variance: raise :class:`ProfileError`, or give NaN
        results with a :class:`ProfileWarning`. Units that are NaN at every lag (padding, e.g.
        models with fewer layers) always give NaN results without a warning.
    variable : str
        The variable of ``profiles`` to fit.

    Returns
    -------
    xarray.Dataset
        A ``profile_fit`` dataset (docs/schema.md) with the units' dims plus ``parameter``,
        ``gaussian_parameter``, ``lag`` (the window) and, with bootstrap, ``bound``.
    """
    if objective not in ("paper", "lsq"):
        raise ParameterError(f"objective must be 'paper' or 'lsq'; got {objective!r}")
    if invalid not in ("raise", "nan"):
        raise ParameterError(f"invalid must be 'raise' or 'nan'; got {invalid!r}")
    gaussian = _gaussian_procedure(gaussian)
    if refine is None:
        refine = objective == "lsq"
    if refine is not False and objective == "paper":
        raise ParameterError("refine applies to objective 'lsq' only; the 'paper' objective is the study's grid search")
    if not (0.0 < ci < 1.0):
        raise ParameterError(f"ci must be in (0, 1); got {shown(ci)}")
    if int(n_bootstrap) < 0:
        raise ParameterError(f"n_bootstrap must be >= 0; got {shown(n_bootstrap)}")
    window = fit_window(fitting_lags(profiles, lags=lags, variable=variable))
    seed = seed_of(rng)
    values = profiles_window(profiles, variable, window)
    param_dims, axes, grid_rows = grid_window(grid, window, renormalize)
    renormalized = bool(wants_renormalize(grid, renormalize))

    inputs = [values]
    n_bootstrap = int(n_bootstrap)
    if n_bootstrap > 0:
        if "sem" not in profiles:
            raise SchemaError("bootstrap intervals need variable 'sem' in the profiles; it is absent")
        inputs.append(profiles["sem"].sel(lag=list(window)))
    noise = np.random.default_rng(seed).standard_normal((n_bootstrap, len(window)))

    layout = _Layout(param_dims, n_bootstrap > 0)
    options = dict(
        lags=np.asarray(window, dtype=np.float64), grid_rows=grid_rows, axes=axes, objective=objective,
        refine=refine, gaussian=gaussian, noise=noise, ci=ci, invalid=invalid, layout=layout,
    )
    chunked = values.chunks is not None
    if chunked:
        inputs = [x.chunk({"lag": -1}) for x in inputs]
    fields, curves = xr.apply_ufunc(
        _fit_block,
        *inputs,
        input_core_dims=[["lag"]] * len(inputs),
        output_core_dims=[["field"], ["curve", "lag"]],
        kwargs=options,
        dask="parallelized",
        output_dtypes=[np.float64, np.float64],
        dask_gufunc_kwargs={"output_sizes": {"field": layout.n_fields, "curve": 2}},
    )
    return _assemble(values, fields, curves, layout, window, grid, objective, refine, gaussian, n_bootstrap,
                     seed, ci, renormalized, profiles)


# --- validation -------------------------------------------------------------------------------


def _gaussian_procedure(gaussian):
    """``False`` (no baseline), ``"fair"`` (default) or ``"study"``; True means ``"fair"``."""
    if gaussian is True or gaussian == "fair":
        return "fair"
    if gaussian is False or gaussian is None:
        return False
    if gaussian == "study":
        return "study"
    raise ParameterError(f"gaussian must be True, False, 'fair' or 'study'; got {gaussian!r}")


def fit_window(lags) -> tuple:
    window = lag_window(lags)
    if window.size < 3:
        raise ProfileError(f"a fit needs at least 3 lags; got {window.tolist()}")
    return tuple(int(v) for v in window)


@keyword_only
def fitting_lags(profiles, *, lags=None, variable: str = "profile"):
    """The lags to fit a lag-profile dataset on: ``lags``, or the default for its kind of profile.

    Parameters
    ----------
    profiles : xarray.Dataset
        A ``lag_profile`` dataset; its ``profile_kind`` attribute picks the default.
    lags : None, int or sequence of int
        None: :data:`cmr.RECALL_LAGS` (-5..-1, 1..5) for a recall lag-CRP (``profile_kind``
        ``"lag_crp"``: no transition has lag 0), else :data:`cmr.PAPER_LAGS` (-5..+5, the
        study's window). Anything else is returned as given.
    variable : str
        The variable of ``profiles`` that will be fitted.

    Raises
    ------
    ProfileError
        When ``lags`` include 0 for a recall lag-CRP whose ``variable`` is undefined (NaN) at
        lag 0 for every unit: no unit could be fitted on that window.
    """
    recall = getattr(profiles, "attrs", {}).get("profile_kind") == "lag_crp"
    if isinstance(lags, Iterator):  # a one-shot iterator is read once, here
        lags = tuple(lags)
    if lags is None:
        return RECALL_LAGS if recall else PAPER_LAGS
    if recall and _includes_zero(lags) and _undefined_at_zero(profiles, variable):
        raise ProfileError(
            f"the profiles are a recall lag-CRP, which is undefined at lag 0 (no transition has lag 0): "
            f"fit lags without 0, e.g. {list(RECALL_LAGS)} (the default for a recall lag-CRP)"
        )
    return lags


def _includes_zero(lags) -> bool:
    """Whether a lag window (an int K for -K..K, or a sequence) includes lag 0; malformed windows are left to
    :func:`fit_window` to refuse."""
    try:
        return bool(0 in lag_window(lags))
    except (ParameterError, ProfileError):
        return False


def _undefined_at_zero(profiles, variable: str) -> bool:
    """Whether ``profiles[variable]`` is NaN at lag 0 for every unit (as every recall lag-CRP is)."""
    if variable not in profiles or "lag" not in profiles.coords or 0 not in profiles["lag"].values:
        return False
    return bool(profiles[variable].sel(lag=0).isnull().all())


def _missing_lags(ds, window):
    have = set(np.asarray(ds["lag"].values).tolist())
    return [lag for lag in window if lag not in have]


def profiles_window(profiles, variable, window) -> xr.DataArray:
    validate(profiles, "lag_profile")
    if variable not in profiles:
        raise SchemaError(f"profiles have no variable {variable!r}; variables: {', '.join(map(str, profiles.data_vars))}")
    missing = _missing_lags(profiles, window)
    if missing:
        raise ProfileError(
            f"the fitting window {window[0]}..{window[-1]} needs lags the profiles lack: {missing}; "
            f"profile lags are {np.asarray(profiles['lag'].values).tolist()}"
        )
    values = profiles[variable].sel(lag=list(window))
    if not np.issubdtype(values.dtype, np.floating):
        values = values.astype(np.float64)
    return values


def wants_renormalize(grid, renormalize) -> bool:
    if renormalize == "auto":
        return grid.attrs.get("profile_kind") in PROBABILITY_KINDS
    if isinstance(renormalize, (bool, np.bool_)):
        return bool(renormalize)
    raise ParameterError(f"renormalize must be 'auto', True or False; got {renormalize!r}")


def grid_window(grid, window, renormalize):
    """Validate the grid; return parameter dims, (values per dim) and rows (n_point, n_lag)."""
    validate(grid, "lag_profile")
    if grid.attrs.get("unit_kind") != "cmr_parameters":
        raise SchemaError(
            f"a CMR grid needs attr unit_kind='cmr_parameters'; got {grid.attrs.get('unit_kind')!r}"
        )
    param_dims = batch_dims(grid["profile"])
    if not param_dims:
        raise SchemaError("the CMR grid has no parameter dims; expected e.g. beta_enc, beta_rec, gamma")
    for dim in param_dims:
        if dim not in grid.coords or not np.issubdtype(grid[dim].dtype, np.number):
            raise SchemaError(f"the CMR grid's parameter dim {dim!r} needs a numeric coordinate; it has none")
        if len(np.unique(grid[dim].values)) != grid.sizes[dim]:
            raise SchemaError(f"the CMR grid's coordinate {dim!r} has repeated values")
    missing = _missing_lags(grid, window)
    if missing:
        raise ProfileError(
            f"the fitting window {window[0]}..{window[-1]} does not match the grid: it lacks lags {missing}; "
            f"grid lags are {np.asarray(grid['lag'].values).tolist()}"
        )
    ordered = grid["profile"].sortby(list(param_dims)).sel(lag=list(window)).transpose(*param_dims, "lag")
    cube = np.asarray(ordered.values, dtype=np.float64)
    if not np.isfinite(cube).all():
        raise ProfileError("the CMR grid has NaN or infinite values inside the fitting window")
    if wants_renormalize(grid, renormalize):
        total = cube.sum(axis=-1, keepdims=True)
        if not (total > 0).any():
            raise ProfileError("cannot renormalise the CMR grid: every profile sums to <= 0 over the window")
        # grid points with no mass in the window (e.g. all of it at lag 0) become flat: never chosen
        cube = np.where(total > 0, cube / np.where(total > 0, total, 1.0), 0.0)
    axes = tuple(np.asarray(ordered[dim].values, dtype=np.float64) for dim in param_dims)
    return param_dims, axes, np.ascontiguousarray(cube.reshape(-1, len(window)))


# --- the per-block computation (runs on dask workers for chunked input) ------------------------


class _Layout:
    """Positions of the scalar results along the packed ``field`` axis."""

    def __init__(self, param_dims, bootstrap: bool):
        self.param_dims = tuple(param_dims)
        n_dim = len(param_dims)
        names = ["distance", "gain", "offset", "grid_distance", "rss", "gaussian_distance", "gaussian_rss"]
        names += [f"parameter:{d}" for d in param_dims] + [f"grid_parameter:{d}" for d in param_dims]
        names += [f"edge:{d}" for d in param_dims]
        names += [f"gaussian:{p}" for p in GAUSSIAN_PARAMETERS]
        if bootstrap:
            for bound in ("lower", "upper"):
                names += [f"distance_ci:{bound}", f"gain_ci:{bound}"]
                names += [f"parameter_ci:{d}:{bound}" for d in param_dims]
        self.names = tuple(names)
        self.index = {name: i for i, name in enumerate(names)}
        self.n_fields = len(names)
        self.n_dim = n_dim


def _fit_block(values, *rest, lags, grid_rows, axes, objective, refine, gaussian, noise, ci, invalid, layout):
    shape = values.shape[:-1]
    n_lag = values.shape[-1]
    flat = np.ascontiguousarray(values.reshape(-1, n_lag), dtype=np.float64)
    sem = np.ascontiguousarray(rest[0].reshape(-1, n_lag), dtype=np.float64) if rest else None
    fields = np.full((flat.shape[0], layout.n_fields), np.nan)
    curves = np.full((flat.shape[0], 2, n_lag), np.nan)

    finite = np.isfinite(flat).all(axis=1)
    padding = np.isnan(flat).all(axis=1)
    with np.errstate(invalid="ignore"):
        constant = finite & ~(flat.var(axis=1) > 0)
    bad = (~finite & ~padding) | constant
    if bad.any():
        message = (
            f"{int((~finite & ~padding).sum())} unit(s) with NaN or infinite lags and {int(constant.sum())} "
            "constant (zero-variance) unit(s) cannot be fitted: the CMR distance divides by the variance over lags"
        )
        if 0 in lags and np.isnan(flat[~padding][:, lags == 0]).any():
            message += " (lag-CRPs of recall data are undefined at lag 0: fit lags without 0, e.g. -5..-1 and 1..5)"
        if invalid == "raise":
            raise ProfileError(message + "; pass invalid='nan' to get NaN results for them instead")
        warnings.warn(message + "; their results are NaN", ProfileWarning, stacklevel=2)
    good = np.flatnonzero(finite & ~constant)
    if good.size:
        _fit_units(flat[good], None if sem is None else sem[good], good, fields, curves, lags, grid_rows, axes,
                   objective, refine, gaussian, noise, ci, layout)
    return fields.reshape(*shape, layout.n_fields), curves.reshape(*shape, 2, n_lag)


def _grid_points(best, axes):
    idx = np.unravel_index(best, tuple(len(a) for a in axes))
    return np.stack([axes[d][idx[d]] for d in range(len(axes))], axis=1)


def _fit_units(y, sem, rows, fields, curves, lags, grid_rows, axes, objective, refine, gaussian, noise, ci, layout):
    ix = layout.index
    n_lag = y.shape[1]
    best = kernels.best_grid_point(y, grid_rows, objective)
    gain, offset, fitted, distance = kernels.affine_map(y, grid_rows[best], objective)
    grid_points = _grid_points(best, axes)
    fields[rows, ix["grid_distance"]] = distance
    for d, dim in enumerate(layout.param_dims):
        fields[rows, ix[f"grid_parameter:{dim}"]] = grid_points[:, d]
    points = grid_points.copy()
    if refine is not False:
        points, chosen = _refine(y, grid_points, grid_rows, axes, refine, layout.param_dims)
        r_gain, r_offset, r_fitted, r_distance = kernels.affine_map(y, chosen, "lsq")
        better = r_distance < distance  # guard against rounding: never worse than the grid point
        gain = np.where(better, r_gain, gain)
        offset = np.where(better, r_offset, offset)
        fitted = np.where(better[:, None], r_fitted, fitted)
        distance = np.where(better, r_distance, distance)
        points = np.where(better[:, None], points, grid_points)
    fields[rows, ix["distance"]] = distance
    fields[rows, ix["gain"]] = gain
    fields[rows, ix["offset"]] = offset
    fields[rows, ix["rss"]] = distance * n_lag * y.var(axis=1)
    for d, dim in enumerate(layout.param_dims):
        fields[rows, ix[f"parameter:{dim}"]] = points[:, d]
        tolerance = 1e-9 * max(axes[d][-1] - axes[d][0], 1.0)  # on the grid's lowest or highest value
        fields[rows, ix[f"edge:{dim}"]] = (points[:, d] <= axes[d][0] + tolerance) | (points[:, d] >= axes[d][-1] - tolerance)
    curves[rows, 0] = fitted
    if gaussian:
        g_params, g_dist = (_study_gaussian if gaussian == "study" else _gaussian_baseline)(lags, y)
        with np.errstate(over="ignore", invalid="ignore"):  # the study's unbounded fits can overflow
            curves[rows, 1] = np.stack([kernels.gaussian_curve(lags, p) for p in g_params])
        for i, name in enumerate(GAUSSIAN_PARAMETERS):
            fields[rows, ix[f"gaussian:{name}"]] = g_params[:, i]
        fields[rows, ix["gaussian_distance"]] = g_dist
        fields[rows, ix["gaussian_rss"]] = g_dist * n_lag * y.var(axis=1)
    if noise.shape[0]:
        _bootstrap(y, sem, rows, fields, grid_rows, axes, objective, noise, ci, layout)


def _gaussian_baseline(lags, y):
    """Gaussian baseline: variable-projection lattice + compass search, then scipy polish.

    The lattice over (mu, log sigma) contains the peak lag, so the study's suggested start
    (peak lag, min, range) is among the starts; the bounded scipy ``least_squares`` polish
    is kept only where it lowers the distance.
    """
    width = float(lags[-1] - lags[0])
    params, _ = kernels.fit_gaussians(lags, y, kernels.SIGMA_LOW, 2.0 * width, 4 * int(width) + 1, 16, 1e-4)
    distance = kernels.cmr_distance(np.stack([kernels.gaussian_curve(lags, p) for p in params]), y)
    for k in range(y.shape[0]):
        polished = kernels.polish_gaussian(lags, y[k], params[k])
        polished_distance = kernels.cmr_distance(kernels.gaussian_curve(lags, polished), y[k])
        if polished_distance < distance[k]:
            params[k], distance[k] = polished, polished_distance
    return params, distance


def _study_gaussian(lags, y):
    """The study's Gaussian procedure, unit by unit (see :func:`kernels.study_gaussian`)."""
    params = np.stack([kernels.study_gaussian(lags, row)[0] for row in y])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        distance = kernels.cmr_distance(np.stack([kernels.gaussian_curve(lags, p) for p in params]), y)
    return params, distance


def _refine(y, grid_points, grid_rows, axes, refine, param_dims):
    flat_axes, starts, sizes, strides = kernels.grid_layout(axes)
    if refine is True:
        unit_rows = kernels.centred_unit_rows(y)
        points, _ = kernels.refine_lsq(unit_rows, np.ascontiguousarray(grid_points), flat_axes, starts, sizes,
                                       strides, grid_rows, 1e-3, 2000)
        chosen = kernels.interpolate_rows(points, flat_axes, starts, sizes, strides, grid_rows)
        return points, chosen
    if callable(refine):
        return _refine_with_generator(y, grid_points, axes, refine, param_dims)
    raise ParameterError(f"refine must be None, True, False or a callable profile generator; got {refine!r}")


def _refine_with_generator(y, grid_points, axes, profile_fn, param_dims):
    from scipy.optimize import minimize

    bounds = [(float(a[0]), float(a[-1])) for a in axes]
    points = grid_points.copy()
    chosen = np.empty_like(y)
    for k in range(y.shape[0]):
        target = y[k:k + 1]

        def loss(x):
            profile = np.asarray(profile_fn(**dict(zip(param_dims, x))), dtype=np.float64)[None, :]
            return float(kernels.affine_map(target, profile, "lsq")[3][0])

        result = minimize(loss, grid_points[k], method="Powell", bounds=bounds, options={"xtol": 1e-4, "ftol": 1e-10})
        points[k] = result.x
        chosen[k] = np.asarray(profile_fn(**dict(zip(param_dims, result.x))), dtype=np.float64)
    return points, chosen


def _bootstrap(y, sem, rows, fields, grid_rows, axes, objective, noise, ci, layout):
    ix = layout.index
    n_boot = noise.shape[0]
    n_unit = y.shape[0]
    dist = np.empty((n_boot, n_unit))
    gain = np.empty((n_boot, n_unit))
    params = np.empty((n_boot, n_unit, len(axes)))
    for b in range(n_boot):
        sample = y + sem * noise[b]
        best = kernels.best_grid_point(sample, grid_rows, objective)
        g, _, _, d = kernels.affine_map(sample, grid_rows[best], objective)
        dist[b], gain[b], params[b] = d, g, _grid_points(best, axes)
    tail = 100.0 * (1.0 - ci) / 2.0
    for bound, q in (("lower", tail), ("upper", 100.0 - tail)):
        fields[rows, ix[f"distance_ci:{bound}"]] = np.nanpercentile(dist, q, axis=0)
        fields[rows, ix[f"gain_ci:{bound}"]] = np.nanpercentile(gain, q, axis=0)
        for d, dim in enumerate(layout.param_dims):
            fields[rows, ix[f"parameter_ci:{dim}:{bound}"]] = np.percentile(params[:, :, d], q, axis=0)


# --- the output dataset ------------------------------------------------------------------------


def _assemble(values, fields, curves, layout, window, grid, objective, refine, gaussian, n_bootstrap, seed, ci,
              renormalized, profiles):
    def field(name):
        return fields.isel(field=layout.index[name], drop=True)

    unit_dims = [d for d in values.dims if d != "lag"]

    def stack(prefix, names, dim):
        parts = [field(f"{prefix}:{n}") for n in names]
        stacked = xr.concat(parts, dim=dim, coords="minimal", compat="override").assign_coords({dim: list(names)})
        return stacked.transpose(*unit_dims, ...)

    lag = np.asarray(window, dtype=np.int64)
    n_lag = len(window)
    out = xr.Dataset(coords={"lag": lag})
    out["profile"] = values.assign_coords(lag=lag)
    out["fitted"] = curves.isel(curve=0, drop=True).assign_coords(lag=lag)
    for name in ("distance", "gain", "offset", "grid_distance", "rss"):
        out[name] = field(name)
    out["inverse_temperature"] = field("gain")
    out["parameters"] = stack("parameter", layout.param_dims, "parameter")
    out["grid_parameters"] = stack("grid_parameter", layout.param_dims, "parameter")
    out["at_grid_edge"] = stack("edge", layout.param_dims, "parameter").fillna(0).astype(np.int64)
    n_cmr = layout.n_dim + 2
    out["aic"], out["bic"] = _criteria(out["rss"], n_lag, n_cmr)
    if gaussian:
        out["gaussian_fitted"] = curves.isel(curve=1, drop=True).assign_coords(lag=lag)
        out["gaussian_parameters"] = stack("gaussian", GAUSSIAN_PARAMETERS, "gaussian_parameter")
        out["gaussian_distance"] = field("gaussian_distance")
        out["gaussian_rss"] = field("gaussian_rss")
        out["gaussian_aic"], out["gaussian_bic"] = _criteria(out["gaussian_rss"], n_lag, N_PARAMETERS_GAUSSIAN)
    if n_bootstrap:
        for name in ("distance", "gain"):
            out[f"{name}_ci"] = stack(f"{name}_ci", ("lower", "upper"), "bound")
        parts = [stack(f"parameter_ci:{dim}", ("lower", "upper"), "bound") for dim in layout.param_dims]
        out["parameters_ci"] = xr.concat(parts, dim="parameter", coords="minimal", compat="override").assign_coords(
            parameter=list(layout.param_dims)).transpose(*unit_dims, "parameter", "bound")
    _describe(out, objective)
    refine_name = "none" if refine is False else ("grid_interpolation" if refine is True else "generator")
    info = dict(objective=objective, lags=list(window), refine=refine_name, gaussian=int(bool(gaussian)),
                gaussian_procedure=gaussian or "none",
                n_bootstrap=n_bootstrap, seed=int(seed), ci=float(ci), grid_renormalized=int(renormalized),
                grid_provenance=grid.attrs.get("provenance", ""), profiles_provenance=profiles.attrs.get("provenance", ""))
    out.attrs.update(provenance_attrs("profile_fit", "cmr.fit_profiles", **info))
    out.attrs.update(
        objective=objective, refine=refine_name, profile_kind=str(profiles.attrs.get("profile_kind", "")),
        grid_profile_kind=str(grid.attrs.get("profile_kind", "")), grid_renormalized=int(renormalized),
        gaussian_procedure=gaussian or "none", n_parameters_cmr=int(n_cmr),
        n_parameters_gaussian=N_PARAMETERS_GAUSSIAN if gaussian else 0,
        unit_dims=" ".join(d for d in values.dims if d != "lag"),
    )
    if "unit_kind" in profiles.attrs:
        out.attrs["unit_kind"] = profiles.attrs["unit_kind"]
    return validate(out, "profile_fit")


def _criteria(rss, n_lag, n_parameters):
    """AIC and BIC of least-squares fits (:func:`cmr.aic_bic`), lazily for dask-backed ``rss``."""
    return aic_bic(least_squares_logl(rss, n_lag), n_parameters, n_lag)


_DESCRIPTIONS = {
    "profile": "the unit's profile over the fitting window",
    "fitted": "CMR profile after the affine map (gain * cmr + offset)",
    "distance": "CMR distance mean_lag((fitted - profile)^2) / var_lag(profile)",
    "gain": "gain of the affine map (>= 0)",
    "offset": "offset of the affine map",
    "inverse_temperature": "the gain read as an inverse temperature (the study's 1/tau; for a log-support grid the softmax inverse temperature)",
    "grid_distance": "CMR distance at the best grid point, before refinement",
    "rss": "residual sum of squares of the CMR fit",
    "parameters": "fitted CMR parameters",
    "grid_parameters": "best grid point",
    "at_grid_edge": "1 where the fitted parameter is on the edge of the grid (the fit may want a value beyond it)",
    "aic": "AIC = n ln(RSS/n) + 2k of the CMR fit (k = n_parameters_cmr)",
    "bic": "BIC = n ln(RSS/n) + k ln(n) of the CMR fit",
    "gaussian_fitted": "Gaussian baseline a + b exp(-(lag-mu)^2/(2 sigma^2))",
    "gaussian_parameters": "Gaussian baseline parameters a, b, mu, sigma",
    "gaussian_distance": "CMR distance of the Gaussian baseline",
    "gaussian_rss": "residual sum of squares of the Gaussian baseline",
    "gaussian_aic": "AIC of the Gaussian baseline (k = 4)",
    "gaussian_bic": "BIC of the Gaussian baseline (k = 4)",
    "distance_ci": "bootstrap percentile interval of the grid distance (profile + sem * z)",
    "gain_ci": "bootstrap percentile interval of the gain",
    "parameters_ci": "bootstrap percentile interval of the grid parameters",
}


def _describe(out, objective):
    for name, text in _DESCRIPTIONS.items():
        if name in out:
            out[name].attrs["long_name"] = text
    out["distance"].attrs["objective"] = objective
