"""Statistics of the causal test: paired tests, exact rank p-values, Holm's correction, intervals.

Shared by the study's ICL score (:mod:`icl_cmr.analyses.ablation`) and the measures beside it
(:mod:`icl_cmr.analyses.ablation_measures`). See docs/ablation.md, "The design".
"""
from __future__ import annotations

import warnings

import numpy as np

from cmr.errors import ParameterError

__all__ = ["paired_statistics", "rank_pvalue", "holm", "MIN_BOOTSTRAP_PASSAGES", "effect_intervals", "COMPARISONS",
           "NULL_FAMILIES", "STAT_NAMES", "comparisons_of", "comparison_statistics", "format_interval"]


# --- statistics --------------------------------------------------------------------------------


def paired_statistics(differences) -> dict:
    """Paired tests of per-passage differences against 0.

    Returns mean_difference, t_statistic, t_pvalue (two-sided one-sample t-test, i.e. paired),
    wilcoxon_pvalue (two-sided signed-rank) and cohens_dz = mean / sd (ddof 1). Degenerate
    samples (fewer than 2 passages, zero spread, all differences 0) give NaN where undefined.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    result = dict(mean_difference=float(d.mean()) if d.size else np.nan, t_statistic=np.nan, t_pvalue=np.nan,
                  wilcoxon_pvalue=np.nan, cohens_dz=np.nan)
    if d.size < 2:
        return result
    sd = d.std(ddof=1)
    if sd > 0:
        test = stats.ttest_1samp(d, 0.0)
        result.update(t_statistic=float(test.statistic), t_pvalue=float(test.pvalue), cohens_dz=float(d.mean() / sd))
    if np.any(d != 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small-sample / ties notes from scipy
            result["wilcoxon_pvalue"] = float(stats.wilcoxon(d).pvalue)
    return result


def rank_pvalue(value: float, null) -> float:
    """Exact permutation p of ``value`` among ``null`` draws: (1 + #{null >= value}) / (1 + n).

    Under the null that ``value`` is exchangeable with the ``n`` draws (the top set's mean
    effect is that of one more random set), ``P(p <= k / (n + 1)) = k / (n + 1)`` exactly, for
    every k (ties only make it conservative); the smallest possible p is ``1 / (n + 1)``.
    """
    null = np.asarray(null, dtype=np.float64)
    if null.size == 0:
        raise ParameterError("a rank test needs at least one null draw")
    return float((1 + np.sum(null >= value)) / (1 + null.size))


def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm 1979); NaN entries are left out of the family."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    flat, keep = p.ravel(), np.flatnonzero(np.isfinite(p.ravel()))
    order = keep[np.argsort(flat[keep], kind="stable")]
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * flat[order]) if m else np.empty(0)
    result = out.ravel()
    result[order] = np.minimum(adjusted, 1.0)
    return result.reshape(p.shape)


#: fewest passages for a bootstrap interval of d_z
MIN_BOOTSTRAP_PASSAGES = 10


def effect_intervals(differences, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> dict:
    """Intervals of paired differences: a t interval of the mean and a bootstrap interval of d_z.

    The d_z interval is the percentile interval of ``mean / sd`` over ``n_boot`` resamples of
    the passages (``numpy.random.default_rng(seed)``). The t interval needs 3 passages; the
    d_z interval needs :data:`MIN_BOOTSTRAP_PASSAGES` (resamples of a few passages have tiny
    spreads and give unbounded ratios); NaN below.
    """
    from scipy import stats

    d = np.asarray(differences, dtype=np.float64)
    out = dict(ci_low=np.nan, ci_high=np.nan, dz_ci_low=np.nan, dz_ci_high=np.nan)
    if d.size < 3:
        return out
    half = stats.t.ppf(0.5 + level / 2, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)
    out.update(ci_low=float(d.mean() - half), ci_high=float(d.mean() + half))
    if d.size < MIN_BOOTSTRAP_PASSAGES:
        return out
    draws = d[np.random.default_rng(seed).integers(0, d.size, size=(int(n_boot), d.size))]
    sd = draws.std(axis=1, ddof=1)
    dz = np.divide(draws.mean(axis=1), sd, out=np.full(sd.shape, np.nan), where=sd > 0)
    dz = dz[np.isfinite(dz)]
    if dz.size:
        out.update(dz_ci_low=float(np.quantile(dz, 0.5 - level / 2)), dz_ci_high=float(np.quantile(dz, 0.5 + level / 2)))
    return out


#: (comparison, the set, what it is compared with: "none", a null family, or another set)
COMPARISONS = (
    ("top_vs_none", "top", "none"),
    ("top_vs_random", "top", "random"),
    ("top_vs_layer_matched", "top", "layer_matched"),
    ("induction_vs_none", "induction", "none"),
    ("induction_vs_random", "induction", "random"),
    ("top_vs_induction", "top", "induction"),
)
NULL_FAMILIES = ("random", "layer_matched")
STAT_NAMES = ("mean_difference", "ci_low", "ci_high", "t_statistic", "t_pvalue", "wilcoxon_pvalue", "cohens_dz",
               "dz_ci_low", "dz_ci_high", "rank", "n_null", "rank_pvalue")


def comparisons_of(families) -> list[tuple[str, str, str]]:
    present = set(families)
    return [c for c in COMPARISONS if c[1] in present and (c[2] == "none" or c[2] in present)]


def comparison_statistics(effects: np.ndarray, families, seed: int, n_boot: int) -> tuple[list[str], np.ndarray]:
    """effects: (mode, head_set, passage). Returns comparison names and a (mode, comparison, stat) table."""
    families = np.asarray(families)
    comparisons = comparisons_of(families)
    table = np.full((effects.shape[0], len(comparisons), len(STAT_NAMES)), np.nan)
    for m in range(effects.shape[0]):
        per_set = {f: effects[m, families == f] for f in set(families)}
        for c, (_, name, against) in enumerate(comparisons):
            mine = per_set[name][0]
            if against == "none":
                d = mine
            elif against in NULL_FAMILIES:
                d = mine - per_set[against].mean(axis=0)
            else:
                d = mine - per_set[against][0]
            row = paired_statistics(d) | effect_intervals(d, n_boot, seed)
            if against in NULL_FAMILIES:
                null = per_set[against].mean(axis=1)
                row.update(rank=float(1 + np.sum(null > mine.mean())), n_null=float(null.size),
                           rank_pvalue=rank_pvalue(mine.mean(), null))
            table[m, c] = [row.get(k, np.nan) for k in STAT_NAMES]
    return [c[0] for c in comparisons], table


def format_interval(low: float, high: float, digits: int, needs: int) -> str:
    """``[low, high]``, or why there is none (too few passages for it)."""
    if np.isfinite(low) and np.isfinite(high):
        return f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    return f"[no interval: needs {needs} passages]"
