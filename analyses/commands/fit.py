"""``icl-cmr fit``: fit CMR lag profiles to every unit (head or subject) of a lag-profile file."""
from __future__ import annotations

HELP = "fit CMR (and a Gaussian baseline) to lag profiles of heads or human subjects"

DESCRIPTION = """\
Fit the context maintenance and retrieval model (CMR) to every unit of a lag-profile file:
attention heads (icl-cmr heads) and human subjects (icl-cmr lag-crp) go through the same fit.
For each unit, a CMR lag profile from a grid over (beta_enc, beta_rec, gamma) is mapped onto
the unit's profile by gain * cmr + offset, and the CMR distance
  d = mean over lags of (fitted - profile)^2 / variance of the profile over lags
is minimised (0 = perfect; 1 = no better than a flat line).

Lags: by default the study's window -5..+5 for attention heads, and -5..-1, +1..+5 for recall
lag-CRPs (icl-cmr lag-crp), which are undefined at lag 0 (no transition has lag 0); --lags
picks others, e.g. --lags=-3:-1,1:3 (lag 0 is refused for a recall lag-CRP).

Objectives:
  paper  the study's procedure (Ji-An et al., NeurIPS 2024): min/max-matched map, grid search
         on lags -5..+5; reproduces the published GPT-2 fits
  lsq    least-squares map with gain >= 0 (never worse than paper on the same grid), then
         continuous refinement of the CMR parameters between grid points

Next to CMR, a Gaussian bump a + b exp(-(lag-mu)^2 / (2 sigma^2)) is fitted fairly as a
baseline; both get AIC and BIC (CMR: 3 parameters + gain and offset; Gaussian: 4).
--gaussian study runs the study's own procedure instead (mu started at the peak value, a flat
line when the fit fails), which makes the Gaussian look far worse; use it only to reproduce
the study's numbers (icl-cmr top-heads puts both side by side).

The grid: --grid GRID.nc (from icl-cmr grid) or a cmr_crp_grid.npz; by default the study's
published grid, installed with icl-cmr (checksum verified; ICL_CMR_REFERENCE=DIR reads the
study's files from DIR instead).

The output's extension picks the format: .nc (the whole fit dataset), .csv or .parquet (one
row per unit: the unit's labels, distance, gain, offset, beta_enc, beta_rec, gamma, the best
grid point, the Gaussian baseline's parameters and distance, AIC/BIC). icl-cmr export joins
it with the heads' scores or another fit.

Examples:
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.nc
  icl-cmr fit morton_crp.nc -o human_fits.csv
  icl-cmr fit heads.nc --objective lsq --grid grid.nc -o fits.nc
"""


def register(sub):
    import argparse

    from .options import add_profile_fit_options

    p = sub.add_parser("fit", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_profile_fit_options(p, "FITS.nc")
    p.add_argument("--no-refine", action="store_true", help="lsq: stay on the grid (no continuous refinement)")
    p.add_argument("--gaussian", choices=("fair", "study", "none"), default="fair",
                   help="Gaussian baseline: fair least squares (default), the study's own procedure, or none")
    p.add_argument("--no-gaussian", action="store_true", help="skip the Gaussian baseline (as --gaussian none)")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap intervals from the SEMs (N draws)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws (default 0)")
    p.add_argument(
        "--invalid", choices=("raise", "nan"), default="raise",
        help="units with NaN lags or a constant profile: stop with an error (default) or give NaN results",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import CMR_LIKE_DISTANCE, fit_profiles, lag_window, load_dataset, write_result
    from cmr.errors import ParameterError, ProfileError
    from cmr.io import result_format
    from ...adapters.published_grid import load_grid
    from .options import profile_fit_lags

    result_format(args.output)
    if args.bootstrap < 0:
        raise ParameterError(f"--bootstrap must be >= 0; got {args.bootstrap}")
    profiles = load_dataset(args.profiles, "lag_profile")
    lags = profile_fit_lags(profiles, args)
    grid, grid_name = load_grid(args.grid)
    fits = fit_profiles(
        profiles, grid, objective=args.objective, lags=lags,
        refine=False if args.no_refine or args.objective == "paper" else None,
        gaussian=False if args.no_gaussian or args.gaussian == "none" else args.gaussian, n_bootstrap=args.bootstrap, rng=args.seed,
        invalid=args.invalid, variable=args.variable,
    )
    distance = fits["distance"]
    n_units = int(distance.notnull().sum())
    if n_units == 0:  # --invalid nan on data where every unit is invalid: nothing was fitted
        raise ProfileError(
            f"no unit of {args.profiles} could be fitted: all {distance.size} have NaN lags or a constant "
            f"profile in the lag window {lag_window(lags)}; nothing was written"
        )
    path = write_result(fits, args.output)
    below = float((distance < CMR_LIKE_DISTANCE).sum()) / max(n_units, 1)
    skipped = f" ({distance.size - n_units} of {distance.size} invalid units left NaN)" if n_units < distance.size else ""
    line = (f"wrote {path}: {args.objective} fits of {n_units} units{skipped} against {grid_name}; "
            f"median CMR distance {float(distance.median()):.3f}, {100 * below:.0f}% below {CMR_LIKE_DISTANCE}")
    if "gaussian_aic" in fits:
        wins = int((fits["gaussian_aic"] < fits["aic"]).sum())
        line += f"; Gaussian baseline ({fits.attrs['gaussian_procedure']}) better by AIC on {wins}"
    print(line)
    return 0
