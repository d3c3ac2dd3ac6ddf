"""``icl-cmr null``: is each unit's CMR fit better than profiles without temporal structure give?"""
from __future__ import annotations

HELP = "per-unit p-values of the CMR distance against permuted-lag and smooth structureless nulls"

DESCRIPTION = """\
The CMR distance divides by each unit's own variance, so "distance < 0.5" (the study's
"CMR-like") is passed by a third of structureless random profiles. This command fits every
unit of a lag-profile file and, with the same fit, two nulls of it:

  permuted  the unit's own values with the lags shuffled (--n-null times)
  smooth    structureless AR(1) profiles as rough as the unit (the --n-null nearest in
            roughness out of 20,000)

and gives per unit p_permuted, p_smooth, p_value = max of the two, a calibrated threshold (the
--alpha quantile of the null distances) and beyond_chance = p_value <= alpha. It prints the share
of units below 0.5, the share beyond chance and how often null profiles pass 0.5. See
docs/null-models.md.

Both nulls are symmetric under lag reversal, so a symmetric peak at lag 0 can be CMR-like
beyond chance. Beside the test, every unit gets its forward asymmetry (profile(+1) - profile(-1),
over the profile's sd across lags; asymmetry_sum over lags 1..5 in the default windows) and
p_asymmetry, the two-sided p against a symmetric profile with the unit's own sampling error
(its sem variable); forward_beyond_chance / backward_beyond_chance = p_asymmetry <= alpha with
that sign.

Two definitions of "CMR-like" are reported side by side (docs/null-models.md):
  study   d < 0.5 and beyond both nulls (cmr_like_study)
  strict  also (i) attention probability mass on lags -5..5 at least 3 x what uniform
          attention over the visible keys puts there (heads with probabilities; not
          applicable to recall lag-CRPs, and said so), (ii) a forward effect
          (profile(+1) - profile(-1)) / range of at least 0.1, beside its significance, and
          (iii) the mirrored profile (lags reversed) not CMR-like beyond chance: a symmetric
          lag-0 peak fails (cmr_like_strict)
Every unit also gets amplitude (the profile's range), attention_mass, mass_ratio,
forward_effect, mirror_distance and p_mirror.

Grid, lags and objective as for icl-cmr fit (default: the published grid if found, lags -5..5
for heads and -5..-1, 1..5 for recall lag-CRPs, objective paper).

The output's extension picks the format: .nc (the dataset), .csv or .parquet (one row per unit).

Examples:
  icl-cmr null heads.nc -o heads_null.csv
  icl-cmr null morton_crp.nc --objective lsq --n-null 500 -o human_null.nc
"""


def register(sub):
    import argparse

    from .options import add_profile_fit_options

    p = sub.add_parser("null", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_profile_fit_options(p, "NULL.nc")
    p.add_argument("--n-null", type=int, default=200, metavar="N", help="null profiles per unit and null (default 200)")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the test and the thresholds (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations and the smooth bank (default 0)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import CMR_LIKE_DISTANCE, cmr_like_null, load_dataset, write_result
    from cmr.io import result_format
    from ...adapters.published_grid import load_grid
    from .options import profile_fit_lags

    result_format(args.output)
    profiles = load_dataset(args.profiles, "lag_profile")
    lags = profile_fit_lags(profiles, args)
    grid, grid_name = load_grid(args.grid)
    null = cmr_like_null(profiles, grid, objective=args.objective, lags=lags, n_null=args.n_null, rng=args.seed,
                         alpha=args.alpha, variable=args.variable)
    path = write_result(null, args.output)
    a = null.attrs
    print(f"wrote {path}: {a['n_units']} units against {grid_name} ({args.objective}); "
          f"{100 * a['share_cmr_like']:.0f}% below {CMR_LIKE_DISTANCE}, {100 * a['share_beyond_chance']:.0f}% "
          f"CMR-like beyond chance (p <= {args.alpha:g} against both nulls); null profiles below {CMR_LIKE_DISTANCE}: "
          f"{100 * a['null_share_cmr_like_permuted']:.0f}% permuted, {100 * a['null_share_cmr_like_smooth']:.0f}% smooth; "
          f"calibrated threshold {a['calibrated_threshold']:.3f}")
    if a["asymmetry_null"] == "sampling":
        print(f"forward asymmetry (lag +1 vs -1 against the unit's own sem, p <= {args.alpha:g}): "
              f"{100 * a['share_forward_beyond_chance']:.0f}% forward, {100 * a['share_backward_beyond_chance']:.0f}% "
              f"backward beyond chance; {100 * a['share_cmr_like_and_forward']:.0f}% CMR-like and forward beyond chance")
    else:
        print("forward asymmetry: no sem variable in the profiles, so no p-value; see the asymmetry variables")
    for line in definition_lines(a):
        print(line)
    return 0


def definition_lines(attrs) -> list[str]:
    """The shares of a profile_null dataset under the study's and the strict definition of CMR-like."""
    def percent(value):
        return "n/a" if value != value else f"{100 * value:.0f}%"  # NaN: the criterion did not apply

    return [f"CMR-like, study's definition (d < {attrs['cmr_like_distance']:g} and beyond both nulls): "
            f"{percent(attrs['share_cmr_like_study'])}; strict definition: {percent(attrs['share_cmr_like_strict'])}",
            f"strict criteria ({attrs['strict_criteria']}) passed alone: attention mass "
            f"{percent(attrs['share_passes_mass'])}, forward effect {percent(attrs['share_passes_forward'])}, "
            f"mirror {percent(attrs['share_passes_mirror'])}; mass criterion: {attrs['mass_criterion']}"]
