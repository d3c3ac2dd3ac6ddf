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

The output holds, per subject (or pooled) and lag: actual (transitions made), possible
(transitions possible), profile = actual / possible and sem. Its extension picks the format:
.nc (netCDF; open it with cmr.load_dataset or xarray), .csv or .parquet (one row per subject
and lag, for a spreadsheet or R).

Examples:
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.nc
  icl-cmr lag-crp my_experiment.csv -o crp.csv --lags 5 --pooled
"""


def register(sub):
    import argparse

    from icl_cmr.analyses.commands.options import add_lags, add_output

    p = sub.add_parser(
        "lag-crp", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("source", metavar="SOURCE", help="bundled data set name (e.g. psifr:Morton2013) or a CSV file")
    add_output(p, "OUT.nc")
    add_lags(p, None, "lags to keep")
    p.add_argument(
        "--pooled", action="store_true",
        help="pool all subjects' transitions into one profile (sem across subjects) instead of one per subject",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import lag_crp, write_result
    from cmr.io import result_format
    from icl_cmr.adapters.recall_data import load_recall_data

    result_format(args.output)
    events = load_recall_data(args.source)
    crp = lag_crp(events, by=None if args.pooled else "subject", lags=args.lags)
    path = write_result(crp, args.output)
    units = "pooled" if args.pooled else f"{crp.sizes['subject']} subjects"
    lags = crp["lag"].values
    print(f"wrote {path}: lag-CRP of {args.source} ({units}, {events.sizes['trial']} lists, lags {lags[0]}..{lags[-1]})")
    return 0
