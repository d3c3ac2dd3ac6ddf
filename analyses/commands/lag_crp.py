"""``icl-cmr lag-crp``: the lag-CRP of human free-recall data, per subject, as netCDF."""
from __future__ import annotations

HELP = "lag-CRP (temporal contiguity) of free-recall data, per subject or pooled"

DESCRIPTION = """\
Compute the lag-conditional response probability (lag-CRP) of free-recall data: for each
transition between two successive correct, first-time recalls, the probability of moving
"lag" serial positions forward (lag > 0) or backward (lag < 0), given which items were still
available. Transitions to or from intrusions and repeated recalls are skipped (the rule of
psifr, whose results this reproduces exactly).

SOURCE is a bundled data set or a CSV file in psifr's long format (one row per study or
recall event; columns subject, list, trial_type = study|recall, position, item; recall rows'
position is the output position).

Bundled data sets (read from the installed packages, not shipped here):
  psifr:Morton2013       40 subjects x 48 lists x 24 items
  psifr:peers_notask     126 subjects x 28 lists x 16 items (PEERS; the paper's Fig. 4a)
  cymr:Morton2013_mixed  29 subjects x 30 lists x 24 items (needs cymr)

The output netCDF holds, per subject (or pooled) and lag: actual (transitions made),
possible (transitions possible), profile = actual / possible and sem. Open it with
xarray.open_dataset or cmr.io.load_dataset.

Examples:
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.nc
  icl-cmr lag-crp my_experiment.csv -o crp.nc --max-lag 5 --pooled
"""


def register(sub):
    import argparse

    p = sub.add_parser(
        "lag-crp", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name (e.g. psifr:Morton2013) or a CSV file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.nc", help="netCDF file to write (atomically)")
    p.add_argument(
        "--max-lag", type=int, default=None, metavar="K",
        help="keep lags -K..K only (default: every possible lag, up to list length - 1)",
    )
    p.add_argument(
        "--pooled", action="store_true",
        help="pool all subjects' transitions into one profile (sem across subjects) instead of one per subject",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from adapters.recall_data import load_recall_data
    from cmr.errors import RecallDataError
    from cmr.io import save_dataset
    from cmr.lag_crp import lag_crp

    if args.max_lag is not None and args.max_lag < 0:
        raise RecallDataError(f"--max-lag must be >= 0; got {args.max_lag}")
    events = load_recall_data(args.source)
    crp = lag_crp(events, by=None if args.pooled else "subject", max_lag=args.max_lag)
    path = save_dataset(crp, args.output)
    units = "pooled" if args.pooled else f"{crp.sizes['subject']} subjects"
    lags = crp["lag"].values
    print(f"wrote {path}: lag-CRP of {args.source} ({units}, {events.sizes['trial']} lists, lags {lags[0]}..{lags[-1]})")
    return 0
