"""``icl-cmr lag-crp``: the lag-CRP of human free-recall data, per subject, pooled or per list."""
from __future__ import annotations

from icl_cmr.analyses.commands.options import RECALL_SOURCES

HELP = "lag-CRP (temporal contiguity) of free-recall data, per subject, pooled or per list"

DESCRIPTION = f"""\
Compute the lag-conditional response probability (lag-CRP) of free-recall data: for each
transition between two successive correct, first-time recalls, the probability of moving
"lag" serial positions forward (lag > 0) or backward (lag < 0), given which items were still
available. Transitions to or from intrusions and repeated recalls are skipped (the rule of
psifr, whose results this reproduces exactly). Lag 0 is never possible, so its profile is
empty (NaN).

{RECALL_SOURCES}
The output holds, per subject (or pooled, or per list) and lag: actual (transitions made),
possible (transitions possible), profile = actual / possible and sem. Its extension picks
the format: .nc (netCDF with provenance; open it with cmr.load_dataset or xarray), .csv or
.parquet (one row per subject and lag: subject, lag, profile, sem, actual, possible; per
list also list; empty cells where nothing was possible).

Examples:
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.nc
  icl-cmr lag-crp psifr:Morton2013 -o morton_crp.csv --lags 5
  icl-cmr lag-crp my_experiment.csv -o crp.csv --pooled
"""


def register(sub):
    import argparse

    from icl_cmr.analyses.commands.options import add_grouping, add_lags, add_output, add_recall_source

    p = sub.add_parser(
        "lag-crp", help=HELP, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_recall_source(p)
    add_output(p, "OUT.nc")
    add_lags(p, None, "lags to keep")
    add_grouping(p, "profile")
    p.set_defaults(func=run)


def run(args) -> int:
    from cmr import lag_crp, write_result
    from cmr.io import result_format
    from icl_cmr.adapters.recall_data import load_recall_data
    from icl_cmr.analyses.commands.options import describe_units, grouping

    result_format(args.output)
    events = load_recall_data(args.source)
    crp = lag_crp(events, by=grouping(args), lags=args.lags)
    path = write_result(crp, args.output)
    lags = crp["lag"].values
    print(f"wrote {path}: lag-CRP of {args.source} ({describe_units(crp, events)}, lags {lags[0]}..{lags[-1]})")
    return 0
