"""``icl-cmr grid``: CMR lag profiles over a parameter grid, saved as one lag_profile dataset."""
from __future__ import annotations

import argparse
import sys

from cmr.errors import ParameterError

HELP = "CMR lag profiles over a (beta_enc, beta_rec, gamma) grid (Monte Carlo or teacher-forced)"

KINDS = ("mc", "tf-prob", "tf-logsupport")

DESCRIPTION = """\
Compute lag profiles of the paper's simplified CMR (Ji-An et al., NeurIPS 2024) at every point
of a (beta_enc, beta_rec, gamma) grid and save them as one lag_profile dataset (dims
beta_enc, beta_rec, gamma, lag; a .nc output is ready for `icl-cmr fit`, a .csv one a table).

Kinds:
  mc             the study's Monte Carlo lag distribution (free recall from 20 start positions,
                 --n-trials per start, lags -8..+8), with its Monte Carlo standard error.
                 The full default grid at the study's 500 trials takes a few minutes.
  tf-prob        teacher-forced: recall forced in study order, mean retrieval probability by
                 lag (deterministic, the analogue of attention probabilities; seconds).
  tf-logsupport  teacher-forced mean log retrieval probability by lag (the analogue of
                 pre-softmax attention scores).

Axes are START:STOP:STEP (STOP included) or comma-separated values. Defaults are the study's
grid: beta_enc 0.05:1:0.05, beta_rec 0:1:0.05, gamma 0:1:0.1 (4,620 points).

--variant textbook gives teacher-forced profiles of textbook CMR instead (cymr's parameter
names): grid axes with --axis NAME=AXIS (repeatable, e.g. --axis B_enc=0.1:1:0.1 --axis
T=0.05,0.1,0.2), other parameters from --fixed PARAMS.json or cymr's defaults.

Examples:
  icl-cmr grid --kind tf-logsupport -o tf_grid.nc
  icl-cmr grid --kind mc --n-trials 500 --seed 0 -o mc_grid.nc
  icl-cmr grid --kind mc --beta-enc 0.5:0.7:0.1 --gamma 0.3 --lags=-5:5 -o small.nc
  icl-cmr grid --variant textbook --kind tf-logsupport --axis B_enc=0.1:1:0.1 --axis B_rec=0.1:1:0.1 -o tb.nc
"""


def parse_axis(text: str, name: str):
    """'START:STOP:STEP' (STOP included) or 'a,b,c' -> list of floats."""
    import numpy as np

    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) != 3 or parts[2] <= 0 or parts[1] < parts[0]:
                raise ValueError
            start, stop, step = parts
            count = int(np.floor((stop - start) / step + 1e-9)) + 1
            return [round(start + step * k, 10) for k in range(count)]
        return [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise ParameterError(
            f"--{name.replace('_', '-')} must be START:STOP:STEP with STEP > 0 and STOP >= START, "
            f"or comma-separated numbers; got {text!r}"
        ) from None


def register(sub):
    from .options import add_lags, add_output

    p = sub.add_parser("grid", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=KINDS, default="mc", help="which profile to compute (default mc)")
    p.add_argument("--variant", choices=("paper", "textbook"), default="paper",
                   help="the paper's simplified CMR (default) or textbook CMR (teacher-forced kinds only)")
    p.add_argument("--axis", action="append", default=[], metavar="NAME=AXIS",
                   help="textbook: a grid axis in cymr's names, e.g. B_rec=0:1:0.1 (repeatable)")
    p.add_argument("--fixed", metavar="PARAMS.json", help="textbook: JSON object of the other parameters")
    p.add_argument("--beta-enc", metavar="AXIS", help="encoding drift rates (default 0.05:1:0.05)")
    p.add_argument("--beta-rec", metavar="AXIS", help="retrieval drift rates (default 0:1:0.05)")
    p.add_argument("--gamma", metavar="AXIS", help="weights of the backward input M f_j (default 0:1:0.1)")
    add_lags(p, 8, "lag window (mc renormalises a narrower window)")
    p.add_argument("--n-trials", type=int, default=500, help="mc: trials per start position (default 500, the study's)")
    p.add_argument("--seed", type=int, default=0, help="mc: random seed (default 0)")
    p.add_argument("--list-length", type=int, default=100, help="studied items (default 100)")
    p.add_argument("--jobs", type=int, default=None, help="mc: worker threads (default: all cores)")
    add_output(p, "GRID.nc")
    p.set_defaults(func=run)


def _textbook(args, lags):
    from cmr.grids import textbook_teacher_forced_grid
    from cmr.textbook.parameters import read_parameters

    if args.kind == "mc":
        raise ParameterError("--variant textbook computes teacher-forced profiles: use --kind tf-prob or tf-logsupport")
    if not args.axis:
        raise ParameterError("--variant textbook needs at least one --axis NAME=AXIS, e.g. --axis B_rec=0:1:0.1")
    grid = {}
    for text in args.axis:
        name, sep, values = text.partition("=")
        if not sep or not name:
            raise ParameterError(f"--axis must be NAME=AXIS, e.g. B_rec=0:1:0.1; got {text!r}")
        grid[name.strip()] = parse_axis(values, name.strip())
    fixed = read_parameters(args.fixed) if args.fixed else None
    return textbook_teacher_forced_grid(grid, fixed=fixed, kind=args.kind.removeprefix("tf-"), lags=lags, list_length=args.list_length)


def run(args) -> int:
    from cmr.io import result_format, write_result
    from cmr.grids import paper_mc_grid, paper_teacher_forced_grid

    axes = {
        name: (None if getattr(args, name) is None else parse_axis(getattr(args, name), name))
        for name in ("beta_enc", "beta_rec", "gamma")
    }
    result_format(args.output)
    lags = args.lags
    if args.variant == "textbook":
        grid = _textbook(args, lags)
    elif args.axis or args.fixed:
        raise ParameterError("--axis and --fixed are for --variant textbook; the paper's axes are --beta-enc, --beta-rec, --gamma")
    elif args.kind == "mc":
        grid = paper_mc_grid(
            **axes, n_trials=args.n_trials, rng=args.seed, lags=lags, list_length=args.list_length,
            n_jobs=args.jobs, progress=sys.stderr.isatty() or None,
        )
    else:
        grid = paper_teacher_forced_grid(
            **axes, kind=args.kind.removeprefix("tf-"), lags=lags, list_length=args.list_length
        )
    path = write_result(grid, args.output)
    sizes = " x ".join(f"{d} {n}" for d, n in grid["profile"].sizes.items())
    print(f"wrote {path} ({grid.attrs['profile_kind']}: {sizes})")
    return 0
