"""Power of the ablation test: passages for the paired tests, random sets for the rank tests, designs.

Paired t-test (two-sided, one sample of per-passage differences): with ``n`` passages and a
standardised effect ``d_z = mean / sd`` the statistic follows a noncentral t with ``n - 1``
degrees of freedom and noncentrality ``d_z sqrt(n)``; power is the probability that it falls
beyond the critical values at level ``alpha``. Under Holm's correction with ``m`` tests the
smallest p is compared with ``alpha / m`` (Bonferroni's level, which Holm's first step uses), so
``alpha / m`` gives a power that holds for every test of the family.

Rank test: with ``n`` null sets the smallest p is ``1 / (n + 1)``; Holm multiplies the smallest
p of ``m`` rank tests by ``m``, so a rank test can reach ``alpha`` only when ``m / (n + 1) < alpha``.
"""
from __future__ import annotations

import math

import numpy as np

from cmr.errors import ParameterError

__all__ = ["rank_family_size", "holm_rank_floor", "random_sets_for_holm", "paired_t_power", "passages_for_power",
           "power_lines", "DESIGNS", "design_lines"]


def rank_family_size(n_matched: int = 0, n_modes: int = 1, control: bool = False, n_measures: int = 1) -> int:
    """Rank tests in the Holm family: per measure and mode, top vs random, top vs layer-matched, control vs random."""
    if int(n_matched) < 0 or int(n_modes) not in (1, 2, 3) or int(n_measures) < 1:
        raise ParameterError(f"n_matched must be >= 0, n_modes 1 to 3 (zero, mean, resample) and n_measures >= 1; "
                             f"got n_matched={n_matched!r}, n_modes={n_modes!r}, n_measures={n_measures!r}")
    return int(n_measures) * int(n_modes) * (1 + (int(n_matched) > 0) + bool(control))


def holm_rank_floor(n_random: int, n_matched: int = 0, n_modes: int = 1, control: bool = False,
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
    m = rank_family_size(n_matched, n_modes, control, n_measures)
    return min(1.0, m / (max(int(n_random), int(n_matched)) + 1))


def random_sets_for_holm(m: int, alpha: float = 0.05) -> int:
    """Fewest null sets ``n`` with ``m / (n + 1) < alpha``: every one of ``m`` rank tests can then reach ``alpha``."""
    if int(m) < 1 or not 0 < float(alpha) < 1:
        raise ParameterError(f"m must be >= 1 and alpha in (0, 1); got m={m!r}, alpha={alpha!r}")
    return int(math.floor(int(m) / float(alpha)))


def paired_t_power(n: int, effect: float, sd: float, alpha: float = 0.05) -> float:
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


def passages_for_power(effect: float, sd: float, alpha: float = 0.05, m: int = 1, power: float = 0.8,
                       n_max: int = 100_000) -> int:
    """Fewest passages for ``power`` of the paired t-test at level ``alpha / m`` (Holm's first step)."""
    if not float(sd) > 0 or float(effect) == 0 or not np.isfinite(effect) or not 0 < float(power) < 1:
        raise ParameterError(f"passages_for_power needs a nonzero finite effect, sd > 0 and power in (0, 1); "
                             f"got effect={effect!r}, sd={sd!r}, power={power!r}")
    level = float(alpha) / int(m)
    low, high = 2, 2
    while paired_t_power(high, effect, sd, level) < power:
        low, high = high, high * 2
        if high > n_max:
            raise ParameterError(f"more than {n_max} passages needed for effect {effect:g} with sd {sd:g}")
    while low < high:  # power grows with n
        mid = (low + high) // 2
        if paired_t_power(mid, effect, sd, level) >= power:
            high = mid
        else:
            low = mid + 1
    return int(high)


def power_lines(result, alpha: float = 0.05, power: float = 0.8, m: int | None = None) -> list[str]:
    """Per measure, mode and comparison of an ``ablation`` result with measures: the per-passage sd of
    the paired differences, d_z, and the passages a paired t-test needs for ``power`` at ``alpha / m``.

    ``m`` defaults to the t-tests of the result's own Holm family (its finite ``measure_t_pvalue``).
    """
    if "measure_cohens_dz" not in result:
        return []
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
                    need = str(passages_for_power(mean, mean / dz, alpha, m, power))
                except ParameterError:  # a tiny d_z: beyond any design
                    need = "more than 100000"
                lines.append(f"power {measure} {mode} {comparison}: mean {mean:+.3f} nats, sd {mean / dz:.3f}, "
                             f"d_z {dz:+.2f}: {need} passages for {power:.0%} power at alpha {alpha:g}/{m}")
    return lines


#: presets of ``icl-cmr ablate --design``; explicit options override them. ``cpu``: the power
#: calculation of docs/ablation.md ("Power and the CPU design") on SmolLM2-135M, 2 cores, 2 hours.
DESIGNS = {
    "cpu": dict(n_passages=24, n_random=120, n_matched=0, mode="zero", measures="icl,bigram,repeated_tokens",
                dtype="float32"),
    "study": dict(n_passages=300, n_random=120, n_matched=50, mode="both", measures="icl"),
}


def design_lines() -> list[str]:
    """What each preset sets, for ``--help``."""
    return [f"{name}: " + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.items())
            for name, preset in DESIGNS.items()]
