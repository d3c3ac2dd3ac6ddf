"""Statistics of the causal test: set-level rank tests, crossed set x article contrasts, paired tests.

A claim that a head set matters more than random sets is a claim about sets, so its primary
statistic is the set's place among the random sets: the exact permutation p of its mean effect
(:func:`rank_pvalue`) and ``z`` against the random sets' mean and sd. Beside it, the contrast of
the set with the random sets' mean is tested with set and article as crossed random effects
(:func:`crossed_contrast`). Paired tests (t, Wilcoxon, d_z) are kept for contrasts between fixed
sets (top vs induction, a set vs no ablation). Windows cut from one article are not independent:
contrasts and intervals use article means as their unit (:func:`unit_means`).

Shared by the study's ICL score (:mod:`icl_cmr.analyses.causal.ablation`) and the measures beside it
(:mod:`icl_cmr.analyses.causal.measures`). See docs/ablation.md, "The design".
"""
from __future__ import annotations

import warnings

import numpy as np

from cmr.checks import as_generator, seed_of
from cmr.deprecation import keyword_only, renamed, renamed_keywords
from cmr.errors import ParameterError
from cmr import multiple_comparisons

__all__ = ["paired_statistics", "rank_pvalue", "set_z", "crossed_contrast", "unit_means", "holm",
           "MIN_BOOTSTRAP_PASSAGES", "effect_intervals", "COMPARISONS", "NULL_FAMILIES", "STAT_NAMES", "HOLM_FAMILIES",
           "comparisons_of", "comparison_statistics", "format_interval", "comparison_text", "unit_name"]


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


def set_z(value: float, null) -> tuple[float, float, float]:
    """(z, null mean, null sd): ``value`` against the mean and sd (ddof 1) of the ``null`` draws.

    z is NaN with fewer than 2 draws or no spread among them."""
    null = np.asarray(null, dtype=np.float64)
    if null.size < 2:
        return np.nan, float(null.mean()) if null.size else np.nan, np.nan
    centre, spread = float(null.mean()), float(null.std(ddof=1))
    return (float((value - centre) / spread) if spread > 0 else np.nan), centre, spread


def unit_means(values, units) -> tuple[np.ndarray, np.ndarray]:
    """Means of ``values`` (..., n_passage) over the passages of each unit (an article).

    Returns the unit labels (sorted) and an array (..., n_unit). Article means make the article,
    not the window, the unit of inference: windows of one article share topic and vocabulary.
    """
    values = np.asarray(values, dtype=np.float64)
    units = np.asarray(units)
    if units.shape != values.shape[-1:]:
        raise ParameterError(f"one unit (article) label per passage expected: {values.shape[-1]} passages, "
                             f"{units.size} labels")
    labels, index = np.unique(units, return_inverse=True)
    counts = np.bincount(index, minlength=labels.size).astype(np.float64)
    flat = values.reshape(-1, values.shape[-1])
    sums = np.zeros((flat.shape[0], labels.size))
    for row in range(flat.shape[0]):
        sums[row] = np.bincount(index, weights=flat[row], minlength=labels.size)
    return labels, (sums / counts).reshape(values.shape[:-1] + (labels.size,))


@keyword_only
def crossed_contrast(effects, null, *, level: float = 0.95) -> dict:
    """A set's mean effect against a family of random sets, with set and unit as crossed random effects.

    Model (two-way random effects, one observation per set and unit): the effect of set ``s``
    on unit ``u`` is ``mu + a_s + b_u + e_su``, with a set effect ``a_s`` (variance
    ``sigma_set^2``), a unit effect ``b_u`` shared by all sets, and a residual. The contrast
    ``D = mean_u x_u - mean_{s,u} y_su`` of the set ``x`` with the family ``y`` removes ``b_u``;
    if the set is one more random set,

        Var(D) = sigma_set^2 (1 + 1/S) + v_x / U,

    ``v_x`` the variance over units of ``x_u - mean_s y_su`` (the set's own residual plus the
    family mean's). ``sigma_set^2`` is the method-of-moments estimate of the two-way layout
    without replication, ``(MS_sets - MS_residual) / U`` (0 if negative); the t statistic
    ``D / sqrt(Var(D))`` is referred to a t distribution with Satterthwaite's degrees of freedom.
    A paired t of ``x - mean_s y`` over units leaves ``sigma_set`` out and rejects for a random
    set more often the more units there are.

    Parameters
    ----------
    effects : array, shape (n_unit,)
        The set's effect per unit (passage or article mean).
    null : array, shape (n_set, n_unit)
        The random sets' effects on the same units.

    Returns
    -------
    dict with mean_difference, t_statistic, t_pvalue (two-sided), df, ci_low, ci_high,
    between_set_sd (``sigma_set``), residual_sd (``sqrt(MS_residual)``) and set_residual_sd
    (``sqrt(v_x)``); NaN where undefined (fewer than 2 sets or units, no spread).
    """
    from scipy import stats

    x = np.asarray(effects, dtype=np.float64)
    y = np.asarray(null, dtype=np.float64)
    if y.ndim != 2 or x.shape != y.shape[1:]:
        raise ParameterError(f"crossed_contrast needs effects (n_unit,) and null (n_set, n_unit); got {x.shape} "
                             f"and {y.shape}")
    keys = ("t_statistic", "t_pvalue", "df", "ci_low", "ci_high", "between_set_sd", "residual_sd", "set_residual_sd")
    out = dict.fromkeys(keys, np.nan)
    out["mean_difference"] = float(x.mean() - y.mean()) if x.size and y.size else np.nan
    n_set, n_unit = y.shape
    if n_set < 2 or n_unit < 2:
        return out
    set_means, unit_centres = y.mean(axis=1), y.mean(axis=0)
    ms_sets = n_unit * set_means.var(ddof=1)
    df_res = (n_set - 1) * (n_unit - 1)
    ms_res = float(np.sum((y - set_means[:, None] - unit_centres[None, :] + y.mean()) ** 2) / df_res)
    v_x = float((x - unit_centres).var(ddof=1))
    inflate = 1.0 + 1.0 / n_set
    # Var(D) as a combination of mean squares: (c, mean square, its df)
    terms = [(1.0 / n_unit, v_x, n_unit - 1)]
    if ms_sets > ms_res:
        terms += [(inflate / n_unit, ms_sets, n_set - 1), (-inflate / n_unit, ms_res, df_res)]
    variance = sum(c * ms for c, ms, _ in terms)
    out.update(between_set_sd=float(np.sqrt(max(ms_sets - ms_res, 0.0) / n_unit)), residual_sd=float(np.sqrt(ms_res)),
               set_residual_sd=float(np.sqrt(v_x)))
    if not variance > 0:
        return out
    df = variance ** 2 / sum((c * ms) ** 2 / d for c, ms, d in terms)
    se = np.sqrt(variance)
    t = out["mean_difference"] / se
    half = stats.t.ppf(0.5 + level / 2, df) * se
    out.update(t_statistic=float(t), t_pvalue=float(2 * stats.t.sf(abs(t), df)), df=float(df),
               ci_low=out["mean_difference"] - float(half), ci_high=out["mean_difference"] + float(half))
    return out


#: deprecated: Holm's adjusted p-values moved to :func:`cmr.holm` (kept for one release)
holm = renamed("holm", multiple_comparisons.holm, module="icl_cmr.analyses.causal.statistics", new_module="cmr")


#: fewest passages for a bootstrap interval of d_z
MIN_BOOTSTRAP_PASSAGES = 10


@keyword_only
@renamed_keywords(seed="rng")
def effect_intervals(differences, *, n_boot: int = 2000, rng=0, level: float = 0.95) -> dict:
    """Intervals of paired differences: a t interval of the mean and a bootstrap interval of d_z.

    ``differences`` are per unit: passages, or article means (then the bootstrap resamples
    articles, a cluster bootstrap). The d_z interval is the percentile interval of
    ``mean / sd`` over ``n_boot`` resamples of the units (``numpy.random.default_rng(rng)``; a
    Generator ``rng`` is used as is).
    The t interval needs 3 units; the d_z interval needs :data:`MIN_BOOTSTRAP_PASSAGES` (resamples
    of a few units have tiny spreads and give unbounded ratios); NaN below.
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
    draws = d[as_generator(rng).integers(0, d.size, size=(int(n_boot), d.size))]
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
              "dz_ci_low", "dz_ci_high", "rank", "n_null", "rank_pvalue", "z", "null_mean", "null_sd", "df",
              "between_set_sd", "residual_sd", "set_residual_sd", "n_units")
#: what each Holm family holds, as printed beside its adjusted p-values
HOLM_FAMILIES = {
    "primary": "the study's ICL score, every mode x comparison (rank tests and contrasts one family each)",
    "all measures": "every measure x mode x comparison (rank tests and contrasts one family each)",
}


def comparisons_of(families) -> list[tuple[str, str, str]]:
    present = set(families)
    return [c for c in COMPARISONS if c[1] in present and (c[2] == "none" or c[2] in present)]


@keyword_only
@renamed_keywords(seed="rng")
def comparison_statistics(effects: np.ndarray, families, *, rng, n_boot: int,
                          articles=None) -> tuple[list[str], np.ndarray]:
    """Statistics of every comparison: a (mode, comparison, stat) table over :data:`STAT_NAMES`.

    Parameters
    ----------
    effects : ndarray, shape (mode, head_set, passage)
    families : sequence of str, one per head set (``top``, ``induction``, :data:`NULL_FAMILIES`)
    rng : int, numpy.random.Generator or None
        Seed of the bootstrap interval of d_z: every interval uses this one seed (a Generator
        draws one, ``int(rng.integers(2**63))``; None draws one from fresh entropy).
    n_boot : int
        Resamples of the bootstrap interval of d_z.
    articles : sequence, optional
        The article of each passage. Contrasts and intervals then use article means as their
        unit (``n_units`` articles); without it every passage is its own unit.

    A set against a null family: the rank of its mean effect over passages among the family's
    (``rank``, ``rank_pvalue``: the primary test) and ``z`` against their mean and sd; the
    contrast with the family's mean effect by :func:`crossed_contrast` over units (``t_*``,
    ``ci_*``, ``df``, the variance components); no paired t, Wilcoxon or d_z. A set against no
    ablation or against another fixed set: paired tests over units (:func:`paired_statistics`,
    :func:`effect_intervals`).
    """
    seed = seed_of(rng)
    families = np.asarray(families)
    comparisons = comparisons_of(families)
    table = np.full((effects.shape[0], len(comparisons), len(STAT_NAMES)), np.nan)
    units = effects if articles is None else unit_means(effects, articles)[1]
    for m in range(effects.shape[0]):
        per_set = {f: effects[m, families == f] for f in set(families)}
        per_unit = {f: units[m, families == f] for f in set(families)}
        for c, (_, name, against) in enumerate(comparisons):
            mine = per_unit[name][0]
            if against in NULL_FAMILIES:
                null = per_set[against].mean(axis=1)
                mean = per_set[name][0].mean()
                z, centre, spread = set_z(mean, null)
                row = crossed_contrast(mine, per_unit[against])
                row.update(rank=float(1 + np.sum(null > mean)), n_null=float(null.size),
                           rank_pvalue=rank_pvalue(mean, null), z=z, null_mean=centre, null_sd=spread)
            else:
                d = mine if against == "none" else mine - per_unit[against][0]
                row = paired_statistics(d) | effect_intervals(d, n_boot=n_boot, rng=seed)
                row["df"] = float(d.size - 1)
            row["n_units"] = float(mine.size)
            table[m, c] = [row.get(k, np.nan) for k in STAT_NAMES]
    return [c[0] for c in comparisons], table


@keyword_only
def format_interval(low: float, high: float, *, digits: int, needs: int, units: str = "passages") -> str:
    """``[low, high]``, or why there is none (too few ``units`` for it)."""
    if np.isfinite(low) and np.isfinite(high):
        return f"[{low:+.{digits}f}, {high:+.{digits}f}]"
    return f"[no interval: needs {needs} {units}]"


def unit_name(result) -> str:
    """``articles`` when a result's contrasts use article means, else ``passages``."""
    return "articles" if result.attrs.get("article_source", "").startswith("source") else "passages"


@keyword_only
def comparison_text(v: dict, family: str, *, units: str = "passages") -> str:
    """A comparison's statistics in words: for a null family the rank test first (primary), then
    the crossed contrast; for fixed sets the paired tests. ``v`` maps stat names to floats."""
    holm = lambda key: f"Holm {v.get(key, np.nan):.3g}, family: {family}"  # noqa: E731
    n = v.get("n_units", np.nan)
    over = f" over {n:.0f} {units}" if np.isfinite(n) else ""
    if np.isfinite(v.get("rank_pvalue", np.nan)):
        return (f"rank {v['rank']:.0f} of {v['n_null'] + 1:.0f}, p {v['rank_pvalue']:.3f} "
                f"({holm('holm_rank_pvalue')}), "
                f"z {v.get('z', np.nan):+.2f} (random sets {v.get('null_mean', np.nan):+.3f} +- "
                f"{v.get('null_sd', np.nan):.3f}); contrast {v['mean_difference']:+.3f} nats "
                f"{format_interval(v['ci_low'], v['ci_high'], digits=3, needs=3, units=units)}{over}, "
                f"crossed sets x {units} t p "
                f"{v['t_pvalue']:.2g} ({holm('holm_t_pvalue')}), between-set sd {v.get('between_set_sd', np.nan):.3f}")
    text = (f"{v['mean_difference']:+.3f} nats "
            f"{format_interval(v['ci_low'], v['ci_high'], digits=3, needs=3, units=units)}{over}, "
            f"d_z {v['cohens_dz']:+.2f} "
            f"{format_interval(v['dz_ci_low'], v['dz_ci_high'], digits=2, needs=MIN_BOOTSTRAP_PASSAGES, units=units)}, "
            f"paired t p {v['t_pvalue']:.2g} ({holm('holm_t_pvalue')})")
    if np.isfinite(v.get("wilcoxon_pvalue", np.nan)):
        text += f", Wilcoxon p {v['wilcoxon_pvalue']:.2g}"
    return text
