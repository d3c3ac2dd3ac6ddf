"""Least-squares regressions of ablation effects (plain numpy; docs/dissociation.md).

:func:`nested_regression` asks how much a block of features adds to a baseline model: the
share of the baseline's residual variance the block explains (partial R^2), its adjusted form
(centred near 0 when the block explains nothing), a bootstrap interval over rows and a
permutation p that permutes the block's rows. :func:`ols_table` gives coefficients with their
classical standard errors and t tests.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed_keywords
from cmr.errors import ParameterError, SchemaError
from cmr.multiple_comparisons import holm
from cmr.schema import provenance_attrs

from .dissociation_io import HOLM_FAMILIES, KIND

__all__ = ["design_matrix", "fit_rss", "nested_regression", "ols_table", "head_regression", "NESTED_STATS",
           "BASELINE_FEATURES", "CMR_FEATURES"]

#: what :func:`nested_regression` returns, in this order
NESTED_STATS = ("n_rows", "r2_base", "r2_full", "delta_r2", "partial_r2", "partial_r2_adjusted", "ci_low", "ci_high",
                "f_statistic", "f_pvalue", "permutation_pvalue")


@keyword_only
def design_matrix(columns, *, categorical=None) -> np.ndarray:
    """An intercept, the ``columns`` (n_row each) and one dummy per level of ``categorical`` but the first."""
    parts = [np.ones(len(columns[0]) if columns else len(categorical))]
    parts += [np.asarray(c, dtype=np.float64) for c in columns]
    if categorical is not None:
        levels = np.unique(np.asarray(categorical))
        parts += [(np.asarray(categorical) == level).astype(np.float64) for level in levels[1:]]
    return np.column_stack(parts)


def fit_rss(x, y) -> tuple[float, int]:
    """(residual sum of squares, rank of ``x``) of the least-squares fit of ``y`` on ``x``."""
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ coef
    return float(residual @ residual), int(rank)


def _basis(x) -> np.ndarray:
    """An orthonormal basis of the column space of ``x`` (its numerical rank's worth of columns)."""
    if x.shape[1] == 0:
        return x
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    return u[:, s > (s[0] if s.size else 0.0) * max(x.shape) * np.finfo(np.float64).eps]


def _stats(base, extra, y, q_base=None):
    q_base = _basis(base) if q_base is None else q_base
    y_res = y - q_base @ (q_base.T @ y)
    extra_res = extra - q_base @ (q_base.T @ extra)
    q_extra = _basis(extra_res) if np.abs(extra_res).max() > 0 else extra_res[:, :0]
    rss_base = float(y_res @ y_res)
    rss_full = max(rss_base - float(np.sum((q_extra.T @ y_res) ** 2)), 0.0)
    tss = float(((y - y.mean()) ** 2).sum())
    n, p_base = y.size, q_base.shape[1]
    p_full = p_base + q_extra.shape[1]
    partial = (rss_base - rss_full) / rss_base if rss_base > 0 else np.nan
    df_full, df_extra = n - p_full, p_full - p_base
    adjusted = 1.0 - (rss_full / df_full) / (rss_base / (n - p_base)) if df_full > 0 and rss_base > 0 else np.nan
    return dict(r2_base=1 - rss_base / tss if tss > 0 else np.nan, r2_full=1 - rss_full / tss if tss > 0 else np.nan,
                partial_r2=partial, partial_r2_adjusted=adjusted, df_full=df_full, df_extra=df_extra,
                rss_base=rss_base, rss_full=rss_full)


@renamed_keywords(seed="rng")
def nested_regression(base, extra, y, *, n_boot: int = 2000, n_perm: int = 2000, rng=0,
                      level: float = 0.95) -> dict:
    """What the ``extra`` columns explain of ``y`` beyond the ``base`` design matrix.

    Parameters
    ----------
    base : array, shape (n_row, p_base)
        The baseline design, its intercept included (:func:`design_matrix`).
    extra : array, shape (n_row, k)
        The added block (e.g. CMR features).
    y : array, shape (n_row,)
    n_boot : int
        Bootstrap resamples of the rows for the interval of ``partial_r2_adjusted``.
    n_perm : int
        Permutations of the rows of ``extra`` (jointly, so the block keeps its own correlations)
        for ``permutation_pvalue`` of ``partial_r2``: ``(1 + #{permuted >= observed}) / (1 + n_perm)``.
    rng : int, numpy.random.Generator or None
        ``numpy.random.default_rng(rng)`` for both (default 0; a Generator is used as is).

    Returns
    -------
    dict over :data:`NESTED_STATS`: ``delta_r2 = r2_full - r2_base``; ``partial_r2 = (RSS_base -
    RSS_full) / RSS_base``; ``partial_r2_adjusted = 1 - (RSS_full / df_full) / (RSS_base /
    df_base)``, about 0 (and possibly negative) when the block explains nothing;
    ``ci_low``/``ci_high`` its percentile bootstrap interval over rows; the classical F test of
    the block (``f_statistic``, ``f_pvalue``) and the permutation p. Rows with a non-finite value
    are left out (``n_rows`` counts those kept).
    """
    from scipy import stats

    base, extra, y = (np.asarray(a, dtype=np.float64) for a in (base, extra, y))
    if extra.ndim == 1:
        extra = extra[:, None]
    if base.ndim != 2 or extra.shape[0] != base.shape[0] or y.shape != base.shape[:1]:
        raise ParameterError(f"nested_regression needs base (n, p), extra (n, k) and y (n,); got {base.shape}, "
                             f"{extra.shape} and {y.shape}")
    keep = np.isfinite(base).all(axis=1) & np.isfinite(extra).all(axis=1) & np.isfinite(y)
    base, extra, y = base[keep], extra[keep], y[keep]
    out = dict.fromkeys(NESTED_STATS, np.nan)
    out["n_rows"] = float(y.size)
    if y.size < base.shape[1] + extra.shape[1] + 2:
        return out
    observed = _stats(base, extra, y)
    out.update({k: observed[k] for k in ("r2_base", "r2_full", "partial_r2", "partial_r2_adjusted")})
    out["delta_r2"] = observed["r2_full"] - observed["r2_base"]
    if observed["df_extra"] > 0 and observed["df_full"] > 0 and observed["rss_full"] > 0:
        f = ((observed["rss_base"] - observed["rss_full"]) / observed["df_extra"]) / (observed["rss_full"] /
                                                                                     observed["df_full"])
        out.update(f_statistic=float(f), f_pvalue=float(stats.f.sf(f, observed["df_extra"], observed["df_full"])))
    rng = as_generator(rng)
    if n_perm > 0 and np.isfinite(observed["partial_r2"]):
        q_base = _basis(base)
        null = np.array([_stats(base, extra[rng.permutation(y.size)], y, q_base)["partial_r2"]
                         for _ in range(int(n_perm))])
        out["permutation_pvalue"] = float((1 + np.sum(null >= observed["partial_r2"] - 1e-12)) / (1 + n_perm))
    if n_boot > 0:
        draws = []
        for _ in range(int(n_boot)):
            rows = rng.integers(0, y.size, y.size)
            draws.append(_stats(base[rows], extra[rows], y[rows])["partial_r2_adjusted"])
        draws = np.asarray(draws)
        draws = draws[np.isfinite(draws)]
        if draws.size:
            out.update(ci_low=float(np.quantile(draws, 0.5 - level / 2)),
                       ci_high=float(np.quantile(draws, 0.5 + level / 2)))
    return {k: float(v) for k, v in out.items()}


def ols_table(x, y, names) -> dict:
    """Coefficients of ``y`` on the columns of ``x`` (its intercept first, named ``names``).

    Returns a dict of arrays over the columns: ``estimate``, ``se`` (classical, from
    ``sigma^2 (X'X)^+``), ``t_statistic`` and two-sided ``t_pvalue`` (residual df
    ``n - rank``); a column without variation gets NaN throughout, and collinear columns get
    estimates without standard errors. Rows with a non-finite value are left out; ``n_rows`` and ``r2`` besides.
    """
    from scipy import stats

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != y.size or x.shape[1] != len(names):
        raise ParameterError(f"ols_table needs x (n, p), y (n,) and p names; got {x.shape}, {y.shape}, {len(names)}")
    keep = np.isfinite(x).all(axis=1) & np.isfinite(y)
    x, y = x[keep], y[keep]
    nan = np.full(x.shape[1], np.nan)
    out = dict(estimate=nan.copy(), se=nan.copy(), t_statistic=nan.copy(), t_pvalue=nan.copy(), n_rows=float(y.size),
               r2=np.nan)
    if y.size < 2:
        return out
    # a column without variation (besides the intercept) cannot be identified: left out of the fit, NaN
    varies = np.array([j == 0 or np.ptp(x[:, j]) > 0 for j in range(x.shape[1])])
    used = x[:, varies]
    coef, _, rank, _ = np.linalg.lstsq(used, y, rcond=None)
    residual = y - used @ coef
    df = y.size - rank
    out["estimate"][varies] = coef
    tss = float(((y - y.mean()) ** 2).sum())
    out["r2"] = 1 - float(residual @ residual) / tss if tss > 0 else np.nan
    if df < 1 or rank < used.shape[1]:
        return out
    sigma2 = float(residual @ residual) / df
    out["se"][varies] = np.sqrt(np.clip(np.diag(sigma2 * np.linalg.inv(used.T @ used)), 0, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        t = out["estimate"] / out["se"]
    out.update(t_statistic=t, t_pvalue=np.where(np.isfinite(t), 2 * stats.t.sf(np.abs(t), df), np.nan))
    return out


#: baseline and CMR features of the single-head regression (variables of the head table)
BASELINE_FEATURES = ("induction_score", "previous_token_score", "duplicate_token_score")
CMR_FEATURES = ("distance", "forward_effect", "beta_enc")


@renamed_keywords(seed="rng")
def head_regression(effects, table, *, layer_terms: str = "factor", n_boot: int = 2000, n_perm: int = 2000,
                    rng=0, primary_measure: str = "bigram"):
    """Experiment ``heads``: what the CMR features explain of single-head effects beyond the baseline.

    Parameters
    ----------
    effects : xarray.Dataset
        ``head_mean_effect`` (measure, mode, layer, head) (:func:`~.head_effects.single_head_effects`,
        or a ``dissociation`` file holding it); heads with NaN effects (layers not ablated) are left out.
    table : xarray.Dataset
        The head table (:func:`~.dissociation.head_table`).
    layer_terms : {"factor", "linear"}
        Layer in the baseline as a factor (one dummy per layer but the first) or as one number.
    n_boot, n_perm, rng
        As for :func:`nested_regression` (bootstrap over heads; permutation of the CMR
        features' rows across heads, jointly); every (measure, mode) uses the same seed (a
        Generator ``rng`` draws one, ``int(rng.integers(2**63))``).

    Returns
    -------
    Dataset of kind ``dissociation`` (experiment ``heads``) with the effects and, over (measure,
    mode), ``head_<stat>`` for :data:`NESTED_STATS`, ``head_holm_pvalue`` (family ``primary``: the
    permutation p on ``primary_measure``) and ``head_measure_holm_pvalue`` (``all measures``);
    ``head_cmr_coefficient`` (measure, mode, feature): the full model's coefficients per sd of each
    CMR feature.
    """
    seed = seed_of(rng)
    if layer_terms not in ("factor", "linear"):
        raise ParameterError(f"layer_terms must be 'factor' or 'linear'; got {layer_terms!r}")
    if "head_mean_effect" not in effects:
        raise SchemaError("head_regression needs head_mean_effect (measure, mode, layer, head): icl-cmr dissociate "
                          "writes it (experiment heads)")
    mean = effects["head_mean_effect"].transpose("measure", "mode", "layer", "head")
    table = table.sel(layer=mean["layer"], head=mean["head"])
    layers = np.broadcast_to(table["layer"].values[:, None], (table.sizes["layer"], table.sizes["head"])).ravel()
    base_cols = [table[name].values.ravel() for name in BASELINE_FEATURES]
    extra = np.column_stack([table[name].values.ravel() for name in CMR_FEATURES])
    measures, modes = [str(m) for m in mean["measure"].values], [str(m) for m in mean["mode"].values]
    stats = np.full((len(measures), len(modes), len(NESTED_STATS)), np.nan)
    coefficients = np.full((len(measures), len(modes), len(CMR_FEATURES)), np.nan)
    for m in range(len(measures)):
        for d in range(len(modes)):
            y = mean.values[m, d].ravel()
            keep = np.isfinite(y) & np.isfinite(np.column_stack(base_cols)).all(axis=1) & np.isfinite(extra).all(1)
            if layer_terms == "factor":
                base = design_matrix([c[keep] for c in base_cols], categorical=layers[keep])
            else:
                base = design_matrix([c[keep] for c in base_cols] + [layers[keep].astype(np.float64)])
            result = nested_regression(base, extra[keep], y[keep], n_boot=n_boot, n_perm=n_perm, rng=seed)
            stats[m, d] = [result[k] for k in NESTED_STATS]
            if keep.sum() > base.shape[1] + extra.shape[1]:
                spread = extra[keep].std(axis=0)
                scaled = extra[keep] / np.where(spread > 0, spread, 1.0)
                coef = np.linalg.lstsq(np.column_stack([base, scaled]), y[keep], rcond=None)[0]
                coefficients[m, d] = coef[base.shape[1]:]
    perm = stats[..., NESTED_STATS.index("permutation_pvalue")]
    primary = np.where(np.array([m == primary_measure for m in measures])[:, None], perm, np.nan)
    ds = xr.Dataset(coords={"measure": measures, "mode": modes, "feature": list(CMR_FEATURES)})
    for k, name in enumerate(NESTED_STATS):
        ds[f"head_{name}"] = (("measure", "mode"), stats[..., k])
    ds["head_holm_pvalue"] = (("measure", "mode"), holm(primary))
    ds["head_measure_holm_pvalue"] = (("measure", "mode"), holm(perm))
    ds["head_cmr_coefficient"] = (("measure", "mode", "feature"), coefficients)
    ds["head_cmr_coefficient"].attrs["long_name"] = "full-model coefficient per sd of the CMR feature (nats)"
    ds = ds.merge(effects[[v for v in ("head_effect", "head_mean_effect") if v in effects]])
    details = dict(baseline=",".join(BASELINE_FEATURES) + f",layer ({layer_terms})",
                   cmr_features=",".join(CMR_FEATURES),
                   n_boot=int(n_boot), n_perm=int(n_perm), seed=int(seed), primary_measure=primary_measure,
                   cmr_like_rule=table.attrs.get("cmr_like_rule", ""),
                   effects_provenance=effects.attrs.get("provenance", ""))
    ds.attrs.update({k: v for k, v in effects.attrs.items() if k in ("layers", "n_passages_done", "seconds")})
    ds.attrs.update(provenance_attrs(KIND, "icl_cmr.analyses.causal.regression.head_regression", **details))
    ds.attrs.update(experiments="heads", primary_measure=primary_measure, layer_terms=layer_terms,
                    cmr_like_rule=details["cmr_like_rule"],
                    holm_families=json.dumps(HOLM_FAMILIES["heads"]))
    return ds
