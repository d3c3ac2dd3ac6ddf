"""Nulls for "CMR-like": how low a CMR distance do profiles without temporal structure reach?

The CMR distance ``d = mean_lag((fitted - y)^2) / var_lag(y)`` divides by the unit's own
variance, so any profile can score low: structureless random walks pass the study's threshold
``d < 0.5`` (:data:`cmr.constants.CMR_LIKE_DISTANCE`) a third of the time. :func:`cmr_like_null`
fits every unit and two nulls of it with the same procedure:

- **permuted**: the unit's own values with the lags shuffled (same values, no temporal order);
- **smooth**: structureless stationary AR(1) profiles ``x_t = phi x_(t-1) + e_t`` (``phi``
  uniform on [-0.9, 0.99], from anti-correlated through white noise to near random walks), of
  which the ``n_null`` closest to the unit in roughness (:func:`profile_roughness`) are used.

The unit's p-value under each null is ``(1 + #{null d <= d}) / (1 + n_null)``; a unit is CMR-like
beyond chance when both p-values are at most ``alpha`` (an intersection-union test, so the
combined ``p_value = max(p_permuted, p_smooth)`` is valid). The per-unit calibrated threshold is
the ``alpha`` quantile of the unit's null distances; see docs/null-models.md. With few lags the
permutation null has little power on a profile whose structure is one value (a single sharp
peak): about one permutation in ``n_lag`` puts the peak back, so ``p_permuted`` stays near
``1 / n_lag``; read ``p_smooth`` for such units.

Beside the study's definition (``d < 0.5`` beyond both nulls) the result gives the strict one of
:mod:`cmr.cmr_like` (attention mass, a forward effect size, and the mirrored profile fitting worse
beyond the same nulls), unit by unit and as shares.

Neither null tests forward asymmetry: both are symmetric under lag reversal, and a symmetric
peak at lag 0 is CMR-like beyond chance. The result therefore also gives each unit's forward
asymmetry and its p-value against a symmetric profile with the unit's own sampling error (the
``sem`` of the profile). The asymmetry's p-values against the two shape nulls are given as well;
with 10-11 lags they miss even the pooled human asymmetry (docs/null-models.md).
"""
from __future__ import annotations

import numpy as np
import xarray as xr
from scipy.special import ndtr

from . import _profile_fit as kernels
from .checks import as_generator, integer, probability, seed_of
from .cmr_like import MASS_APPLIED, attention_mass, forward_effect, mirror_order, profile_amplitude
from .constants import CMR_LIKE_DISTANCE, STRICT_FORWARD_EFFECT, STRICT_MASS_RATIO
from .errors import ParameterError
from .profile_fit import fit_window, fitting_lags, grid_window, profiles_window, wants_renormalize
from .schema import batch_dims, provenance_attrs, validate

__all__ = ["cmr_like_null", "structureless_profiles", "profile_roughness", "SMOOTH_PHI_RANGE"]

#: range of the AR(1) coefficient of the smooth structureless profiles
SMOOTH_PHI_RANGE = (-0.9, 0.99)


def profile_roughness(values) -> np.ndarray:
    """Roughness ``sum_t (y_(t+1) - y_t)^2 / sum_t (y_t - mean y)^2`` along the last axis.

    Invariant to offset and scale, so it is as blind to amplitude as the CMR distance: about 2
    for white noise, near 0 for a random walk, up to about 4 for an alternating profile; a single
    sharp peak (a strong induction head) scores about 2. Constant rows give NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    centred = values - values.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.diff(values, axis=-1) ** 2).sum(axis=-1) / (centred**2).sum(axis=-1)


def structureless_profiles(n_profile: int, n_lag: int, *, rng=0, phi_range=SMOOTH_PHI_RANGE) -> np.ndarray:
    """Stationary AR(1) profiles with a random coefficient each: no lag is special.

    ``x_0 ~ N(0, 1 / (1 - phi^2))``, ``x_t = phi x_(t-1) + e_t`` with ``e_t ~ N(0, 1)`` and
    ``phi ~ U(phi_range)`` per profile. Stationary and time-reversible, so forward and backward
    lags are exchangeable in distribution. Returns shape (n_profile, n_lag).
    """
    n_profile = integer(n_profile, "n_profile")
    n_lag = integer(n_lag, "n_lag", minimum=2)
    low, high = (float(v) for v in phi_range)
    if not (-1.0 < low <= high < 1.0):
        raise ParameterError(f"phi_range must lie inside (-1, 1) with low <= high; got {phi_range!r}")
    generator = as_generator(rng)
    phi = generator.uniform(low, high, size=n_profile)
    noise = generator.standard_normal((n_profile, n_lag))
    out = np.empty((n_profile, n_lag))
    out[:, 0] = noise[:, 0] / np.sqrt(1.0 - phi**2)
    for t in range(1, n_lag):  # over lags (about 11), vectorised over profiles
        out[:, t] = phi * out[:, t - 1] + noise[:, t]
    return out


def cmr_like_null(
    profiles: xr.Dataset,
    grid: xr.Dataset,
    *,
    objective: str = "lsq",
    lags=None,
    n_null: int = 200,
    rng=0,
    alpha: float = 0.05,
    refine: bool | None = None,
    n_bank: int = 20_000,
    renormalize="auto",
    variable: str = "profile",
) -> xr.Dataset:
    """Per-unit p-values of the CMR distance against permuted-lag and smooth structureless nulls.

    Parameters
    ----------
    profiles, grid, objective, lags, renormalize, variable
        As for :func:`cmr.profile_fit.fit_profiles` (the same fit is applied to the unit and to
        every null profile; ``lags=None`` picks the window by the kind of profile,
        :func:`cmr.profile_fit.fitting_lags`). Units with NaN lags or a constant profile get NaN
        results.
    n_null : int
        Null profiles per unit and per null (permutations; nearest-roughness smooth profiles).
    rng : int or numpy.random.Generator
        Seed of the permutations and of the smooth bank.
    alpha : float
        Level of the per-unit test and of the calibrated thresholds.
    refine : None or bool
        ``lsq`` only: refine between grid points (default True for ``lsq``, as ``fit_profiles``).
    n_bank : int
        Smooth structureless profiles drawn once; each unit uses the ``n_null`` nearest to it in
        roughness (``n_bank`` must be at least ``n_null``).

    Returns
    -------
    xarray.Dataset
        A ``profile_null`` dataset (docs/schema.md): per unit ``distance``, ``roughness``,
        ``p_permuted``, ``p_smooth``, ``p_value``, ``threshold_permuted``, ``threshold_smooth``,
        ``threshold``, ``beyond_chance`` (0/1), ``null_cmr_like_permuted`` and
        ``null_cmr_like_smooth`` (share of the unit's null profiles with ``d < 0.5``); attrs with
        the shares over units and the pooled calibrated threshold. Beside them, forward
        asymmetry (the signature of human recall, lag +1 above lag -1): ``asymmetry`` =
        (y(+1) - y(-1)) / sd_lag(y), ``asymmetry_sum`` over lags 1..k (attr ``asymmetry_lags``,
        the largest k with every lag +-1..+-k in the window), ``p_asymmetry`` and
        ``p_asymmetry_sum`` (two-sided, against a symmetric profile with the unit's own sampling
        error, from its ``sem`` variable; NaN without one), ``p_asymmetry_permuted`` and
        ``p_asymmetry_smooth`` (the asymmetry of the CMR-like test's own null profiles), and
        ``forward_beyond_chance`` / ``backward_beyond_chance`` (0/1: ``p_asymmetry <= alpha`` with
        that sign); attrs ``share_forward_beyond_chance``, ``share_backward_beyond_chance`` and
        ``share_cmr_like_and_forward``. Then the two definitions of CMR-like (:mod:`cmr.cmr_like`):
        ``cmr_like_study`` (0/1: ``d < 0.5`` and ``p_value <= alpha``) and ``cmr_like_strict``
        (0/1: also the strict criteria), with the criteria's own columns: ``amplitude`` (the
        profile's range), ``attention_mass``, ``uniform_mass``, ``mass_ratio``, ``passes_mass``,
        ``forward_effect``, ``passes_forward``, ``mirror_distance``, ``mirror_gap``,
        ``p_mirror_permuted``, ``p_mirror_smooth``, ``p_mirror`` and ``passes_mirror``
        (``passes_*`` are NaN where the criterion does not apply); attrs ``strict_criteria``,
        ``mass_criterion``, ``mirror_criterion``, ``forward_significance`` (what applied),
        ``share_cmr_like_study``, ``share_cmr_like_strict`` and ``share_passes_*``.
    """
    if objective not in ("paper", "lsq"):
        raise ParameterError(f"objective must be 'paper' or 'lsq'; got {objective!r}")
    if refine is None:
        refine = objective == "lsq"
    if not isinstance(refine, (bool, np.bool_)):
        raise ParameterError(f"refine must be None, True or False for a null; got {refine!r}")
    if refine and objective == "paper":
        raise ParameterError("refine applies to objective 'lsq' only; the 'paper' objective is the study's grid search")
    n_null = integer(n_null, "n_null")
    n_bank = integer(n_bank, "n_bank", minimum=n_null)
    alpha = probability(alpha, "alpha", open_low=True, open_high=True)
    seed = seed_of(rng)
    window = fit_window(fitting_lags(profiles, lags=lags, variable=variable))
    values = profiles_window(profiles, variable, window)
    _, axes, grid_rows = grid_window(grid, window, renormalize)
    unit_dims = batch_dims(values)
    values = values.transpose(*unit_dims, "lag")
    flat = np.asarray(values.values, dtype=np.float64).reshape(-1, len(window))
    with np.errstate(invalid="ignore"):
        good = np.isfinite(flat).all(axis=1) & (flat.var(axis=1) > 0)
    y = flat[good]
    n_unit, n_lag = y.shape
    generator = np.random.default_rng(seed)

    def distances(rows):
        return kernels.fit_distances(np.ascontiguousarray(rows), grid_rows, axes, objective, bool(refine))

    observed = distances(y) if n_unit else np.empty(0)
    permuted = generator.permuted(np.repeat(y[:, None, :], n_null, axis=1), axis=-1)
    null_perm = distances(permuted.reshape(-1, n_lag)).reshape(n_unit, n_null)
    bank = structureless_profiles(n_bank, n_lag, rng=generator)
    bank_roughness = profile_roughness(bank)
    order = np.argsort(bank_roughness)
    bank, bank_roughness = bank[order], bank_roughness[order]
    bank_distance = distances(bank)
    roughness = profile_roughness(y)
    nearest = _nearest(bank_roughness, roughness, n_null)
    null_smooth = bank_distance[nearest]

    results = {
        "distance": observed,
        "roughness": roughness,
        "p_permuted": _p_values(observed, null_perm),
        "p_smooth": _p_values(observed, null_smooth),
        "threshold_permuted": np.quantile(null_perm, alpha, axis=1) if n_unit else np.empty(0),
        "threshold_smooth": np.quantile(null_smooth, alpha, axis=1) if n_unit else np.empty(0),
        "null_cmr_like_permuted": (null_perm < CMR_LIKE_DISTANCE).mean(axis=1),
        "null_cmr_like_smooth": (null_smooth < CMR_LIKE_DISTANCE).mean(axis=1),
    }
    results["p_value"] = np.maximum(results["p_permuted"], results["p_smooth"])
    results["threshold"] = np.minimum(results["threshold_permuted"], results["threshold_smooth"])
    sem = _sem_rows(profiles, variable, window, unit_dims, good)
    asymmetry, k_sum = _asymmetry_results(y, sem, window, permuted, bank, nearest)
    results.update(asymmetry)
    order = mirror_order(window)
    if order is not None:  # the mirror criterion: fit every profile, and every null profile, with its lags reversed
        # the mirror has the unit's values and roughness, so the unit's own null profiles are its null too
        mirrored = distances(y[:, order]) if n_unit else np.empty(0)
        results["mirror_distance"] = mirrored
        results["mirror_gap"] = mirrored - observed
        results["p_mirror_permuted"] = _p_values(mirrored, null_perm)
        results["p_mirror_smooth"] = _p_values(mirrored, null_smooth)
        results["p_mirror"] = np.maximum(results["p_mirror_permuted"], results["p_mirror_smooth"])
    mass_status, study, strict = _strict_columns(results, profiles, values, unit_dims, good, y, window,
                                                 sem is not None, alpha)
    first = ("distance", "amplitude", "attention_mass", "uniform_mass", "mass_ratio")  # amplitude beside the distance
    results = {**{name: results[name] for name in first}, **results}
    shape = values.shape[:-1]
    coords = {d: values[d] for d in unit_dims if d in values.coords}
    out = xr.Dataset(coords=coords)
    for name, column in results.items():
        full = np.full(flat.shape[0], np.nan)
        full[good] = column
        out[name] = (unit_dims, full.reshape(shape))
    flags = {"beyond_chance": results["p_value"] <= alpha, "cmr_like_study": study, "cmr_like_strict": strict}
    for name, column in flags.items():
        flag = np.zeros(flat.shape[0], dtype=np.int64)
        flag[good] = column
        out[name] = (unit_dims, flag.reshape(shape))
    signed = np.sign(results["asymmetry"]) * (results["p_asymmetry"] <= alpha)  # NaN p compares False
    for name, sign in (("forward_beyond_chance", 1), ("backward_beyond_chance", -1)):
        flag = np.zeros(flat.shape[0], dtype=np.int64)
        flag[good] = signed == sign
        out[name] = (unit_dims, flag.reshape(shape))
    for name, text in _DESCRIPTIONS.items():
        if name in out:
            out[name].attrs["long_name"] = text
    pooled = (np.quantile(null_perm, alpha) if n_unit else np.nan, np.quantile(null_smooth, alpha) if n_unit else np.nan)
    summary = dict(
        objective=objective, refine=int(bool(refine)), alpha=float(alpha), n_null=n_null, n_bank=n_bank,
        n_units=int(n_unit), cmr_like_distance=float(CMR_LIKE_DISTANCE),
        share_cmr_like=float(np.mean(observed < CMR_LIKE_DISTANCE)) if n_unit else float("nan"),
        share_beyond_chance=float(np.mean(results["p_value"] <= alpha)) if n_unit else float("nan"),
        null_share_cmr_like_permuted=float(np.mean(null_perm < CMR_LIKE_DISTANCE)) if n_unit else float("nan"),
        null_share_cmr_like_smooth=float(np.mean(null_smooth < CMR_LIKE_DISTANCE)) if n_unit else float("nan"),
        calibrated_threshold=float(min(pooled)),
        grid_renormalized=int(wants_renormalize(grid, renormalize)),
    )
    out.attrs.update(provenance_attrs("profile_null", "cmr.cmr_like_null", lags=list(window), seed=int(seed),
                                      grid_provenance=grid.attrs.get("provenance", ""),
                                      profiles_provenance=profiles.attrs.get("provenance", ""), **summary))
    out.attrs.update(summary, unit_dims=" ".join(unit_dims))
    # the provenance string records the CMR-like test alone; the asymmetry test adds its own attrs
    out.attrs.update(
        asymmetry_lags=int(k_sum), asymmetry_null="sampling" if sem is not None else "none (no sem variable)",
        share_forward_beyond_chance=float(np.mean(signed == 1)) if n_unit else float("nan"),
        share_backward_beyond_chance=float(np.mean(signed == -1)) if n_unit else float("nan"),
        share_cmr_like_and_forward=(float(np.mean((results["p_value"] <= alpha) & (signed == 1))) if n_unit
                                    else float("nan")),
    )
    out.attrs.update(_strict_attrs(results, study, strict, mass_status, sem is not None, order is not None, n_unit))
    for key in ("unit_kind", "profile_kind"):
        if key in profiles.attrs:
            out.attrs[key] = profiles.attrs[key]
    return validate(out, "profile_null")


def _strict_columns(results, profiles, values, unit_dims, good, y, window, has_sem, alpha):
    """Add the strict definition's columns to ``results`` (good units only).

    Returns (mass status, study's verdict, strict verdict), the verdicts as bool arrays.
    """
    n_unit = y.shape[0]
    results["amplitude"] = profile_amplitude(y) if n_unit else np.empty(0)
    mass, uniform, status = attention_mass(profiles)
    if status == MASS_APPLIED:
        template = values.isel(lag=0, drop=True)
        rows = [np.asarray(xr.broadcast(v, template)[0].transpose(*unit_dims).values, dtype=np.float64).ravel()[good]
                for v in (mass, uniform)]
        results["attention_mass"], results["uniform_mass"] = rows
        with np.errstate(invalid="ignore", divide="ignore"):
            results["mass_ratio"] = rows[0] / rows[1]
        results["passes_mass"] = (results["mass_ratio"] >= STRICT_MASS_RATIO).astype(np.float64)
    else:
        for name in ("attention_mass", "uniform_mass", "mass_ratio", "passes_mass"):
            results[name] = np.full(n_unit, np.nan)
    if 1 in window and -1 in window and n_unit:
        results["forward_effect"] = forward_effect(y, window)
    else:
        results["forward_effect"] = np.full(n_unit, np.nan)
    forward = results["forward_effect"] >= STRICT_FORWARD_EFFECT
    if has_sem:
        forward &= (results["p_asymmetry"] <= alpha) & (results["asymmetry"] > 0)
    results["passes_forward"] = forward.astype(np.float64)
    if "p_mirror" in results:
        results["passes_mirror"] = (results["p_mirror"] > alpha).astype(np.float64)
    study = (results["distance"] < CMR_LIKE_DISTANCE) & (results["p_value"] <= alpha)
    strict = study & forward
    for name in ("passes_mass", "passes_mirror"):
        if name in results and np.isfinite(results[name]).all():
            strict &= results[name] == 1
    return status, study, strict


def _strict_attrs(results, study, strict, mass_status, has_sem, has_mirror, n_unit) -> dict:
    """Attrs of the strict definition: its rules, which of them applied, shares under both definitions."""

    def share(mask):
        return float(np.mean(mask)) if n_unit else float("nan")

    rules = ["d < 0.5", "beyond both nulls", f"forward effect >= {STRICT_FORWARD_EFFECT:g}"
             + (" and p_asymmetry <= alpha" if has_sem else "")]
    if mass_status == MASS_APPLIED:
        rules.append(f"attention mass on lags -5..5 >= {STRICT_MASS_RATIO:g} x uniform")
    if has_mirror:
        rules.append("p_mirror > alpha (the mirrored profile is not CMR-like beyond chance)")
    attrs = dict(
        strict_criteria="; ".join(rules), mass_criterion=mass_status,
        mirror_criterion="applied" if has_mirror else "not available: the lag window is not symmetric about 0",
        forward_significance="applied (sampling error)" if has_sem else "not available: no sem variable",
        strict_mass_ratio=float(STRICT_MASS_RATIO), strict_forward_effect=float(STRICT_FORWARD_EFFECT),
        share_cmr_like_study=share(study), share_cmr_like_strict=share(strict),
        share_passes_forward=share(results["passes_forward"] == 1),
    )
    for name in ("mass", "mirror"):
        column = results.get(f"passes_{name}")
        available = column is not None and n_unit and np.isfinite(column).all()
        attrs[f"share_passes_{name}"] = share(column == 1) if available else float("nan")
    return attrs


def _p_values(observed, null):
    """``(1 + #{null <= observed}) / (1 + n_null)`` per row: exact (conservative) permutation p."""
    if observed.size == 0:
        return np.empty(0)
    return (1.0 + (null <= observed[:, None]).sum(axis=1)) / (1.0 + null.shape[1])


def _sem_rows(profiles, variable, window, unit_dims, good):
    """The SEM of ``variable`` (``sem`` for ``profile``, ``prob_sem`` for ``prob_profile``) as rows of the good units, or None."""
    name = "sem" if variable == "profile" else variable.replace("profile", "sem")
    if name == variable or name not in profiles or "lag" not in profiles[name].dims:
        return None
    if not set(window) <= set(np.asarray(profiles[name]["lag"].values).tolist()):
        return None
    sem = profiles[name].sel(lag=list(window)).transpose(*unit_dims, "lag")
    return np.asarray(sem.values, dtype=np.float64).reshape(-1, len(window))[good]


def _asymmetry_results(y, sem, window, permuted, bank, nearest):
    """Forward-asymmetry columns of the good units ``y`` (n_unit, n_lag).

    ``permuted`` (n_unit, n_null, n_lag) and ``bank[nearest]`` are the very null profiles of the
    CMR-like test. Returns (columns, k) with ``k`` the lags summed in ``asymmetry_sum``.
    """
    window = list(window)
    k = 0
    while k + 1 in window and -(k + 1) in window:
        k += 1
    n_unit = y.shape[0]
    if k == 0 or n_unit == 0:
        empty = np.full(n_unit, np.nan)
        names = ("asymmetry", "asymmetry_sum", "p_asymmetry", "p_asymmetry_sum", "p_asymmetry_permuted",
                 "p_asymmetry_smooth")
        return {name: empty for name in names}, k
    plus = [window.index(lag) for lag in range(1, k + 1)]
    minus = [window.index(-lag) for lag in range(1, k + 1)]
    one = _forward_asymmetry(y, plus[:1], minus[:1])
    smooth_one = _forward_asymmetry(bank, plus[:1], minus[:1])[nearest]
    columns = {
        "asymmetry": one,
        "asymmetry_sum": _forward_asymmetry(y, plus, minus),
        "p_asymmetry_permuted": _p_two_sided(one, _forward_asymmetry(permuted, plus[:1], minus[:1])),
        "p_asymmetry_smooth": _p_two_sided(one, smooth_one),
    }
    for name, n_pairs in (("p_asymmetry", 1), ("p_asymmetry_sum", k)):
        if sem is None:
            columns[name] = np.full(n_unit, np.nan)
            continue
        difference = y[:, plus[:n_pairs]].sum(axis=1) - y[:, minus[:n_pairs]].sum(axis=1)
        spread = np.sqrt((sem[:, plus[:n_pairs]] ** 2 + sem[:, minus[:n_pairs]] ** 2).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            p = 2.0 * ndtr(-np.abs(difference) / spread)
        columns[name] = np.where(spread > 0, p, np.nan)
    return columns, k


def _forward_asymmetry(values, plus, minus) -> np.ndarray:
    """``sum_l (y(+l) - y(-l)) / sd_lag(y)`` along the last axis (columns ``plus[l]``, ``minus[l]``).

    Divided by the profile's standard deviation over its lags (ddof 0), so it is free of offset and
    gain, as the CMR distance is; 0 for a profile symmetric about lag 0, NaN for a constant one.
    """
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (values[..., plus].sum(axis=-1) - values[..., minus].sum(axis=-1)) / values.std(axis=-1)


def _p_two_sided(observed, null):
    """``(1 + #{|null| >= |observed|}) / (1 + n_null)`` per row."""
    return (1.0 + (np.abs(null) >= np.abs(observed)[:, None]).sum(axis=1)) / (1.0 + null.shape[1])


def _nearest(sorted_values, targets, k):
    """Indices (len(targets), k) of the ``k`` entries of ``sorted_values`` closest to each target."""
    n = sorted_values.size
    if targets.size == 0:
        return np.empty((0, k), dtype=np.int64)
    position = np.searchsorted(sorted_values, targets)
    # the k nearest lie within k positions either side of the insertion point
    start = np.clip(position - k, 0, n - min(n, 2 * k))
    window = start[:, None] + np.arange(min(n, 2 * k))[None, :]
    gap = np.abs(sorted_values[window] - targets[:, None])
    pick = np.argpartition(gap, k - 1, axis=1)[:, :k] if window.shape[1] > k else np.arange(k)[None, :].repeat(
        targets.size, axis=0)
    return np.take_along_axis(window, pick, axis=1)


_DESCRIPTIONS = {
    "distance": "CMR distance of the unit (the same fit as its nulls)",
    "roughness": "sum of squared lag-to-lag differences over the sum of squared deviations",
    "p_permuted": "share of permuted-lag profiles fitting at least as well, (1 + k) / (1 + n_null)",
    "p_smooth": "share of roughness-matched structureless AR(1) profiles fitting at least as well",
    "p_value": "max(p_permuted, p_smooth): CMR-like beyond both nulls",
    "threshold_permuted": "alpha quantile of the permuted-lag null distances",
    "threshold_smooth": "alpha quantile of the smooth null distances",
    "threshold": "calibrated threshold: min of the two alpha quantiles",
    "null_cmr_like_permuted": "share of the permuted-lag null below the study's d < 0.5",
    "null_cmr_like_smooth": "share of the smooth null below the study's d < 0.5",
    "beyond_chance": "1 if p_value <= alpha",
    "asymmetry": "forward asymmetry (profile(+1) - profile(-1)) / sd over the window's lags",
    "asymmetry_sum": "sum over lags 1..asymmetry_lags of (profile(+l) - profile(-l)), over the same sd",
    "p_asymmetry": "two-sided p of profile(+1) - profile(-1) against 0 with the unit's own sem (normal)",
    "p_asymmetry_sum": "two-sided p of the summed difference against 0 with the unit's own sem (normal)",
    "p_asymmetry_permuted": "two-sided p of asymmetry against the CMR-like test's permuted-lag null profiles",
    "p_asymmetry_smooth": "two-sided p of asymmetry against the CMR-like test's smooth null profiles",
    "forward_beyond_chance": "1 if p_asymmetry <= alpha and asymmetry > 0",
    "backward_beyond_chance": "1 if p_asymmetry <= alpha and asymmetry < 0",
    "amplitude": "range (max - min) of the profile over the fitting window, in the profile's units",
    "attention_mass": "attention probability mass on lags -5..5 (NaN: not applicable or not available)",
    "uniform_mass": "the mass uniform attention over the visible keys puts on lags -5..5",
    "mass_ratio": "attention_mass / uniform_mass",
    "passes_mass": "1 if mass_ratio >= strict_mass_ratio (NaN: criterion not applied, see mass_criterion)",
    "forward_effect": "(profile(+1) - profile(-1)) / amplitude",
    "passes_forward": "1 if forward_effect >= strict_forward_effect (and p_asymmetry <= alpha with a sem)",
    "mirror_distance": "CMR distance of the profile with its lags reversed",
    "mirror_gap": "mirror_distance - distance",
    "p_mirror_permuted": "p of mirror_distance against the unit's permuted-lag null (as p_permuted)",
    "p_mirror_smooth": "p of mirror_distance against the unit's smooth null (as p_smooth)",
    "p_mirror": "max(p_mirror_permuted, p_mirror_smooth): the mirrored profile's p_value",
    "passes_mirror": "1 if p_mirror > alpha: the mirrored profile is not CMR-like beyond chance",
    "cmr_like_study": "1 if distance < 0.5 and p_value <= alpha: the study's CMR-like, beyond both nulls",
    "cmr_like_strict": "1 if cmr_like_study and every strict criterion that applies passes (strict_criteria)",
}
