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

Grid, lags and objective as for icl-cmr fit (default: the published grid if found, lags -5..5
for heads and -5..-1, 1..5 for recall lag-CRPs, objective paper).

The output's extension picks the format: .nc (the dataset), .csv or .parquet (one row per unit).

Examples:
  icl-cmr null heads.nc -o heads_null.csv
  icl-cmr null morton_crp.nc --objective lsq --n-null 500 -o human_null.nc
"""


def register(sub):
    import argparse

    from icl_cmr.analyses.commands.options import add_profile_fit_options

    p = sub.add_parser("null", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_profile_fit_options(p, "NULL.nc")
    p.add_argument("--n-null", type=int, default=200, metavar="N", help="null profiles per unit and null (default 200)")
    p.add_argument("--alpha", type=float, default=0.05, help="level of the test and the thresholds (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutations and the smooth bank (default 0)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import CMR_LIKE_DISTANCE, cmr_like_null, load_dataset, write_result
    from cmr.io import result_format
    from icl_cmr.adapters.published_grid import load_grid
    from icl_cmr.analyses.commands.options import profile_fit_lags

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
    return 0
