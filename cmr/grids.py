"""CMR lag-profile grids: labelled ``lag_profile`` datasets over parameter axes, either variant.

Every generator returns a ``lag_profile`` dataset (docs/schema.md) whose batch dims are the
parameter dims (``beta_enc``, ``beta_rec``, ``gamma`` for the paper's variant) and whose core
dim is ``lag``; attrs ``unit_kind="cmr_parameters"`` and ``profile_kind`` say what it holds:

* ``cmr_mc_crp``: the study's Monte Carlo lag distribution (:func:`paper_mc_grid`), with its
  Monte Carlo standard error ``sem`` and the study's SEM over start positions ``sem_start``;
* ``cmr_tf_prob`` / ``cmr_tf_logsupport``: teacher-forced deterministic profiles (recall
  forced in study order; :func:`paper_teacher_forced_grid` for the paper's variant,
  :func:`textbook_teacher_forced_grid` for textbook CMR with any parameters as grid dims, named
  as in cymr), the analogue of attention probabilities and pre-softmax scores.

See docs/equations.md for the equations and docs/benchmarks.md for timings.
"""
from __future__ import annotations

import numpy as np
import xarray as xr

from . import deprecation
from .checks import integer, lag_window, seed_of
from .constants import STUDY_LIST_LENGTH, STUDY_MAX_LAG, STUDY_MAX_RECALLS, STUDY_N_TRIALS, STUDY_START_POSITIONS
from .errors import ParameterError, ProfileError
from .paper import _teacher_forced as paper_tf
from .paper.simulate import check_parameters, paper_lag_statistics
from .schema import provenance_attrs, validate
from .textbook import _teacher_forced as textbook_tf
from .textbook.parameters import PARAMETER_NAMES, default_parameters, validate_parameters

__all__ = [
    "PARAMETER_DIMS",
    "paper_grid_axes",
    "paper_mc_grid",
    "paper_teacher_forced_grid",
    "textbook_teacher_forced_grid",
    "paper_lag_distribution",
    "cut_lag_window",
]

PARAMETER_DIMS = ("beta_enc", "beta_rec", "gamma")
_DISTRIBUTION_KINDS = ("cmr_mc_crp", "cmr_tf_prob")


def paper_grid_axes() -> dict[str, np.ndarray]:
    """The study's grid: beta_enc 0.05..1 by 0.05, beta_rec 0..1 by 0.05, gamma 0..1 by 0.1 (4,620 points)."""
    return {
        "beta_enc": np.round(0.05 * np.arange(1, 21), 2),
        "beta_rec": np.round(0.05 * np.arange(0, 21), 2),
        "gamma": np.round(0.1 * np.arange(0, 11), 1),
    }


def _grid_axes(beta_enc, beta_rec, gamma) -> dict[str, np.ndarray]:
    """Validated 1-d parameter axes (defaults: the study's grid)."""
    defaults = paper_grid_axes()
    axes = {}
    for name, value in (("beta_enc", beta_enc), ("beta_rec", beta_rec), ("gamma", gamma)):
        arr = defaults[name] if value is None else np.atleast_1d(np.asarray(value, dtype=np.float64))
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(f"{name} must be a non-empty 1-d sequence of values; got shape {arr.shape}")
        if arr.size > 1 and (np.diff(arr) <= 0).any():
            raise ParameterError(f"{name} values must be strictly increasing (no duplicates); got {arr.tolist()}")
        axes[name] = np.ascontiguousarray(arr)
    check_parameters(axes["beta_enc"][:, None, None], axes["beta_rec"][None, :, None], axes["gamma"][None, None, :])
    return axes


def _mesh(axes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    grids = np.meshgrid(axes["beta_enc"], axes["beta_rec"], axes["gamma"], indexing="ij")
    return tuple(np.ascontiguousarray(g.ravel()) for g in grids)


def _dataset(axes, lags, variables: dict, profile_kind: str, created_by: str, variant: str = "paper", **info) -> xr.Dataset:
    """A lag_profile dataset with the parameter axes (in ``axes`` order) as batch dims."""
    shape = tuple(values.size for values in axes.values()) + (lags.size,)
    dims = (*axes, "lag")
    ds = xr.Dataset(
        {name: (dims, np.ascontiguousarray(values.reshape(shape), dtype=np.float64)) for name, values in variables.items()},
        coords={**axes, "lag": lags},
    )
    ds.attrs.update(provenance_attrs("lag_profile", created_by, variant=variant, **info))
    ds.attrs["profile_kind"] = profile_kind
    ds.attrs["unit_kind"] = "cmr_parameters"
    return validate(ds, "lag_profile")


def _cut(profile: np.ndarray, sems: list[np.ndarray], full_lags: np.ndarray, lags: np.ndarray):
    """Select ``lags`` from distributions over ``full_lags`` and renormalise to sum 1.

    SEMs are scaled by the same factor (first order; the covariance with the window's mass
    is ignored).
    """
    index = np.searchsorted(full_lags, lags)
    cut = profile[..., index]
    mass = cut.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cut / mass, [s[..., index] / mass for s in sems]


def paper_mc_grid(
    beta_enc=None,
    beta_rec=None,
    gamma=None,
    *,
    n_trials: int = STUDY_N_TRIALS,
    rng=0,
    lags=None,
    list_length: int = STUDY_LIST_LENGTH,
    start_positions=None,
    max_recalls: int = STUDY_MAX_RECALLS,
    closed_forms: bool = True,
    n_jobs: int | None = None,
    progress: bool | None = None,
) -> xr.Dataset:
    """The study's Monte Carlo lag distributions of the paper's variant on a parameter grid.

    Parameters
    ----------
    beta_enc, beta_rec, gamma : sequence of float, optional
        Grid axes (strictly increasing); default: the study's grid (:func:`paper_grid_axes`).
    n_trials : int
        Trials per start position (the study: 500).
    rng : int or numpy.random.Generator
        Base seed (a Generator draws one); each point's stream depends only on the seed and
        its parameter values, so any sub-grid reproduces the same points of a larger grid
        exactly.
    lags : sequence of int, optional
        Output lags (default -8..8). Lags -8..+8 are always simulated (the study's histogram);
        a narrower window (e.g. ``range(-5, 6)``, the study's fitting window) is cut from the
        averaged distribution and renormalised; a wider one widens the histogram.
    list_length, start_positions, max_recalls, closed_forms, n_jobs, progress
        See :func:`cmr.paper.paper_lag_statistics`.

    Returns
    -------
    xarray.Dataset
        ``lag_profile`` with dims (beta_enc, beta_rec, gamma, lag): ``profile`` (sums to 1 over
        ``lag``), ``sem`` (its Monte Carlo standard error: delta method per start position,
        combined over starts; 0 at closed-form points; NaN with fewer than 2 trials with a
        recall per start), ``sem_start`` (the study's SEM over
        start positions, ddof=1). attrs ``profile_kind="cmr_mc_crp"``,
        ``unit_kind="cmr_parameters"``, provenance with every setting and the seed.
    """
    axes = _grid_axes(beta_enc, beta_rec, gamma)
    window = lag_window(STUDY_MAX_LAG if lags is None else lags)
    max_lag = max(STUDY_MAX_LAG, int(np.abs(window).max()))
    seed = seed_of(rng)
    stats = paper_lag_statistics(
        *_mesh(axes), list_length=list_length, start_positions=start_positions, n_trials=n_trials,
        max_recalls=max_recalls, max_lag=max_lag, rng=seed, closed_forms=closed_forms,
        n_jobs=n_jobs, progress=progress,
    )
    per_start, per_start_var = stats["per_start"], stats["per_start_var"]
    n_starts = per_start.shape[1]
    profile = per_start.mean(axis=1)
    mc_sem = np.sqrt(per_start_var.sum(axis=1)) / n_starts
    start_sem = per_start.std(axis=1, ddof=1) / np.sqrt(n_starts) if n_starts > 1 else np.full_like(profile, np.nan)
    full_lags = np.arange(-max_lag, max_lag + 1, dtype=np.int64)
    if window.min() < -max_lag or window.max() > max_lag:
        raise ProfileError(f"lags must lie within -{max_lag}..{max_lag}; got {window.tolist()}")
    if not np.array_equal(window, full_lags):
        profile, (mc_sem, start_sem) = _cut(profile, [mc_sem, start_sem], full_lags, window)
    ds = _dataset(
        axes, window, {"profile": profile, "sem": mc_sem, "sem_start": start_sem}, "cmr_mc_crp",
        "cmr.paper_mc_grid",
        n_trials=int(n_trials), seed=int(seed), list_length=int(list_length), max_recalls=int(max_recalls),
        simulated_max_lag=max_lag, closed_forms=int(bool(closed_forms)),
        start_positions=[int(s) for s in (STUDY_START_POSITIONS if start_positions is None else np.atleast_1d(start_positions))],
        n_closed_form_points=int(stats["closed_form"].sum()),
    )
    ds["profile"].attrs["long_name"] = "probability of a recall transition at this lag (the study's CRP)"
    ds["sem"].attrs["long_name"] = "Monte Carlo standard error of profile"
    ds["sem_start"].attrs["long_name"] = "SEM of profile over recall start positions (as the study saved it)"
    return ds


def paper_teacher_forced_grid(
    beta_enc=None,
    beta_rec=None,
    gamma=None,
    *,
    kind: str = "prob",
    lags=None,
    list_length: int = STUDY_LIST_LENGTH,
    floor: float = 1e-10,
) -> xr.Dataset:
    """Teacher-forced (deterministic) lag profiles of the paper's variant on a parameter grid.

    Study, then "recall" items 1..N in study order : context starts one-hot at
    item 1 (the study's start-state convention), and each forced recall k >= 2 updates it
    with the paper's rule. At each step the support ``F = M^T t`` over the N studied items is
    normalised to probabilities ``P_k``; the profile at a lag is the mean of ``P_k(k + lag)``
    (``kind="prob"``) or of ``log(max(P_k(k + lag), floor))`` (``kind="logsupport"``) over the
    steps where item k + lag exists. ``log P_k`` is the log-support up to a per-step constant,
    the analogue of pre-softmax attention scores (softmax(log P) = P).

    Parameters
    ----------
    beta_enc, beta_rec, gamma : sequence of float, optional
        Grid axes; default: the study's grid.
    kind : {"prob", "logsupport"}
    lags : sequence of int, optional
        Default -8..8.
    list_length : int
        N, the number of studied and forced items (default 100, as the heads' prompts).
    floor : float
        Probability floor before the log (the paper's variant gives exact zeros, e.g. all
        backward lags at beta_rec = 1, gamma = 0); recorded in the attrs. With
        ``kind="logsupport"`` the variable ``zero_support`` gives, per point and lag, the share
        of steps where the floor replaced a zero, and ``attrs["n_points_floored"]`` the number
        of grid points where that happened anywhere in the window.

    Returns
    -------
    xarray.Dataset
        ``lag_profile`` with dims (beta_enc, beta_rec, gamma, lag) and ``profile`` only;
        ``profile_kind`` ``"cmr_tf_prob"`` or ``"cmr_tf_logsupport"``.
    """
    if kind not in ("prob", "logsupport"):
        raise ProfileError(f"kind must be 'prob' or 'logsupport'; got {kind!r}")
    list_length = integer(list_length, "list_length", minimum=2)
    if not (isinstance(floor, (int, float, np.floating)) and 0.0 < float(floor) < 1.0):
        raise ProfileError(f"floor must be a probability in (0, 1); got {floor!r}")
    axes = _grid_axes(beta_enc, beta_rec, gamma)
    window = lag_window(STUDY_MAX_LAG if lags is None else lags)
    max_lag = int(np.abs(window).max())
    if max_lag >= list_length:
        raise ProfileError(f"lags must lie within -(N-1)..N-1 = {1 - list_length}..{list_length - 1}; got {window.tolist()}")
    b_enc, b_rec, g = _mesh(axes)
    prob, log_prob, zero = paper_tf.teacher_forced_grid(1.0 - b_enc, b_rec, g, int(list_length), max_lag, float(floor))
    index = window + max_lag
    values = {"profile": (prob if kind == "prob" else log_prob)[:, index]}
    if kind == "logsupport":  # explicit: where the log met a zero probability and the floor went in instead
        values["zero_support"] = zero[:, index]
    ds = _dataset(
        axes, window, values, f"cmr_tf_{kind}", "cmr.paper_teacher_forced_grid",
        list_length=int(list_length), floor=float(floor), teacher_forced=1,
    )
    ds.attrs["floor"] = float(floor)
    if kind == "logsupport":
        ds["zero_support"].attrs["long_name"] = "share of steps with probability exactly 0 at this lag (log floored)"
        ds.attrs["n_points_floored"] = int((zero[:, index] > 0).any(axis=1).sum())
    ds["profile"].attrs["long_name"] = (
        "mean retrieval probability at this lag, recall forced in study order" if kind == "prob"
        else "mean log retrieval probability at this lag, recall forced in study order"
    )
    return ds


def textbook_teacher_forced_grid(
    grid,
    *,
    fixed=None,
    kind: str = "prob",
    lags=None,
    list_length: int = STUDY_LIST_LENGTH,
    keying: str = "after",
) -> xr.Dataset:
    """Teacher-forced lag profiles of textbook CMR  on a grid of any parameters.

    Study the list, reinstate start context (B_start), then force recall of items 1..N in study
    order; after each forced recall k the support ``a = M_cf c`` over all studied items gives
    ``P_k = softmax(2 a / T)``. The profile at a lag is the mean over steps of ``P_k(k + lag)``
    (``kind="prob"``) or of ``log P_k(k + lag) = 2 a / T - log Z_k`` (``kind="logsupport"``,
    the analogue of pre-softmax attention scores with inverse temperature 2/T), over the steps
    where item k + lag exists.

    Parameters
    ----------
    grid : mapping of str to sequence of float
        Grid axes in cymr's names (e.g. ``{"B_enc": [...], "B_rec": [...], "T": [...]}``);
        they become the batch dims, in this order.
    fixed : mapping, optional
        Values of the other parameters (default: cmr.parameters.default_parameters()).
    kind : {"prob", "logsupport", "support"}
        ``support``: the mean support ``a = M_cf c`` itself (cymr floors it at 1e-6), the
        quantity a linear-attention reading maps to the attention score (docs/fitting.md).
    lags : sequence of int, optional
        Default -8..8.
    list_length : int
        N (default 100).
    keying : {"after", "before"}
        ``after`` (cymr): item j is stored in M_cf under the context right after it was studied,
        so the profile peaks at lag 0 or backward. ``before``: under the context before it
        (prefix matching, as the paper's variant and an induction head), so a forced recall of
        item k cues item k + 1.

    Returns
    -------
    xarray.Dataset
        ``lag_profile`` with dims (*grid, lag); attrs ``unit_kind="cmr_parameters"``,
        ``profile_kind`` ``"cmr_tf_prob"``, ``"cmr_tf_logsupport"`` or ``"cmr_tf_support"``, ``variant="textbook"``
        in the provenance together with the fixed parameters.
    """
    if kind not in ("prob", "logsupport", "support"):
        raise ProfileError(f"kind must be 'prob', 'logsupport' or 'support'; got {kind!r}")
    if keying not in ("after", "before"):
        raise ParameterError(f"keying must be 'after' (cymr) or 'before' (prefix matching); got {keying!r}")
    list_length = integer(list_length, "list_length", minimum=2)
    if not hasattr(grid, "items") or len(grid) == 0:
        raise ParameterError(f"grid must be a non-empty mapping of CMR parameter names to values; got {grid!r}")
    base = default_parameters()
    base.update(validate_parameters(dict(fixed or {}), partial=True))
    validate_parameters({name: base[name] for name in PARAMETER_NAMES})
    axes = {}
    for name, values in grid.items():
        arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
        if arr.ndim != 1 or arr.size == 0 or (arr.size > 1 and (np.diff(arr) <= 0).any()):
            raise ParameterError(f"grid axis {name} must be a non-empty strictly increasing 1-d sequence; got {values!r}")
        validate_parameters({name: float(v) for v in arr[[0, -1]]}, partial=True)
        axes[str(name)] = arr
    window = lag_window(STUDY_MAX_LAG if lags is None else lags)
    max_lag = int(np.abs(window).max())
    if max_lag >= list_length:
        raise ProfileError(f"lags must lie within {1 - list_length}..{list_length - 1}; got {window.tolist()}")
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    vectors = np.tile(np.array([base[name] for name in PARAMETER_NAMES]), (mesh[0].size, 1))
    for name, values in zip(axes, mesh):
        vectors[:, PARAMETER_NAMES.index(name)] = values.ravel()
    if {"Afc", "Dfc"} & set(axes) and (vectors[:, PARAMETER_NAMES.index("Afc")] + vectors[:, PARAMETER_NAMES.index("Dfc")] <= 0).any():
        validate_parameters({"Afc": 0.0, "Dfc": 0.0}, partial=True)  # raises the standard message
    prob, log_prob, support = textbook_tf.textbook_teacher_forced_grid(
        np.ascontiguousarray(vectors), int(list_length), max_lag, keying == "before")
    values = {"prob": prob, "logsupport": log_prob, "support": support}[kind][:, window + max_lag]
    ds = _dataset(
        axes, window, {"profile": values}, f"cmr_tf_{kind}", "cmr.textbook_teacher_forced_grid",
        variant="textbook", list_length=int(list_length), teacher_forced=1, keying=keying,
        fixed={name: base[name] for name in PARAMETER_NAMES if name not in axes},
    )
    ds["profile"].attrs["long_name"] = {
        "prob": "mean retrieval probability at this lag, recall forced in study order",
        "logsupport": "mean log retrieval probability (2a/T - log Z) at this lag, recall forced in study order",
        "support": "mean retrieval support a = M_cf c (floored at 1e-6) at this lag, recall forced in study order",
    }[kind]
    ds.attrs["keying"] = keying
    return ds


def cut_lag_window(profiles: xr.Dataset, lags) -> xr.Dataset:
    """Cut a distribution-valued CMR profile dataset to ``lags`` and renormalise to sum 1.

    The study cut its -8..+8 grid to -5..+5 this way before fitting. ``sem`` and
    ``sem_start`` are scaled by the same factor (first order). Only for ``profile_kind``
    ``cmr_mc_crp`` or ``cmr_tf_prob``; a new dataset is returned.
    """
    validate(profiles, "lag_profile")
    kind = profiles.attrs.get("profile_kind")
    if kind not in _DISTRIBUTION_KINDS:
        raise ProfileError(f"cut_lag_window renormalises distributions ({', '.join(_DISTRIBUTION_KINDS)}); got {kind!r}")
    window = lag_window(STUDY_MAX_LAG if lags is None else lags)
    have = profiles["lag"].values
    missing = np.setdiff1d(window, have)
    if missing.size:
        raise ProfileError(f"lags {missing.tolist()} are not in the dataset's lags {have.tolist()}")
    cut = profiles.sel(lag=window)
    mass = cut["profile"].sum("lag")
    out = cut.copy()
    for name in ("profile", "sem", "sem_start"):
        if name in out:
            out[name] = cut[name] / mass
            out[name].attrs = dict(cut[name].attrs)
    out.attrs = dict(profiles.attrs)
    return validate(out, "lag_profile")


def paper_lag_distribution(beta_enc: float, beta_rec: float, gamma: float, **options):
    """The study's Monte Carlo lag distribution of one parameter point, as a ``lag_profile`` dataset.

    Per trial, the share of its transitions made at each lag, averaged over trials and start
    positions and normalised to sum 1 over the lags (``profile_kind="cmr_mc_crp"``;
    docs/equations.md): a distribution over lags, not a lag-CRP (nothing is divided by the
    transitions possible at each lag). Keyword options as :func:`paper_mc_grid` (``lags=range(-5, 6)`` cuts to the
    study's fitting window and renormalises); the parameter dims are squeezed away.
    """
    for name, value in (("beta_enc", beta_enc), ("beta_rec", beta_rec), ("gamma", gamma)):
        if np.ndim(value) != 0:
            raise ParameterError(f"paper_lag_distribution takes one parameter point; {name} is {value!r} "
                                 "(use paper_mc_grid)")
    grid = paper_mc_grid(beta_enc=[beta_enc], beta_rec=[beta_rec], gamma=[gamma], **options)
    return grid.squeeze(("beta_enc", "beta_rec", "gamma"), drop=False)


paper_crp = deprecation.renamed("paper_crp", paper_lag_distribution)
