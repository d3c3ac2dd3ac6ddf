"""``icl-cmr lag-crp``: the lag-CRP of human free-recall data, per subject, pooled or per list."""
from __future__ import annotations

from .options import RECALL_SOURCES

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
    from .options import add_lags, add_recall_command

    add_lags(add_recall_command(sub, "lag-crp", HELP, DESCRIPTION, "profile", run), None, "lags to keep")


def run(args) -> int:
    from cmr import lag_crp
    from .options import describe_units, write_recall_analysis

    crp, events, path = write_recall_analysis(args, lag_crp, lags=args.lags)
    lags = crp["lag"].values
    print(f"wrote {path}: lag-CRP of {args.source} ({describe_units(crp, events)}, lags {lags[0]}..{lags[-1]})")
    return 0
