"""``icl-cmr fit``: fit CMR lag profiles to every unit (head or subject) of a lag-profile file."""
from __future__ import annotations

import os
from pathlib import Path

HELP = "fit CMR (and a Gaussian baseline) to lag profiles of heads or human subjects"

DESCRIPTION = """\
Fit the context maintenance and retrieval model (CMR) to every unit of a lag-profile file:
attention heads (icl-cmr heads) and human subjects (icl-cmr lag-crp) go through the same fit.
For each unit, a CMR lag profile from a grid over (beta_enc, beta_rec, gamma) is mapped onto
the unit's profile by gain * cmr + offset, and the CMR distance
  d = mean over lags of (fitted - profile)^2 / variance of the profile over lags
is minimised (0 = perfect; 1 = no better than a flat line).

Objectives:
  paper  the study's procedure (Ji-An et al., NeurIPS 2024): min/max-matched map, grid search
         on lags -5..+5; reproduces the published GPT-2 fits
  lsq    least-squares map with gain >= 0 (never worse than paper on the same grid), then
         continuous refinement of the CMR parameters between grid points

Next to CMR, a Gaussian bump a + b exp(-(lag-mu)^2 / (2 sigma^2)) is fitted fairly as a
baseline; both get AIC and BIC (CMR: 3 parameters + gain and offset; Gaussian: 4).

The grid: --grid GRID.nc (from icl-cmr grid) or the study's cmr_crp_grid.npz; by default the
published grid if it is found (ICL_CMR_REFERENCE or ../shared/reference next to the project),
else teacher-forced probability profiles of the paper's CMR variant on the study's grid.

Examples:
  icl-cmr fit heads.nc --objective paper -o fits.nc
  icl-cmr fit morton_crp.nc --objective lsq --grid grid.nc -o human_fits.nc
"""


def register(sub):
    import argparse

    p = sub.add_parser("fit", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profiles", metavar="PROFILES.nc", help="lag-profile netCDF (heads or subjects)")
    p.add_argument("-o", "--output", required=True, metavar="FITS.nc", help="netCDF file to write (atomically)")
    p.add_argument("--objective", choices=("paper", "lsq"), default="paper", help="fitting objective (default paper)")
    p.add_argument("--grid", metavar="GRID", default=None, help="CMR grid: a lag-profile .nc or the study's .npz")
    p.add_argument("--max-lag", type=int, default=5, metavar="K", help="fit lags -K..K (default 5, the study's)")
    p.add_argument("--no-refine", action="store_true", help="lsq: stay on the grid (no continuous refinement)")
    p.add_argument("--no-gaussian", action="store_true", help="skip the Gaussian baseline")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N", help="bootstrap intervals from the SEMs (N draws)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws (default 0)")
    p.add_argument(
        "--invalid", choices=("raise", "nan"), default="raise",
        help="units with NaN lags or a constant profile: stop with an error (default) or give NaN results",
    )
    p.add_argument("--variable", default="profile", help="variable of PROFILES.nc to fit (default profile)")
    p.set_defaults(func=run)


def published_grid_path() -> Path | None:
    """The study's grid, if present: $ICL_CMR_REFERENCE or ../shared/reference beside the project."""
    roots = []
    if os.environ.get("ICL_CMR_REFERENCE"):
        roots.append(Path(os.environ["ICL_CMR_REFERENCE"]))
    roots.append(Path(__file__).resolve().parents[2].parent / "shared" / "reference")
    for root in roots:
        path = root / "icl-cmr" / "cmr_crp_grid.npz"
        if path.is_file():
            return path
    return None


def load_grid(spec):
    from cmr.errors import DataSourceError
    from cmr.io import load_dataset

    if spec is None:
        path = published_grid_path()
        if path is None:
            try:
                from cmr.profiles import paper_teacher_forced_grid
            except ImportError:
                raise DataSourceError(
                    "no CMR grid given and the published grid (cmr_crp_grid.npz) was not found; "
                    "make one with `icl-cmr grid ... -o GRID.nc` and pass --grid GRID.nc"
                ) from None
            return paper_teacher_forced_grid(kind="prob"), "the paper's teacher-forced grid (default; published grid not found)"
        spec = path
    path = Path(spec)
    if path.suffix == ".npz":
        from adapters.published_grid import load_published_grid

        return load_published_grid(path), str(path)
    return load_dataset(path, "lag_profile"), str(path)


def run(args) -> int:
    from cmr.errors import ParameterError
    from cmr.io import load_dataset, save_dataset
    from cmr.profile_fit import fit_profiles

    if args.max_lag < 1:
        raise ParameterError(f"--max-lag must be >= 1; got {args.max_lag}")
    if args.bootstrap < 0:
        raise ParameterError(f"--bootstrap must be >= 0; got {args.bootstrap}")
    profiles = load_dataset(args.profiles, "lag_profile")
    grid, grid_name = load_grid(args.grid)
    fits = fit_profiles(
        profiles, grid, objective=args.objective, lags=range(-args.max_lag, args.max_lag + 1),
        refine=False if args.no_refine or args.objective == "paper" else None,
        gaussian=not args.no_gaussian, n_bootstrap=args.bootstrap, seed=args.seed,
        invalid=args.invalid, variable=args.variable,
    )
    path = save_dataset(fits, args.output)
    distance = fits["distance"]
    n_units = int(distance.notnull().sum())
    below = float((distance < 0.5).sum()) / max(n_units, 1)
    line = (f"wrote {path}: {args.objective} fits of {n_units} units against {grid_name}; "
            f"median CMR distance {float(distance.median()):.3f}, {100 * below:.0f}% below 0.5")
    if "gaussian_aic" in fits:
        wins = int((fits["gaussian_aic"] < fits["aic"]).sum())
        line += f"; Gaussian baseline better by AIC on {wins}"
    print(line)
    return 0
