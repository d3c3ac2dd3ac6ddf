"""``icl-cmr fit-recall``: maximum-likelihood CMR fits of free-recall data, per subject."""
from __future__ import annotations

HELP = "fit textbook CMR to each subject's recall sequences by maximum likelihood"

DESCRIPTION = """\
Fit textbook CMR (cymr's parameterisation) to each subject of a free-recall data set by
maximum likelihood: seeded differential evolution, then a local L-BFGS-B polish; subjects
run in parallel threads. The likelihood equals cymr's (see icl-cmr loglik).

SOURCE is a bundled data set (psifr:Morton2013, psifr:peers_notask, cymr:Morton2013_mixed)
or a psifr-format CSV file. --free names the fitted parameters; --fixed gives a JSON object
of fixed values; parameters neither free nor fixed take their defaults (docs/parameters.md).
--bounds overrides search ranges, e.g. --bounds T=0.01:2,X1=0:0.1.

The output netCDF (kind recall_fit) holds, per subject and parameter, the fitted values,
plus log-likelihood, number of scored events n, function evaluations, iterations, success
flag, message and time per subject. Open it with cmr.io.load_dataset. With -o FITS.csv (or
.parquet) the output is a table instead: one row per subject, one column per parameter, then
logl, n, nfev, nit, success, n_nan, seconds and message.

Examples:
  icl-cmr fit-recall psifr:Morton2013 --free Lfc,Lcf,P1,P2,B_enc,B_start,B_rec,T,X1,X2 -o fits.nc
  icl-cmr fit-recall data.csv --free B_enc,B_rec,T --fixed fixed.json -o fits.nc --jobs 2
"""


def register(sub):
    import argparse

    from icl_cmr.analyses.commands.options import add_output

    p = sub.add_parser(
        "fit-recall", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name or a psifr-format CSV file")
    p.add_argument("--free", required=True, metavar="NAME,NAME,...", help="comma-separated free parameters")
    p.add_argument("--fixed", default=None, metavar="PARAMS.json", help="JSON object of fixed parameter values")
    p.add_argument("--bounds", default=None, metavar="NAME=LOW:HIGH,...", help="search bounds overriding the defaults")
    add_output(p, "FITS.nc")
    p.add_argument("--seed", type=int, default=0, help="root random seed (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="subjects fitted in parallel threads (default 1)")
    p.add_argument("--subjects", default=None, metavar="S,S,...", help="fit only these subjects")
    p.add_argument("--pool-size", type=int, default=None, metavar="N", help="cymr pool size (default: list-sized context)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def _parse_bounds(text):
    from cmr.errors import ParameterError

    bounds = {}
    for part in filter(None, (text or "").split(",")):
        try:
            name, rng = part.split("=")
            low, high = rng.split(":")
            bounds[name.strip()] = (float(low), float(high))
        except ValueError:
            raise ParameterError(f"--bounds entries must look like NAME=LOW:HIGH; got {part!r}") from None
    return bounds


def run(args) -> int:
    import numpy as np

    from icl_cmr.adapters.recall_data import load_recall_data
    from icl_cmr.analyses.commands.loglik import read_params_json
    from cmr.errors import RecallDataError
    from cmr.textbook.fit import fit_recall
    from cmr.io import result_format, write_result

    result_format(args.output)
    free = [name.strip() for name in args.free.split(",") if name.strip()]
    fixed = read_params_json(args.fixed) if args.fixed else {}
    events = load_recall_data(args.source)
    if args.subjects:
        wanted = [s.strip() for s in args.subjects.split(",")]
        labels = events["subject"].values.astype(str)
        keep = np.isin(labels, wanted)
        if not keep.any():
            raise RecallDataError(f"--subjects {args.subjects!r} matches no subject of {args.source}")
        events = events.isel(trial=np.flatnonzero(keep))
    fits = fit_recall(events, free, fixed, _parse_bounds(args.bounds), rng=args.seed, n_jobs=args.jobs,
                      pool_size=args.pool_size, progress=not args.no_progress)
    path = write_result(fits, args.output)
    print(f"wrote {path}: {fits.sizes['subject']} subject(s), free {', '.join(free)}; "
          f"total logl {float(fits['logl'].sum()):.3f}, {float(fits['seconds'].sum()):.1f} s of fitting")
    return 0
