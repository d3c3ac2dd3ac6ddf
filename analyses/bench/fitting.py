"""Benchmark: fitting 10,000 lag profiles against the study's CMR grid (4,620 points).

Ours: :func:`cmr.profile_fit.fit_profiles` (vectorised grid search, one matrix product per
block of units). Reference: the study's procedure as a straightforward per-unit Python loop
over grid points (min/max-matched map, as in its fitting script), timed on a subset of units
and scaled to 10,000, side by side in the same process.
"""
from __future__ import annotations

import time

import numpy as np
import xarray as xr

from cmr.checks import seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.profile_fit import fit_profiles
from cmr.schema import provenance_attrs

from .timing import median_time
from ...adapters.published_grid import load_published_grid

N_UNITS = 10_000
N_REFERENCE_UNITS = 10
LAGS = np.arange(-5, 6)


def _grid():
    return load_published_grid()


@keyword_only
@renamed_keywords(seed="rng")
def synthetic_units(grid, *, n_units: int, rng=0) -> xr.Dataset:
    """Affine images of random grid profiles plus noise, as ``n_units`` 'subjects'; ``rng`` an int seed
    (kept as ``seed``) or a Generator (which draws one, ``int(rng.integers(2**63))``)."""
    seed = seed_of(rng)

    rng = np.random.default_rng(seed)
    rows = grid["profile"].sel(lag=LAGS).stack(point=grid["profile"].dims[:-1]).transpose("point", "lag").values
    picked = rows[rng.integers(0, rows.shape[0], n_units)]
    values = rng.uniform(5, 50, (n_units, 1)) * picked + rng.normal(0, 1, (n_units, 1))
    values += rng.normal(0, 0.3, values.shape)
    ds = xr.Dataset({"profile": (("subject", "lag"), values)}, coords={"subject": np.arange(n_units), "lag": LAGS})
    ds.attrs.update(provenance_attrs("lag_profile", "icl_cmr.analyses.bench.fitting", seed=seed))
    ds.attrs["profile_kind"] = "attention_score"
    return ds


def study_loop(profiles: np.ndarray, cube: np.ndarray) -> np.ndarray:
    """The study's grid search, unit by unit and grid point by grid point (the reference)."""
    out = np.empty(profiles.shape[0])
    for u, profile in enumerate(profiles):
        target = profile - profile.min()
        best = np.inf
        for index in np.ndindex(cube.shape[:-1]):
            crp = cube[index] / cube[index].sum()
            shifted = crp - crp.min()
            scaled = shifted * (target.max() / shifted.max())
            best = min(best, np.mean((scaled - target) ** 2 / np.var(target)))
        out[u] = best
    return out


@keyword_only
def bench_fit_units(*, repeats: int = 3) -> dict:
    grid = _grid()
    units = synthetic_units(grid, n_units=N_UNITS)

    start = time.perf_counter()
    paper = fit_profiles(units, grid, objective="paper", gaussian=False)
    first_call = time.perf_counter() - start
    fit_profiles(units.isel(subject=slice(0, 10)), grid, objective="lsq", gaussian=False)  # compile refinement
    ours = median_time(lambda: fit_profiles(units, grid, objective="paper", gaussian=False), repeats)
    lsq_grid = median_time(lambda: fit_profiles(units, grid, objective="lsq", refine=False, gaussian=False), repeats)
    lsq_refined = median_time(lambda: fit_profiles(units, grid, objective="lsq", gaussian=False), repeats)
    subset = units.isel(subject=slice(0, 100))
    gaussian_100 = median_time(lambda: fit_profiles(subset, grid, objective="paper"), 1) - median_time(
        lambda: fit_profiles(subset, grid, objective="paper", gaussian=False), 1)

    cube = grid["profile"].sel(lag=LAGS).values
    head = units["profile"].values[:N_REFERENCE_UNITS]
    reference_subset = median_time(lambda: study_loop(head, cube), 1, warmup=0)
    reference = reference_subset * N_UNITS / N_REFERENCE_UNITS
    check = np.abs(study_loop(head[:2], cube) - paper["distance"].values[:2]).max()
    return {
        "name": "fit-units",
        "ours_s": ours,
        "reference": f"study's per-unit loop ({N_REFERENCE_UNITS} units, x{N_UNITS // N_REFERENCE_UNITS})",
        "reference_s": reference,
        "ratio": reference / ours,
        "n_units": N_UNITS,
        "grid_points": int(np.prod(cube.shape[:-1])),
        "first_call_s": first_call,
        "lsq_grid_s": lsq_grid,
        "lsq_refined_s": lsq_refined,
        "gaussian_baseline_per_unit_s": gaussian_100 / 100,
        "max_abs_diff_vs_reference": float(check),
    }
