"""Power of the ablation test: passages for the paired tests, random sets for the rank tests, designs.

Paired t-test (two-sided, one sample of per-passage differences): with ``n`` passages and a
standardised effect ``d_z = mean / sd`` the statistic follows a noncentral t with ``n - 1``
degrees of freedom and noncentrality ``d_z sqrt(n)``; power is the probability that it falls
beyond the critical values at level ``alpha``. Under Holm's correction with ``m`` tests the
smallest p is compared with ``alpha / m`` (Bonferroni's level, which Holm's first step uses), so
``alpha / m`` gives a power that holds for every test of the family.

Rank test: with ``n`` null sets the smallest p is ``1 / (n + 1)``; Holm multiplies the smallest
p of ``m`` rank tests by ``m``, so a rank test can reach ``alpha`` only when ``m / (n + 1) < alpha``.
Its power depends on where the set's mean effect falls among the random sets' mean effects,
whose spread has two parts: the between-set sd ``sigma_set`` of the sets' true effects and the
passage-level noise ``sigma_res / sqrt(U)`` over ``U`` units (:func:`rank_test_power`). More
passages shrink only the second: the set's z against the random sets tends to
``effect / sigma_set``, and the power to that of a fixed value at that z, whatever the number of
passages (:func:`rank_power_lines`); below about 2.4 sigma_set (the 99.2th percentile, Holm's
0.05 / 6) that limit is small, and fewer passages may even give more power, by luck.
"""
from __future__ import annotations

import math

import numpy as np

from cmr.deprecation import keyword_only
from cmr.errors import ParameterError

__all__ = ["rank_family_size", "holm_rank_floor", "random_sets_for_holm", "paired_t_power", "passages_for_power",
           "rank_test_power", "rank_design_power", "power_lines"]


@keyword_only
def rank_family_size(*, n_matched: int = 0, n_modes: int = 1, control: bool = False, n_measures: int = 1) -> int:
    """Rank tests in the Holm family: per measure and mode, top vs random, top vs layer-matched, control vs random."""
    if int(n_matched) < 0 or int(n_modes) not in (1, 2, 3) or int(n_measures) < 1:
        raise ParameterError(f"n_matched must be >= 0, n_modes 1 to 3 (zero, mean, resample) and n_measures >= 1; "
                             f"got n_matched={n_matched!r}, n_modes={n_modes!r}, n_measures={n_measures!r}")
    return int(n_measures) * int(n_modes) * (1 + (int(n_matched) > 0) + bool(control))


@keyword_only
def holm_rank_floor(n_random: int, *, n_matched: int = 0, n_modes: int = 1, control: bool = False,
                    n_measures: int = 1) -> float:
    """The smallest Holm-adjusted rank p-value a design can give.

    The rank family holds, per measure and mode, the top set against the random sets, against
    the layer-matched sets (``n_matched > 0``) and the control against the random sets
    (``control``): ``m`` tests. A rank p is at least ``1 / (n + 1)`` with ``n`` null sets, and
    Holm multiplies the smallest p of the family by ``m``, so no adjusted p falls below
    ``m / (max(n_random, n_matched) + 1)``. At or above 0.05, no rank test of the design can be
    significant after correction, whatever the data.
    """
    if int(n_random) < 1:
        raise ParameterError(f"n_random must be >= 1 (the rank test needs random sets); got {n_random!r}")
    m = rank_family_size(n_matched=n_matched, n_modes=n_modes, control=control, n_measures=n_measures)
    return min(1.0, m / (max(int(n_random), int(n_matched)) + 1))


@keyword_only
def random_sets_for_holm(m: int, *, alpha: float = 0.05) -> int:
    """Fewest null sets ``n`` with ``m / (n + 1) < alpha``: every one of ``m`` rank tests can then reach ``alpha``."""
    if int(m) < 1 or not 0 < float(alpha) < 1:
        raise ParameterError(f"m must be >= 1 and alpha in (0, 1); got m={m!r}, alpha={alpha!r}")
    return int(math.floor(int(m) / float(alpha)))


@keyword_only
def paired_t_power(n: int, effect: float, sd: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test with ``n`` passages for a mean difference ``effect`` of spread ``sd``."""
    from scipy import stats

    if int(n) < 2 or not float(sd) > 0 or not 0 < float(alpha) < 1:
        raise ParameterError(f"power needs n >= 2 passages, sd > 0 and alpha in (0, 1); got n={n!r}, sd={sd!r}, "
                             f"alpha={alpha!r}")
    df = int(n) - 1
    crit = stats.t.ppf(1 - float(alpha) / 2, df)
    shift = abs(float(effect)) / float(sd) * math.sqrt(int(n))  # power is symmetric in the effect's sign
    near, far = stats.nct.sf(crit, df, shift), stats.nct.cdf(-crit, df, shift)
    # SciPy's far tail is NaN where it underflows (large shifts); it is 0 to double precision there
    return float(near + (far if np.isfinite(far) else 0.0))


@keyword_only
def passages_for_power(effect: float, sd: float, *, alpha: float = 0.05, m: int = 1, power: float = 0.8,
                       n_max: int = 100_000) -> int:
    """Fewest passages for ``power`` of the paired t-test at level ``alpha / m`` (Holm's first step)."""
    if not float(sd) > 0 or float(effect) == 0 or not np.isfinite(effect) or not 0 < float(power) < 1:
        raise ParameterError(f"passages_for_power needs a nonzero finite effect, sd > 0 and power in (0, 1); "
                             f"got effect={effect!r}, sd={sd!r}, power={power!r}")
    level = float(alpha) / int(m)
    low, high = 2, 2
    while paired_t_power(high, effect, sd, alpha=level) < power:
        low, high = high, high * 2
        if high > n_max:
            raise ParameterError(f"more than {n_max} passages needed for effect {effect:g} with sd {sd:g}")
    while low < high:  # power grows with n
        mid = (low + high) // 2
        if paired_t_power(mid, effect, sd, alpha=level) >= power:
            high = mid
        else:
            low = mid + 1
    return int(high)


@keyword_only
def rank_test_power(z: float, n_random: int, *, alpha: float = 0.05, m: int = 1, z_sd: float = 0.0) -> float:
    """Power of the rank test of one set among ``n_random`` random sets at level ``alpha / m``.

    The random sets' mean effects are taken as normal with mean 0 and sd 1 (the units of ``z``);
    the set's mean effect is normal with mean ``z`` and sd ``z_sd`` (its own passage-level
    noise in the same units; 0: a fixed value). The p ``(1 + c) / (1 + n)``, ``c`` the random
    sets at or above the set's, is at most the level when ``c <= k = floor(level (n + 1)) - 1``;
    given the set's value ``t``, ``c`` is binomial ``(n, 1 - Phi(t))``, and the power is its
    probability of at most ``k``, averaged over ``t`` (Gauss-Hermite, 80 nodes). 0 when even
    ``c = 0`` cannot reach the level (``(n + 1) level < 1``).
    """
    from scipy import stats

    n = int(n_random)
    if n < 1 or int(m) < 1 or not 0 < float(alpha) < 1 or not float(z_sd) >= 0 or not np.isfinite(z):
        raise ParameterError(f"rank_test_power needs n_random >= 1, m >= 1, alpha in (0, 1), z_sd >= 0 and a finite "
                             f"z; got n_random={n_random!r}, m={m!r}, alpha={alpha!r}, z_sd={z_sd!r}, z={z!r}")
    k = math.floor(float(alpha) / int(m) * (n + 1) + 1e-12) - 1
    if k < 0:
        return 0.0
    if float(z_sd) == 0:
        return float(stats.binom.cdf(k, n, stats.norm.sf(float(z))))
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    values = float(z) + float(z_sd) * nodes
    return float(np.sum(weights * stats.binom.cdf(k, n, stats.norm.sf(values))) / np.sqrt(2 * np.pi))


@keyword_only
def rank_design_power(effect: float, between_set_sd: float, residual_sd: float, n_units: int, n_random: int,
                      *, alpha: float = 0.05, m: int = 1, set_residual_sd: float | None = None) -> float:
    """Power of the rank test for a set ``effect`` nats above the random sets' mean, with ``n_units`` units.

    The random sets' mean effects spread with sd ``sqrt(between_set_sd^2 + residual_sd^2 / n_units)``;
    the set's own mean has noise ``set_residual_sd / sqrt(n_units)`` (default ``residual_sd``).
    ``n_units=inf`` gives the ceiling: z = effect / between_set_sd.
    """
    spread_sq = float(between_set_sd) ** 2 + float(residual_sd) ** 2 / float(n_units)
    if not spread_sq > 0:
        raise ParameterError(f"the random sets need a spread (between_set_sd or residual_sd > 0); got "
                             f"{between_set_sd!r}, {residual_sd!r}")
    own = float(residual_sd if set_residual_sd is None else set_residual_sd) / math.sqrt(float(n_units))
    return rank_test_power(float(effect) / math.sqrt(spread_sq), n_random, alpha=alpha, m=m,
                           z_sd=own / math.sqrt(spread_sq))


@keyword_only
def rank_power_lines(result, *, alpha: float = 0.05, m: int | None = None, more_sets: int = 1000,
                     prefix: str = "measure_") -> list[str]:
    """Per null comparison of an ``ablation`` result: the between-set sd the random sets give, the
    rank test's power at the result's own size and effect, with ``more_sets`` random sets, with 4x
    the units, and in the limit of infinitely many units, at ``alpha / m`` (Holm's first step;
    ``m``: the finite rank p-values of the family)."""
    p_name = f"{prefix}rank_pvalue"
    if p_name not in result:
        return []
    if m is None:
        m = int(np.isfinite(result[p_name].values).sum())
    lines = []
    measures = result["measure"].values if "measure" in result[p_name].dims else [None]
    for measure in measures:
        for mode in result["mode"].values:
            for comparison in result["comparison"].values:
                where = dict(mode=mode, comparison=comparison, **({} if measure is None else {"measure": measure}))
                v = {k: float(result[f"{prefix}{k}"].sel(where)) for k in (
                    "rank_pvalue", "mean_difference", "between_set_sd", "residual_sd", "set_residual_sd", "n_units",
                    "n_null")}
                if not (np.isfinite(v["rank_pvalue"]) and all(np.isfinite(list(v.values())))):
                    continue
                if not v["between_set_sd"] ** 2 + v["residual_sd"] ** 2 > 0:
                    continue
                args = (v["mean_difference"], v["between_set_sd"], v["residual_sd"])
                kw = dict(alpha=alpha, m=m, set_residual_sd=v["set_residual_sd"])
                now = rank_design_power(*args, int(v["n_units"]), int(v["n_null"]), **kw)
                many = rank_design_power(*args, int(v["n_units"]), more_sets, **kw)
                wider = rank_design_power(*args, 4 * int(v["n_units"]), more_sets, **kw)
                limit = (rank_design_power(*args, math.inf, more_sets, **kw) if v["between_set_sd"] > 0
                         else float(v["mean_difference"] > 0))
                label = f"{'' if measure is None else str(measure) + ' '}{mode} {comparison}"
                lines.append(f"rank power {label}: effect {v['mean_difference']:+.3f} nats over the random sets' mean, "
                             f"between-set sd {v['between_set_sd']:.3f}, residual sd {v['residual_sd']:.3f}: "
                             f"{now:.0%} with {int(v['n_null'])} sets and {int(v['n_units'])} units, {many:.0%} with "
                             f"{more_sets} sets, {wider:.0%} with {more_sets} sets and {4 * int(v['n_units'])} units, "
                             f"{limit:.0%} in the limit of many units (alpha {alpha:g}/{m})")
    return lines


@keyword_only
def power_lines(result, *, alpha: float = 0.05, power: float = 0.8, m: int | None = None) -> list[str]:
    """Per measure, mode and comparison of an ``ablation`` result with measures: for contrasts of
    fixed sets the per-unit sd of the paired differences, d_z, and the units a paired t-test needs
    for ``power`` at ``alpha / m``; for sets against random sets the rank test's power
    (:func:`rank_power_lines`).

    ``m`` defaults to the t-tests of the result's own Holm family (its finite ``measure_t_pvalue``).
    """
    if "measure_cohens_dz" not in result:
        return rank_power_lines(result, alpha=alpha, prefix="")
    if m is None:
        m = int(np.isfinite(result["measure_t_pvalue"].values).sum())
    lines = []
    for measure in result["measure"].values:
        for mode in result["mode"].values:
            for comparison in result["comparison"].values:
                row = result.sel(measure=measure, mode=mode, comparison=comparison)
                mean, dz = float(row["measure_mean_difference"]), float(row["measure_cohens_dz"])
                if not (np.isfinite(dz) and dz != 0):
                    continue
                try:
                    need = str(passages_for_power(mean, mean / dz, alpha=alpha, m=m, power=power))
                except ParameterError:  # a tiny d_z: beyond any design
                    need = "more than 100000"
                lines.append(f"power {measure} {mode} {comparison}: mean {mean:+.3f} nats, sd {mean / dz:.3f}, "
                             f"d_z {dz:+.2f}: {need} units for {power:.0%} power at alpha {alpha:g}/{m}")
    return lines + rank_power_lines(result, alpha=alpha)

