"""Kernels for fitting lag profiles against a grid of CMR profiles (no validation here).

Array layer for :mod:`cmr.profile_fit`: plain C-contiguous float64/int64 arrays in, arrays out.
Units are rows of ``profiles`` (n_unit, n_lag); grid points are rows of ``grid`` (n_point, n_lag).

Two affine maps from a grid profile ``c`` to a unit's profile ``y``:

- ``paper`` (the study's min/max match): ``fitted = (c - min c) * gain + min y`` with
  ``gain = (max y - min y) / (max c - min c)``;
- ``lsq``: least squares with ``gain >= 0``; then ``d = 1 - max(0, r)^2`` with ``r`` the
  Pearson correlation of ``c`` and ``y`` over the lags, which turns the grid search into one
  matrix product.

Both use the distance ``d = mean_lag((fitted - y)^2) / var_lag(y)`` (population variance).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT

# entries of one (units x grid points) distance block; bounds memory to about 64 MB
BLOCK_ENTRIES = 8_000_000


def centred_unit_rows(grid: np.ndarray) -> np.ndarray:
    """Centred rows scaled to unit norm; constant rows become zeros (correlation 0)."""
    centred = grid - grid.mean(axis=1, keepdims=True)
    norm = np.sqrt((centred**2).sum(axis=1, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norm > 0, centred / norm, 0.0)
    return np.ascontiguousarray(out)


def _minmax_rows(grid: np.ndarray) -> np.ndarray:
    """Rows mapped to [0, 1] by their min and max; constant rows become NaN (never chosen)."""
    low = grid.min(axis=1, keepdims=True)
    span = grid.max(axis=1, keepdims=True) - low
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(span > 0, (grid - low) / span, np.nan)
    return np.ascontiguousarray(out)


def _block_size(n_point: int) -> int:
    return max(1, BLOCK_ENTRIES // max(1, n_point))


def best_grid_point(profiles: np.ndarray, grid: np.ndarray, objective: str) -> np.ndarray:
    """Index (into the grid's rows) of the best grid point of each unit, shape (n_unit,).

    ``profiles`` must be finite with positive variance. Ties go to the first grid point in
    C order, as ``np.argmin`` over the study's (beta_enc, beta_rec, gamma) array does.
    """
    n_unit = profiles.shape[0]
    best = np.empty(n_unit, dtype=np.int64)
    step = _block_size(grid.shape[0])
    if objective == "lsq":
        grid_rows = centred_unit_rows(grid)
        unit_rows = centred_unit_rows(profiles)
        for start in range(0, n_unit, step):
            corr = unit_rows[start:start + step] @ grid_rows.T
            best[start:start + step] = np.argmax(corr, axis=1)
        return best
    # paper: both sides on [0, 1]; d = mean((C - a)^2) / var(a), expanded into a product
    grid_rows = _minmax_rows(grid)
    valid = np.isfinite(grid_rows).all(axis=1)
    grid_rows = np.where(valid[:, None], grid_rows, 0.0)
    grid_sq = np.where(valid, (grid_rows**2).sum(axis=1), np.inf)
    unit_rows = _minmax_rows(profiles)
    for start in range(0, n_unit, step):
        rows = unit_rows[start:start + step]
        sq_dist = grid_sq[None, :] - 2.0 * (rows @ grid_rows.T) + (rows**2).sum(axis=1)[:, None]
        best[start:start + step] = np.argmin(sq_dist, axis=1)
    return best


def affine_map(profiles: np.ndarray, chosen: np.ndarray, objective: str):
    """Gain, offset, fitted profiles and distances for chosen grid profiles, row by row.

    Parameters
    ----------
    profiles, chosen : ndarray, shape (n_unit, n_lag)
        Unit profiles and the CMR profile matched to each.

    Returns
    -------
    gain, offset, distance : ndarray, shape (n_unit,)
    fitted : ndarray, shape (n_unit, n_lag)
    """
    if objective == "paper":
        low_c = chosen.min(axis=1)
        gain = (profiles.max(axis=1) - profiles.min(axis=1)) / (chosen.max(axis=1) - low_c)
        offset = profiles.min(axis=1) - gain * low_c
    else:
        c_mean = chosen.mean(axis=1)
        y_mean = profiles.mean(axis=1)
        c_cent = chosen - c_mean[:, None]
        ss_c = (c_cent**2).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = np.where(ss_c > 0, (c_cent * (profiles - y_mean[:, None])).sum(axis=1) / ss_c, 0.0)
        gain = np.maximum(gain, 0.0)
        offset = y_mean - gain * c_mean
    fitted = chosen * gain[:, None] + offset[:, None]
    distance = cmr_distance(fitted, profiles)
    return gain, offset, fitted, distance


def cmr_distance(fitted: np.ndarray, profiles: np.ndarray) -> np.ndarray:
    """``mean_lag((fitted - y)^2) / var_lag(y)`` row by row (population variance)."""
    return ((fitted - profiles) ** 2).mean(axis=-1) / profiles.var(axis=-1)


# --- continuous refinement on the multilinear interpolant of the grid -------------------


@njit(**JIT)
def _interpolate(point, axes, axis_start, axis_size, strides, grid, out):
    """Multilinear interpolation of the grid rows at ``point`` (n_dim,) into ``out`` (n_lag,)."""
    n_dim = point.shape[0]
    lower = np.empty(n_dim, dtype=np.int64)
    frac = np.empty(n_dim)
    for d in range(n_dim):
        start = axis_start[d]
        size = axis_size[d]
        if size == 1:
            lower[d] = 0
            frac[d] = 0.0
            continue
        i = 0
        while i < size - 2 and axes[start + i + 1] <= point[d]:
            i += 1
        lower[d] = i
        t = (point[d] - axes[start + i]) / (axes[start + i + 1] - axes[start + i])
        frac[d] = min(1.0, max(0.0, t))
    out[:] = 0.0
    for corner in range(1 << n_dim):
        weight = 1.0
        row = 0
        for d in range(n_dim):
            if (corner >> d) & 1:
                weight *= frac[d]
                row += (lower[d] + 1) * strides[d]
            else:
                weight *= 1.0 - frac[d]
                row += lower[d] * strides[d]
        if weight == 0.0:
            continue
        for k in range(out.shape[0]):
            out[k] += weight * grid[row, k]


@njit(**JIT)
def _lsq_distance(unit_row, profile):
    """``1 - max(0, r)^2`` for a centred unit-norm ``unit_row`` and any ``profile``."""
    n = profile.shape[0]
    mean = 0.0
    for k in range(n):
        mean += profile[k]
    mean /= n
    ss = 0.0
    cross = 0.0
    for k in range(n):
        c = profile[k] - mean
        ss += c * c
        cross += c * unit_row[k]
    if ss <= 0.0 or cross <= 0.0:
        return 1.0
    r = cross / np.sqrt(ss)
    return 1.0 - r * r


@njit(**JIT)
def refine_lsq(unit_rows, start_points, axes, axis_start, axis_size, strides, grid, rel_tol, max_eval):
    """Compass search of the lsq distance over the grid's multilinear interpolant.

    Parameters
    ----------
    unit_rows : (n_unit, n_lag) centred, unit-norm profiles
    start_points : (n_unit, n_dim) parameter values to start from (best grid points)
    axes : (sum of axis sizes,) increasing parameter values of every axis, concatenated
    axis_start, axis_size, strides : (n_dim,) int64 layout of ``axes`` and of the grid rows
    grid : (n_point, n_lag) grid profiles in C order of the axes
    rel_tol : smallest step as a fraction of each axis' mean spacing
    max_eval : cap on interpolant evaluations per unit

    Returns
    -------
    points : (n_unit, n_dim) refined parameters; distance : (n_unit,) their lsq distance
    """
    n_unit, n_lag = unit_rows.shape
    n_dim = start_points.shape[1]
    points = start_points.copy()
    distance = np.empty(n_unit)
    low = np.empty(n_dim)
    high = np.empty(n_dim)
    spacing = np.empty(n_dim)
    for d in range(n_dim):
        low[d] = axes[axis_start[d]]
        high[d] = axes[axis_start[d] + axis_size[d] - 1]
        spacing[d] = (high[d] - low[d]) / (axis_size[d] - 1) if axis_size[d] > 1 else 0.0
    profile = np.empty(n_lag)
    trial = np.empty(n_dim)
    step = np.empty(n_dim)
    for u in range(n_unit):
        x = points[u]
        _interpolate(x, axes, axis_start, axis_size, strides, grid, profile)
        best = _lsq_distance(unit_rows[u], profile)
        for d in range(n_dim):
            step[d] = 0.5 * spacing[d]
        n_eval = 1
        while n_eval < max_eval:
            active = False
            move_d = -1
            move_to = 0.0
            move_best = best
            for d in range(n_dim):
                if step[d] < rel_tol * spacing[d] or spacing[d] == 0.0:
                    continue
                active = True
                for sign in (-1.0, 1.0):
                    value = min(high[d], max(low[d], x[d] + sign * step[d]))
                    if value == x[d]:
                        continue
                    for e in range(n_dim):
                        trial[e] = x[e]
                    trial[d] = value
                    _interpolate(trial, axes, axis_start, axis_size, strides, grid, profile)
                    n_eval += 1
                    dist = _lsq_distance(unit_rows[u], profile)
                    if dist < move_best - 1e-14:  # a real improvement, not rounding noise
                        move_best = dist
                        move_d = d
                        move_to = value
            if not active:
                break
            if move_d >= 0:
                x[move_d] = move_to
                best = move_best
                step[move_d] = min(2.0 * step[move_d], 0.5 * spacing[move_d])
            else:
                for d in range(n_dim):
                    step[d] *= 0.5
        distance[u] = best
    return points, distance


@njit(**JIT)
def interpolate_rows(points, axes, axis_start, axis_size, strides, grid):
    """Interpolated grid profiles at ``points`` (n, n_dim) -> (n, n_lag)."""
    out = np.empty((points.shape[0], grid.shape[1]))
    for i in range(points.shape[0]):
        _interpolate(points[i], axes, axis_start, axis_size, strides, grid, out[i])
    return out


# --- the Gaussian baseline ----------------------------------------------------------------


def gaussian_curve(lags, params):
    """``a + b * exp(-(lag - mu)^2 / (2 sigma^2))`` for ``params = (a, b, mu, sigma)``."""
    a, b, mu, sigma = params
    return a + b * np.exp(-((lags - mu) ** 2) / (2.0 * sigma**2))


def polish_gaussian(lags, profile, start):
    """Bounded scipy least-squares polish of a Gaussian fit from ``start = (a, b, mu, sigma)``.

    Bounds as in :func:`fit_gaussians`: ``b >= 0``, ``mu`` within the window,
    ``sigma`` in [0.1, 2 * window width]. Returns the polished parameters (4,).
    """
    from scipy.optimize import least_squares

    width = float(lags[-1] - lags[0])
    low = np.array([-np.inf, 0.0, lags[0], SIGMA_LOW])
    high = np.array([np.inf, np.inf, lags[-1], 2.0 * width])
    span = profile.max() - profile.min()
    scale = span if span > 0 else 1.0

    def residual(params):
        return (gaussian_curve(lags, params) - profile) / scale

    def jacobian(params):
        _, b, mu, sigma = params
        bump = np.exp(-((lags - mu) ** 2) / (2.0 * sigma**2))
        columns = (np.ones_like(lags), bump, b * bump * (lags - mu) / sigma**2, b * bump * (lags - mu) ** 2 / sigma**3)
        return np.stack(columns, axis=1) / scale

    start = np.clip(np.asarray(start, dtype=np.float64), low, high)
    result = least_squares(residual, start, jac=jacobian, bounds=(low, high), method="trf",
                           x_scale=np.array([scale, scale, 1.0, 1.0]), ftol=1e-10, xtol=1e-10, gtol=1e-10)
    return result.x


#: smallest Gaussian width (lags)
SIGMA_LOW = 0.1


@njit(**JIT)
def _gaussian_rss(lags, centred_y, ss_y, mu, sigma, coef):
    """RSS of the best ``a + b * bump`` (``b >= 0``) for fixed ``mu, sigma``; ``coef`` gets (a, b)."""
    n = lags.shape[0]
    mean_g = 0.0
    for k in range(n):
        mean_g += np.exp(-((lags[k] - mu) ** 2) / (2.0 * sigma * sigma))
    mean_g /= n
    ss_g = 0.0
    cross = 0.0
    for k in range(n):
        g = np.exp(-((lags[k] - mu) ** 2) / (2.0 * sigma * sigma)) - mean_g
        ss_g += g * g
        cross += g * centred_y[k]
    b = cross / ss_g if ss_g > 1e-300 and cross > 0.0 else 0.0
    coef[1] = b
    coef[0] = -b * mean_g  # plus mean(y), added by the caller
    return ss_y - b * cross if b > 0.0 else ss_y


@njit(**JIT)
def fit_gaussians(lags, profiles, sigma_low, sigma_high, n_mu, n_sigma, rel_tol):
    """Gaussian baseline for many units by variable projection (no validation).

    For fixed ``(mu, sigma)`` the best ``(a, b >= 0)`` is closed-form, so only ``mu`` (within
    the window) and ``log sigma`` (within ``[sigma_low, sigma_high]``) are searched: a lattice
    of ``n_mu x n_sigma`` starts (which includes the peak lag), then a compass search from the
    best one down to steps of ``rel_tol`` times the lattice spacing.

    Returns
    -------
    params : (n_unit, 4) ``a, b, mu, sigma``; rss : (n_unit,)
    """
    n_unit, n_lag = profiles.shape
    params = np.empty((n_unit, 4))
    rss = np.empty(n_unit)
    mu_low = lags[0]
    mu_high = lags[n_lag - 1]
    log_low = np.log(sigma_low)
    log_high = np.log(sigma_high)
    mu_step = (mu_high - mu_low) / (n_mu - 1)
    log_step = (log_high - log_low) / (n_sigma - 1)
    centred = np.empty(n_lag)
    coef = np.empty(2)
    for u in range(n_unit):
        mean_y = 0.0
        for k in range(n_lag):
            mean_y += profiles[u, k]
        mean_y /= n_lag
        ss_y = 0.0
        for k in range(n_lag):
            centred[k] = profiles[u, k] - mean_y
            ss_y += centred[k] * centred[k]
        best = np.inf
        best_mu = mu_low
        best_log = log_low
        for i in range(n_mu):
            for j in range(n_sigma):
                mu = mu_low + i * mu_step
                log_sigma = log_low + j * log_step
                value = _gaussian_rss(lags, centred, ss_y, mu, np.exp(log_sigma), coef)
                if value < best:
                    best, best_mu, best_log = value, mu, log_sigma
        step_mu = 0.5 * mu_step
        step_log = 0.5 * log_step
        while step_mu > rel_tol * mu_step:
            moved = False
            for d in range(4):
                mu = best_mu + (step_mu if d == 0 else (-step_mu if d == 1 else 0.0))
                log_sigma = best_log + (step_log if d == 2 else (-step_log if d == 3 else 0.0))
                mu = min(mu_high, max(mu_low, mu))
                log_sigma = min(log_high, max(log_low, log_sigma))
                value = _gaussian_rss(lags, centred, ss_y, mu, np.exp(log_sigma), coef)
                if value < best - 1e-14 * ss_y:  # a real improvement, not rounding noise
                    best, best_mu, best_log = value, mu, log_sigma
                    moved = True
            if moved:  # expand after a success, so long valleys are crossed quickly
                step_mu = min(2.0 * step_mu, 0.5 * mu_step)
                step_log = min(2.0 * step_log, 0.5 * log_step)
            else:
                step_mu *= 0.5
                step_log *= 0.5
        _gaussian_rss(lags, centred, ss_y, best_mu, np.exp(best_log), coef)
        params[u, 0] = coef[0] + mean_y
        params[u, 1] = coef[1]
        params[u, 2] = best_mu
        params[u, 3] = np.exp(best_log)
        rss[u] = max(best, 0.0)
    return params, rss


def grid_layout(axes):
    """Concatenated axis values, their starts, sizes and C-order strides (all int64 but the values)."""
    sizes = np.array([len(a) for a in axes], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    strides = np.array([int(np.prod(sizes[i + 1:])) for i in range(len(sizes))], dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(axes)), starts, sizes, strides


def fit_distances(profiles: np.ndarray, grid: np.ndarray, axes, objective: str, refine: bool) -> np.ndarray:
    """CMR distance of each row of ``profiles`` (n_unit, n_lag), as ``fit_profiles`` computes it.

    Grid search with ``objective``, then (``refine``, ``lsq`` only) the compass search over the
    grid's multilinear interpolant, never worse than the grid point. Returns shape (n_unit,).
    """
    best = best_grid_point(profiles, grid, objective)
    distance = affine_map(profiles, grid[best], objective)[3]
    if refine:
        flat_axes, starts, sizes, strides = grid_layout(axes)
        points = np.stack([axes[d][idx] for d, idx in enumerate(np.unravel_index(best, tuple(len(a) for a in axes)))],
                          axis=1)
        _, refined = refine_lsq(centred_unit_rows(profiles), np.ascontiguousarray(points), flat_axes, starts, sizes,
                                strides, grid, 1e-3, 2000)
        distance = np.minimum(distance, refined)
    return distance


def study_gaussian(lags, profile):
    """The study's Gaussian baseline, as published (Ji-An et al. 2024, ``fit_gaus_kernel.py``).

    Unbounded ``scipy.optimize.curve_fit`` (Levenberg-Marquardt) of
    ``a + b exp(-(lag - mu)^2 / (2 sigma^2))`` from ``(a, b, mu, sigma) = (0, 1, max value, 1)``:
    ``mu`` starts at the profile's peak *value* (a score, not a lag). When the fit raises, the
    baseline is a flat line at the profile's lag-0 value, ``(y0, 0, 0, 1)`` (the study indexes
    the window's middle, which is lag 0 on -5..+5). Returns ``(params (4,), failed)``.
    """
    import warnings

    from scipy.optimize import curve_fit

    lags = np.asarray(lags, dtype=np.float64)
    middle = int(np.flatnonzero(lags == 0)[0]) if (lags == 0).any() else lags.size // 2

    def curve(x, a, b, mu, sigma):
        return a + b * np.exp(-((x - mu) ** 2) / (2.0 * sigma**2))

    try:
        with warnings.catch_warnings():  # the study ran with warnings shown, not raised
            warnings.simplefilter("ignore")
            params, _ = curve_fit(curve, lags, profile, p0=[0.0, 1.0, float(profile.max()), 1.0])
        return np.asarray(params, dtype=np.float64), False
    except (RuntimeError, ValueError, FloatingPointError, np.linalg.LinAlgError):
        return np.array([float(profile[middle]), 0.0, 0.0, 1.0]), True
